import { isIP } from "node:net";
import { McpStartupError } from "./mcp-environment.js";

export interface ListenAddress {
  /** Host to bind, without brackets. */
  readonly host: string;
  readonly port: number;
}

/**
 * `host:port`, `[v6]:port` or a bare port (loopback). Port 0 picks a free port.
 */
export function parseListenAddress(address: string): ListenAddress {
  const text = address.trim();
  let host: string;
  let portText: string;
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(text);
  if (bracketed !== null) {
    host = bracketed[1] ?? "";
    portText = bracketed[2] ?? "";
  } else if (/^\d+$/.test(text)) {
    host = "127.0.0.1";
    portText = text;
  } else {
    const colon = text.lastIndexOf(":");
    if (colon <= 0 || text.indexOf(":") !== colon) {
      throw new McpStartupError(`listen address ${address} is not host:port (IPv6 as [addr]:port)`);
    }
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
  }
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) throw new McpStartupError(`listen address ${address} has no valid port`);
  return { host, port };
}

/** A hostname that only ever names this machine's loopback interface. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  const lower = bare.toLowerCase();
  if (lower === "localhost" || lower.endsWith(".localhost")) return true;
  if (isIP(lower) === 4) return lower.startsWith("127.");
  if (isIP(lower) === 6) return lower === "::1" || lower === "0:0:0:0:0:0:0:1" || /^::ffff:127\./.test(lower);
  return false;
}

/** `http://host:port` for a bound address (IPv6 in brackets). */
export function originOf(host: string, port: number): string {
  return `http://${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
}
