import assert from "node:assert/strict";
import { once } from "node:events";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { DrainingStdioServerTransport } from "../src/draining-stdio-transport.js";

/**
 * A real SDK server on the transport, over in-memory pipes, with one tool whose call waits until
 * the test lets it answer: what is under way when the input ends is the test's to decide, not a
 * race.
 */
async function serve() {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const lines: { id?: number; result?: unknown }[] = [];
  let pending = "";
  stdout.on("data", (chunk: Buffer) => {
    pending += chunk.toString();
    for (let at = pending.indexOf("\n"); at >= 0; at = pending.indexOf("\n")) {
      lines.push(JSON.parse(pending.slice(0, at)));
      pending = pending.slice(at + 1);
    }
  });
  const calls: { started: Promise<void>; release: () => void }[] = [];
  const server = new Server({ name: "drain-test", version: "0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [{ name: "wait", inputSchema: { type: "object" as const } }],
  }));
  let entered: () => void = () => {};
  let started = new Promise<void>((resolve) => {
    entered = resolve;
  });
  server.setRequestHandler(CallToolRequestSchema, async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    calls.push({ started, release });
    entered();
    started = new Promise<void>((resolve) => {
      entered = resolve;
    });
    await released;
    return { content: [{ type: "text" as const, text: "done" }] };
  });
  let closed = false;
  const transport = new DrainingStdioServerTransport(stdin, stdout);
  await server.connect(transport);
  server.onclose = () => {
    closed = true;
  };
  const write = (message: object) => stdin.write(`${JSON.stringify(message)}\n`);
  write({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "0" } },
  });
  write({ jsonrpc: "2.0", method: "notifications/initialized" });
  /** Waits for `id`'s answer, however many turns it takes; never for a duration. */
  const answerTo = async (id: number) => {
    while (!lines.some((line) => line.id === id)) await once(stdout, "data");
    return lines.find((line) => line.id === id);
  };
  await answerTo(1);
  /** Sends a tool call and resolves once its handler has started. */
  const call = async (id: number) => {
    const handled = started;
    write({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "wait", arguments: {} } });
    await handled;
    return calls[calls.length - 1] ?? assert.fail("no call");
  };
  return { stdin, lines, call, write, answerTo, transport, isClosed: () => closed };
}

/** Lets the loop run what is already due (I/O callbacks included), so a close that would come has come. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("DrainingStdioServerTransport", () => {
  it("answers a request under way when the input ends, and closes only then", async () => {
    const s = await serve();
    const first = await s.call(2);
    s.write({ jsonrpc: "2.0", id: 3, method: "tools/list" });
    await s.answerTo(3);
    s.stdin.end();
    await once(s.stdin, "end");
    await settle();
    assert.equal(s.isClosed(), false, "closed with a request unanswered");
    assert.equal(s.transport.unanswered, 1);
    first.release();
    assert.deepEqual((await s.answerTo(2))?.result, { content: [{ type: "text", text: "done" }] });
    await settle();
    assert.equal(s.isClosed(), true, "still open once every request was answered and the input had ended");
  });

  it("closes at the end of input when nothing is under way", async () => {
    const s = await serve();
    s.stdin.end();
    await once(s.stdin, "end");
    await settle();
    assert.equal(s.isClosed(), true);
  });

  it("does not wait for a request the client cancelled", async () => {
    const s = await serve();
    const cancelled = await s.call(4);
    s.write({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 4, reason: "gone" } });
    s.stdin.end();
    await once(s.stdin, "end");
    await settle();
    assert.equal(s.isClosed(), true, "waited for a cancelled request");
    cancelled.release();
  });
});
