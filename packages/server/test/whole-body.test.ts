/**
 * A request body read whole (web/http/whole-body.ts): into a buffer of its exact declared size as it
 * arrives, or joined from its chunks when undeclared or declared past the preallocated bound;
 * Fastify's refusals for a body over its limit or other than its declared length.
 */
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { describe, it } from "node:test";
import { PREALLOCATED_BYTES_AT_MOST, readWholeBody } from "../src/web/http/whole-body.js";

/** A payload of `chunks` as a socket would deliver them. */
const payloadOf = (...chunks: Buffer[]) => Readable.from(chunks, { objectMode: false });

const bytes = (length: number, seed: number) => Buffer.from(Array.from({ length }, (_, i) => (i * 31 + seed) % 256));

/** Whether `buffer` is the whole of its ArrayBuffer (a body worker is handed it without a copy). */
const ownsItsMemory = (buffer: Buffer) => buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength;

describe("a request body read whole", () => {
  it("copies a declared body's chunks into one buffer of its own, byte for byte", async () => {
    const parts = [bytes(1000, 1), bytes(65536, 2), bytes(7, 3)];
    const whole = Buffer.concat(parts);
    const read = await readWholeBody(payloadOf(...parts), { limit: 1 << 20, contentLength: whole.length });
    assert.deepEqual(read, whole);
    assert.ok(ownsItsMemory(read), "not a slice of a shared pool");
  });

  it("reads a body without a declared length from its chunks", async () => {
    const parts = [bytes(10, 4), bytes(20, 5)];
    const read = await readWholeBody(payloadOf(...parts), { limit: 100, contentLength: Number.NaN });
    assert.deepEqual(read, Buffer.concat(parts));
  });

  it("reads an empty declared body as empty", async () => {
    const read = await readWholeBody(payloadOf(), { limit: 100, contentLength: 0 });
    assert.equal(read.length, 0);
  });

  it("refuses a declared length over the limit before reading a byte", async () => {
    const payload = payloadOf(bytes(10, 6));
    await assert.rejects(readWholeBody(payload, { limit: 100, contentLength: 101 }), {
      code: "FST_ERR_CTP_BODY_TOO_LARGE",
    });
    assert.equal(payload.readableEnded, false, "nothing was read");
  });

  it("refuses an undeclared body once it passes the limit", async () => {
    await assert.rejects(
      readWholeBody(payloadOf(bytes(60, 7), bytes(60, 8)), { limit: 100, contentLength: Number.NaN }),
      {
        code: "FST_ERR_CTP_BODY_TOO_LARGE",
      },
    );
  });

  it("refuses a body longer or shorter than declared", async () => {
    await assert.rejects(readWholeBody(payloadOf(bytes(60, 9), bytes(60, 10)), { limit: 1000, contentLength: 100 }), {
      code: "FST_ERR_CTP_INVALID_CONTENT_LENGTH",
    });
    await assert.rejects(readWholeBody(payloadOf(bytes(60, 11)), { limit: 1000, contentLength: 100 }), {
      code: "FST_ERR_CTP_INVALID_CONTENT_LENGTH",
    });
  });

  it("checks a body declared past the preallocated bound against its declared length too", async () => {
    const declared = PREALLOCATED_BYTES_AT_MOST + 1;
    await assert.rejects(
      readWholeBody(payloadOf(bytes(100, 12)), { limit: 2 * PREALLOCATED_BYTES_AT_MOST, contentLength: declared }),
      { code: "FST_ERR_CTP_INVALID_CONTENT_LENGTH" },
      "a client that declares 32 MiB and sends 100 bytes has the server hold 100 bytes, then is refused",
    );
  });

  it("fails when the client goes mid-body", async () => {
    const payload = new Readable({ read() {} });
    const read = readWholeBody(payload, { limit: 1000, contentLength: 100 });
    payload.push(bytes(10, 13));
    payload.destroy(new Error("aborted"));
    await assert.rejects(read, /aborted/);
  });
});
