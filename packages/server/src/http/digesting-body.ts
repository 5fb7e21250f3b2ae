import { createHash } from "node:crypto";
import { Transform } from "node:stream";
import type { FastifyRequest } from "fastify";

declare module "fastify" {
  interface FastifyRequest {
    /** The SHA-256 of a raw-bytes body, taken piece by piece as it arrived (digestingBody). */
    bodySha256?: string;
  }
}

/**
 * A raw body's stream, passed through unchanged while its SHA-256 is taken chunk by chunk as
 * the bytes arrive (a route's preParsing step), so the digest of a 4 MiB source part is a
 * few hundred small updates between other requests rather than one block of the event loop
 * of 10 ms or more once the whole body is in (T15's disk-filling tenant sends hundreds).
 */
export function digestingBody(request: FastifyRequest, payload: NodeJS.ReadableStream): NodeJS.ReadableStream {
  const hash = createHash("sha256");
  return payload.pipe(
    new Transform({
      transform(chunk: Buffer, _encoding, next) {
        hash.update(chunk);
        next(null, chunk);
      },
      flush(next) {
        request.bodySha256 = hash.digest("hex");
        next();
      },
    }),
  );
}

/** The SHA-256 of `bytes`, the request's raw body: as taken on arrival, or now. */
export function bodyDigestOf(request: FastifyRequest, bytes: Buffer): string {
  return request.bodySha256 ?? createHash("sha256").update(bytes).digest("hex");
}
