import type { Readable } from "node:stream";
import { errorCodes } from "fastify";

/**
 * The largest declared length read into a buffer made before its bytes arrive: jobs.submit's
 * whole limit (16 MiB) and then some. A client declaring more (sources.reserve allows 256 MiB)
 * must send it to make the server hold it.
 */
export const PREALLOCATED_BYTES_AT_MOST = 32 * 2 ** 20;

/**
 * A request body read whole into one buffer of its own, each chunk copied in as it arrives.
 * With a content-length the buffer is its exact size from the start, so a large body (a 15 MB
 * submission, a 7 MB manifest) is never concatenated at its end — one copy of every byte at once,
 * tens of ms on the event loop every tenant shares — and the socket's chunks are garbage as soon
 * as they are copied; its memory is its own, so a body worker is handed it without a copy.
 * Without a length (chunked), or with one over PREALLOCATED_BYTES_AT_MOST, chunks are kept and
 * joined once, as Fastify does: memory follows the bytes a client has sent, not what it declared.
 *
 * The refusals are Fastify's, answered as its own body reader's (error-boundary.ts): over
 * `limit` (declared or sent) FST_ERR_CTP_BODY_TOO_LARGE; sent other than declared
 * FST_ERR_CTP_INVALID_CONTENT_LENGTH. A client gone mid-body fails the read.
 */
export async function readWholeBody(
  payload: Readable,
  options: { readonly limit: number; readonly contentLength: number },
): Promise<Buffer> {
  const { limit, contentLength } = options;
  if (contentLength > limit) throw new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
  if (Number.isSafeInteger(contentLength) && contentLength >= 0 && contentLength <= PREALLOCATED_BYTES_AT_MOST) {
    // Not from Node's shared pool: the buffer owns its whole ArrayBuffer, so it can be transferred.
    const whole = Buffer.allocUnsafeSlow(contentLength);
    let length = 0;
    for await (const chunk of payload as AsyncIterable<Buffer>) {
      if (length + chunk.length > contentLength) throw new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH();
      chunk.copy(whole, length);
      length += chunk.length;
    }
    if (length !== contentLength) throw new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH();
    return whole;
  }
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of payload as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > limit) throw new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
    chunks.push(chunk);
  }
  if (Number.isSafeInteger(contentLength) && length !== contentLength) {
    throw new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH();
  }
  return Buffer.concat(chunks, length);
}
