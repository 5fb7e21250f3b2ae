import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * A loopback HTTP proxy in front of a real kiln server: forwards every request untouched,
 * records each sources.chunk.put (POST /api/sources/{upload}/chunks/{part}) that reached the
 * server, and can hold each one back for `putDelayMs` (to catch an upload in the middle).
 */
export class RecordingProxy {
  readonly puts: { upload: string; part: number; status: number }[] = [];
  /** Every request forwarded: method and path (with its query). */
  readonly requests: { method: string; path: string }[] = [];
  putDelayMs = 0;
  private server: Server | undefined;
  /** Requests taken but not yet answered by the server (or failed), and who waits for none. */
  private inFlight = 0;
  private idle: (() => void)[] = [];
  endpoint = "";

  constructor(private readonly target: string) {}

  async start(): Promise<string> {
    const target = new URL(this.target);
    this.server = createServer((req, res) => {
      const put = req.method === "POST" ? /^\/api\/sources\/([^/]+)\/chunks\/(\d+)/.exec(req.url ?? "") : null;
      this.requests.push({ method: req.method ?? "", path: req.url ?? "" });
      this.inFlight += 1;
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        this.inFlight -= 1;
        if (this.inFlight === 0) for (const wake of this.idle.splice(0)) wake();
      };
      const forward = async () => {
        if (put !== null && this.putDelayMs > 0) await sleep(this.putDelayMs);
        // Killed while held back: nothing of it reaches the server.
        if (req.destroyed) {
          end();
          return;
        }
        const upstream = request(
          {
            host: target.hostname,
            port: target.port,
            method: req.method,
            path: req.url,
            headers: req.headers,
          },
          (answer) => {
            if (put !== null) {
              this.puts.push({
                upload: decodeURIComponent(put[1] ?? ""),
                part: Number(put[2]),
                status: answer.statusCode ?? 0,
              });
            }
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
            end();
          },
        );
        upstream.on("error", () => {
          end();
          res.destroy();
        });
        // A client killed while sending its body: the server sees the request cut off, as it
        // would directly. One that had sent it all is answered (and recorded) regardless.
        req.on("aborted", () => upstream.destroy());
        req.pipe(upstream);
      };
      void forward();
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    this.endpoint = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.endpoint;
  }

  /**
   * Resolves once every request taken so far has been answered by the server or failed: after
   * a client is killed, the puts it had in flight are recorded (or never will be) by then.
   */
  settled(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
