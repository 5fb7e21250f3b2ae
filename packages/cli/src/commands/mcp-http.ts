import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type Server as HttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { KilnClient } from "@kiln/client";
import type { Scope } from "@kiln/contract";
import { createKilnMcpServer, StreamableHTTPServerTransport } from "@kiln/mcp";
import { isLoopbackHost, type ListenAddress, originOf } from "./mcp-address.js";
import { McpStartupError, MIN_HTTP_TOKEN_LENGTH } from "./mcp-environment.js";

/** The one path the transport serves. */
export const MCP_PATH = "/mcp";

/** Largest JSON-RPC request body read (inline job sources travel as integer arrays). */
const MAX_REQUEST_BODY_BYTES = 64 * 1024 * 1024;

export interface McpHttpOptions {
  readonly address: ListenAddress;
  /** KILN_MCP_HTTP_TOKEN: when set, every request must present it as a bearer token. */
  readonly callerToken: string | undefined;
  /** KILN_MCP_HTTP_ALLOWED_ORIGINS: browser origins admitted besides the listener's own. */
  readonly allowedOrigins: readonly string[];
  readonly client: KilnClient;
  readonly scopes: readonly Scope[];
  /** Where diagnostics go (stderr); never a secret. */
  readonly log: (line: string) => void;
}

/**
 * Refuses a configuration that would let anyone who can reach the port act with the
 * server's credential: beyond loopback a caller token of 32 or more characters is required.
 */
export function checkListenSecurity(address: ListenAddress, callerToken: string | undefined): void {
  if (isLoopbackHost(address.host)) return;
  if (callerToken === undefined || callerToken.length < MIN_HTTP_TOKEN_LENGTH) {
    throw new McpStartupError(
      `refusing to listen on ${address.host}:${address.port}: beyond loopback every caller would act with this ` +
        `server's kiln credential, so KILN_MCP_HTTP_TOKEN (${MIN_HTTP_TOKEN_LENGTH} or more characters) must be ` +
        "configured; or listen on 127.0.0.1",
    );
  }
}

const digest = (value: string) => createHash("sha256").update(value).digest();

function presentsToken(header: string | undefined, token: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), digest(token));
}

/**
 * The origins a page served by this listener itself would send: `http://<listen host>:<port>`
 * and, when it listens on loopback (or every interface, loopback included), the same port under
 * each loopback name. Another local port is another origin, as a browser sees it: any page a
 * local dev server serves could otherwise act with this server's kiln credential.
 */
function ownOrigins(address: ListenAddress, port: number): string[] {
  const names = [originOf(address.host, port)];
  const wildcard = address.host === "0.0.0.0" || address.host === "::";
  if (isLoopbackHost(address.host) || wildcard) {
    for (const host of ["localhost", "127.0.0.1", "::1"]) names.push(originOf(host, port));
  }
  return names;
}

/** Absent (a non-browser client) or one of `accepted`; anything else is a foreign page. */
function originAllowed(origin: string | undefined, accepted: ReadonlySet<string>): boolean {
  if (origin === undefined) return true;
  try {
    return accepted.has(new URL(origin).origin);
  } catch {
    return false;
  }
}

/** DNS rebinding: a loopback listener answers only requests addressed to a loopback name. */
function hostAllowed(host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return isLoopbackHost(new URL(`http://${host}`).hostname);
  } catch {
    return false;
  }
}

function refuse(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

/**
 * `kiln mcp http <address>`: streamable HTTP at POST /mcp, stateless, JSON responses.
 * Each request gets its own transport and server (the SDK's stateless pattern), all
 * acting with the one credential.
 */
export async function serveMcpHttp(options: McpHttpOptions): Promise<{ server: HttpServer; url: string }> {
  const { address, callerToken, allowedOrigins, client, scopes, log } = options;
  checkListenSecurity(address, callerToken);
  const loopback = isLoopbackHost(address.host);
  const acceptedOriginsOn = (port: number) => new Set([...ownOrigins(address, port), ...allowedOrigins]);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://kiln.invalid").pathname;
    if (path !== MCP_PATH) return refuse(res, 404, `not found: kiln serves MCP at POST ${MCP_PATH}`);
    if (!originAllowed(req.headers.origin, acceptedOriginsOn(req.socket.localPort ?? address.port))) {
      return refuse(
        res,
        403,
        "forbidden: foreign Origin (only this listener's own origin and KILN_MCP_HTTP_ALLOWED_ORIGINS are served)",
      );
    }
    if (loopback && !hostAllowed(req.headers.host)) return refuse(res, 403, "forbidden: Host is not a loopback name");
    if (callerToken !== undefined && !presentsToken(req.headers.authorization, callerToken)) {
      return refuse(res, 401, "unauthorized: present the caller token as Authorization: Bearer <token>", {
        "www-authenticate": 'Bearer realm="kiln mcp"',
      });
    }
    if (req.method !== "POST") {
      return refuse(res, 405, "method not allowed: this stateless server takes POST only", { allow: "POST" });
    }
    const server = createKilnMcpServer({ client, scopes });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize: MAX_REQUEST_BODY_BYTES,
    });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(`kiln mcp: request failed: ${error instanceof Error ? error.message : String(error)}`);
      if (!res.headersSent) refuse(res, 500, "internal error");
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new McpStartupError(`cannot listen on ${address.host}:${address.port}: ${error.code ?? error.message}`, 1),
      ),
    );
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  return { server, url: `${originOf(bound.address, bound.port)}${MCP_PATH}` };
}
