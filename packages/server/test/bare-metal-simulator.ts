import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the simulator answered: method, path and form. */
export interface SimulatedCall {
  readonly method: string;
  readonly path: string;
  readonly form: Record<string, string>;
}

/**
 * A local stand-in for a dedicated-server provider's robot API, in the documented shape the
 * production client (`@kiln/host` BareMetalClient) speaks: basic authentication, form-encoded
 * POSTs to `/reset/{server}`, `/boot/{server}/rescue`, `/boot/{server}/linux`, GET
 * `/server/{server}`, answers wrapped in the resource's name, errors as `{"error": {...}}`.
 *
 * A server may be `wedged`: a reset does not bring it back (its status stays `wedged`) until a
 * reinstallation is armed and it is reset again, after which it is `ready`.
 */
export class BareMetalSimulator {
  readonly calls: SimulatedCall[] = [];
  readonly #servers = new Map<string, { status: string; armed: "none" | "rescue" | "linux"; wedged: boolean }>();
  #server: Server | null = null;

  constructor(private readonly credential: string) {}

  addServer(server: string, options: { wedged: boolean }): void {
    this.#servers.set(server, { status: "ready", armed: "none", wedged: options.wedged });
  }

  async start(): Promise<string> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (c: Buffer) => chunks.push(c));
      request.on("end", () => {
        const send = (status: number, body: unknown) => {
          response.writeHead(status, { "content-type": "application/json" });
          response.end(JSON.stringify(body));
        };
        const error = (status: number, code: string, message: string) =>
          send(status, { error: { status, code, message } });
        const expected = `Basic ${Buffer.from(this.credential).toString("base64")}`;
        if (request.headers.authorization !== expected) return error(401, "UNAUTHORIZED", "Unauthorized");
        const path = request.url ?? "/";
        const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString("utf8")));
        this.calls.push({ method: request.method ?? "GET", path, form });
        const match = /^\/(reset|boot|server)\/([^/]+)(?:\/(rescue|linux))?$/.exec(path);
        const server = match?.[2] === undefined ? undefined : this.#servers.get(decodeURIComponent(match[2]));
        if (match === null || server === undefined) return error(404, "SERVER_NOT_FOUND", "Server not found");
        const number = decodeURIComponent(match[2] as string);
        if (match[1] === "server" && request.method === "GET") {
          return send(200, { server: { server_number: number, status: server.status } });
        }
        if (request.method !== "POST") return error(405, "METHOD_NOT_ALLOWED", "Method not allowed");
        if (match[1] === "reset") {
          if (form.type !== "hw" && form.type !== "sw" && form.type !== "power") {
            return error(400, "INVALID_INPUT", "Invalid input parameters");
          }
          if (server.armed === "linux") server.wedged = false;
          server.status = server.armed === "rescue" ? "rescue" : server.wedged ? "wedged" : "ready";
          server.armed = "none";
          return send(200, { reset: { server_number: number, type: form.type } });
        }
        if (match[3] === "rescue") {
          if (form.os !== "linux") return error(400, "INVALID_INPUT", "Invalid input parameters");
          server.armed = "rescue";
          return send(200, { rescue: { server_number: number, os: "linux", active: true } });
        }
        if (match[3] === "linux") {
          if (form.dist === undefined) return error(400, "INVALID_INPUT", "Invalid input parameters");
          server.armed = "linux";
          return send(200, { linux: { server_number: number, dist: form.dist, active: true } });
        }
        return error(404, "NOT_FOUND", "Not found");
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await new Promise<void>((resolve) => this.#server?.once("listening", () => resolve()));
    const { port } = this.#server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.#server === null ? resolve() : this.#server.close(() => resolve())));
  }
}
