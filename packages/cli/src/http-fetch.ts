import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { createClient, type KilnClient } from "@kiln/client";

const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 16 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 16 });

/**
 * `fetch` for the kiln client: requests carrying raw bytes (sources.chunk.put) go through
 * node:http with a keep-alive agent, which writes a 4 MiB body several times faster than
 * Node's built-in fetch; everything else (JSON, server-sent events) uses the built-in fetch.
 */
export const cliFetch: typeof fetch = async (input, init) => {
  const body = init?.body;
  if (!(body instanceof Uint8Array)) return fetch(input, init);
  const url = new URL(input instanceof Request ? input.url : String(input));
  const headers: Record<string, string> = {};
  new Headers(init?.headers).forEach((value, name) => {
    headers[name] = value;
  });
  headers["content-length"] = String(body.length);
  const secure = url.protocol === "https:";
  const answer = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = (secure ? httpsRequest : httpRequest)(
      url,
      { method: init?.method ?? "POST", headers, agent: secure ? httpsAgent : httpAgent },
      resolve,
    );
    req.on("error", reject);
    init?.signal?.addEventListener("abort", () => req.destroy(new Error("aborted")), { once: true });
    req.end(body);
  });
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
    else if (value !== undefined) responseHeaders.set(name, value);
  }
  const status = answer.statusCode ?? 502;
  const nullBody = status === 204 || status === 304;
  if (nullBody) answer.resume();
  return new Response(nullBody ? null : (Readable.toWeb(answer) as ReadableStream<Uint8Array>), {
    status,
    headers: responseHeaders,
  });
};

/** The typed kiln client with the CLI's transport. */
export function createCliClient(options: { endpoint: string; token?: string }): KilnClient {
  return createClient({ ...options, fetch: cliFetch });
}
