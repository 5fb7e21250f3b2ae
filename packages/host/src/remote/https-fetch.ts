import { type Agent, request as httpsRequest } from "node:https";

/**
 * The part of `fetch` the host protocol uses: a method, headers, a body, a signal — and
 * `withdraw`, which aborts the request only while no answer has begun to arrive (once its status
 * line is in, the answer is read whole): a long-poll claim taken back must never drop an attempt
 * the control plane has begun to hand over.
 */
export type HostFetch = (
  url: string,
  init?: {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Uint8Array;
    signal?: AbortSignal;
    withdraw?: AbortSignal;
  },
) => Promise<Response>;

/**
 * `fetch` over node:https with a given agent (its key, certificate and pinned CA): Node's global
 * fetch takes no client certificate without a dispatcher from a separately installed undici,
 * and node:https takes them directly. The answer is a standard Response with the whole body
 * read, as the host protocol reads every answer whole.
 */
export function httpsFetch(agent: () => Agent): HostFetch {
  return (url, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const withdraw = init.withdraw;
      if (withdraw?.aborted) {
        reject(withdraw.reason);
        return;
      }
      let answering = false;
      const onWithdraw = () => {
        if (!answering) outgoing.destroy(withdraw?.reason instanceof Error ? withdraw.reason : new Error("withdrawn"));
      };
      const outgoing = httpsRequest(
        url,
        {
          method: init.method ?? "GET",
          headers: init.headers ?? {},
          agent: agent(),
          ...(init.signal === undefined ? {} : { signal: init.signal }),
        },
        (incoming) => {
          answering = true;
          withdraw?.removeEventListener("abort", onWithdraw);
          const chunks: Buffer[] = [];
          incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
          incoming.on("error", reject);
          incoming.on("end", () => {
            const status = incoming.statusCode ?? 502;
            const headers = new Headers();
            for (let i = 0; i + 1 < incoming.rawHeaders.length; i += 2) {
              headers.append(incoming.rawHeaders[i] as string, incoming.rawHeaders[i + 1] as string);
            }
            const body = status === 204 || status === 304 ? null : new Uint8Array(Buffer.concat(chunks));
            resolve(new Response(body, { status, headers }));
          });
        },
      );
      outgoing.on("error", (error) => {
        withdraw?.removeEventListener("abort", onWithdraw);
        reject(error);
      });
      withdraw?.addEventListener("abort", onWithdraw, { once: true });
      outgoing.end(init.body);
    });
}
