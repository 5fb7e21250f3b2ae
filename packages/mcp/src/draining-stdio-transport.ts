import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";

/**
 * The SDK's stdio transport, closed when its input ends only once every request it read has
 * been answered. A client may write its requests and close its end at once
 * (`printf '…' | kiln mcp`), or close it as soon as the answer it waited for arrives while an
 * earlier request (a tool call, a round trip to the API) is still under way. Closing at end of
 * input dropped those answers without a word. A request the client cancelled
 * (notifications/cancelled) gets no answer, so it is not waited for.
 *
 * It only moves messages and counts them: what a request does is the server's.
 */
export class DrainingStdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #inner: StdioServerTransport;
  readonly #stdin: Readable;
  /** Requests read and not yet answered (nor cancelled). */
  readonly #unanswered = new Set<RequestId>();
  #inputEnded = false;
  #closing = false;

  constructor(stdin: Readable = process.stdin, stdout: Writable = process.stdout) {
    this.#stdin = stdin;
    this.#inner = new StdioServerTransport(stdin, stdout);
    this.#inner.onmessage = (message) => {
      if (isJSONRPCRequest(message)) this.#unanswered.add(message.id);
      else if (isJSONRPCNotification(message) && message.method === "notifications/cancelled") {
        const cancelled = (message.params as { requestId?: RequestId } | undefined)?.requestId;
        if (cancelled !== undefined) this.#unanswered.delete(cancelled);
      }
      this.onmessage?.(message);
      this.#closeIfAnswered();
    };
    this.#inner.onerror = (error) => this.onerror?.(error);
    this.#inner.onclose = () => this.onclose?.();
  }

  /** Requests read and not yet answered: what closing waits for once the input has ended. */
  get unanswered(): number {
    return this.#unanswered.size;
  }

  async start(): Promise<void> {
    await this.#inner.start();
    this.#stdin.once("end", () => {
      this.#inputEnded = true;
      this.#closeIfAnswered();
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    await this.#inner.send(message);
    if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
      if (message.id !== undefined) this.#unanswered.delete(message.id);
      this.#closeIfAnswered();
    }
  }

  close(): Promise<void> {
    this.#closing = true;
    return this.#inner.close();
  }

  #closeIfAnswered(): void {
    if (!this.#inputEnded || this.#closing || this.#unanswered.size > 0) return;
    this.close().catch((error: unknown) => this.onerror?.(error instanceof Error ? error : new Error(String(error))));
  }
}
