import { readFile } from "node:fs/promises";
import type { Readable } from "node:stream";
import {
  type BlobStore,
  discardStagedBlob,
  type StagedBlob,
  StagedBlobTooLargeError,
  type StoredBlob,
  stageBlob,
} from "@kiln/storage";
import { errorCodes } from "fastify";

/**
 * A bytes body (sources.chunk.put's part) as its handler receives it: already written to the blob
 * store's staging directory and hashed as it arrived, never held whole by the event loop — at
 * ten 4 MiB parts a second, buffering each part and copying it through the loop cost every other
 * tenant's requests (reliability trial T15). Nothing is stored until the handler, having checked
 * the digest, calls `store`; the staging file is removed when the response is done (`discard`),
 * whatever happened, so a refused part leaves nothing behind.
 */
export class ReceivedBytes {
  #storing: Promise<unknown> = Promise.resolve();

  constructor(private readonly staged: StagedBlob) {}

  get sha256(): string {
    return this.staged.sha256;
  }

  get bytes(): number {
    return this.staged.bytes;
  }

  /** Stores the bytes under their digest (a hard link for the local store: no copy). */
  store(blobs: BlobStore): Promise<StoredBlob> {
    const storing = blobs.putFile(this.staged.path, this.staged.sha256);
    this.#storing = storing.catch(() => {});
    return storing;
  }

  /** The bytes read back whole: for a packed part, whose small files' digests are taken from them. */
  read(): Promise<Buffer> {
    return readFile(this.staged.path);
  }

  /** Removes the staging file, after a store under way has finished with it. */
  async discard(): Promise<void> {
    await this.#storing;
    await discardStagedBlob(this.staged.path);
  }
}

/**
 * Receives a request's raw bytes into `directory` (stageBlob), refusing them as Fastify's own
 * buffered reading would: a content-length over `limit` before a byte is read, more bytes than
 * `limit` as soon as they pass it (the connection is then closed, as for any parse error), and
 * a body shorter or longer than its content-length.
 */
export async function receiveBytes(
  payload: Readable,
  options: { readonly directory: string; readonly limit: number; readonly contentLength: number },
): Promise<ReceivedBytes> {
  const { directory, limit, contentLength } = options;
  if (contentLength > limit) throw new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
  let staged: StagedBlob;
  try {
    staged = await stageBlob(directory, payload, limit);
  } catch (error) {
    if (error instanceof StagedBlobTooLargeError) throw new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
    throw error;
  }
  if (!Number.isNaN(contentLength) && staged.bytes !== contentLength) {
    await discardStagedBlob(staged.path);
    throw new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH();
  }
  return new ReceivedBytes(staged);
}
