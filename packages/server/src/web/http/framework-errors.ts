import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { Refusal } from "../../domain/refusal.js";
import { sendRefusal } from "./error-boundary.js";

/**
 * The longest path parameter the router matches. Every catalogued parameter's schema bounds it
 * well below this (ids of at most 128 characters), so a longer one is refused by validation
 * naming the parameter; past this the router refuses it (framework errors, below).
 */
export const MAX_PARAM_LENGTH = 1024;

/**
 * Errors the router raises before any route is matched (a path parameter over
 * MAX_PARAM_LENGTH, which Fastify answers 414 in a document of its own; a path that is not a
 * valid URL component): answered as the Refusal document like every other refusal.
 */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const refusal =
    error.code === "FST_ERR_MAX_PARAM_LENGTH"
      ? new Refusal("invalid_request", `path has a parameter longer than ${MAX_PARAM_LENGTH} characters`)
      : error.code === "FST_ERR_BAD_URL"
        ? new Refusal("invalid_request", "path is not a valid URL component")
        : new Refusal("unavailable", "the service could not route this request; retry shortly", {
            retry_after_seconds: 1,
          });
  void sendRefusal(reply, refusal);
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them — headers (with the request
 * line) over the server's header size limit, which Fastify answers 431, or a malformed
 * request — answered on the socket as the Refusal document, then the connection is closed
 * (the parser cannot go on with it). A reset or timed-out connection gets nothing.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    socket.destroy(error);
    return;
  }
  const refusal =
    error.code === "HPE_HEADER_OVERFLOW"
      ? new Refusal("invalid_request", "header: the request line and headers exceed the size this service accepts")
      : new Refusal("invalid_request", "the request is not well-formed HTTP/1.1");
  const document = refusal.toDocument();
  const body = JSON.stringify(document);
  if (socket.writable) {
    socket.end(
      `HTTP/1.1 ${document.status} ${STATUS_CODES[document.status] ?? ""}\r\ncontent-type: application/json; charset=utf-8\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  } else socket.destroy(error);
}
