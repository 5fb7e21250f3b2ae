import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readdir, stat, unlink } from "node:fs/promises";
import { join } from "node:path";

/**
 * Bytes are gathered into a buffer of this size and written in one call: one thread-pool round
 * trip per MiB instead of one per socket read (64 KiB), and at most this much held per staging.
 */
const WRITE_BUFFER_BYTES = 1024 * 1024;

/** Bytes received as a stream, written to a staging file and hashed as they passed (`stageBlob`). */
export interface StagedBlob {
  /** The staging file, in the store's staging directory; its writer removes it (`discardStagedBlob`). */
  readonly path: string;
  readonly sha256: string;
  readonly bytes: number;
}

/** Thrown by `stageBlob` once the bytes pass `maxBytes`; what was staged is removed. */
export class StagedBlobTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`more than ${maxBytes} bytes`);
    this.name = "StagedBlobTooLargeError";
  }
}

/**
 * Writes `source` to a new file in `directory`, hashing the bytes as they pass, and resolves with
 * the file, its SHA-256 and its length once the source ends — for bytes that should never be held
 * whole by the event loop (a 4 MiB source part arrives as 64 KiB socket reads: each is hashed
 * and copied into a 1 MiB buffer, and the buffer is written by the thread pool). Nothing is
 * stored yet: the caller checks the digest and then stores the file (`BlobStore.putFile`) or
 * drops it (`discardStagedBlob`). When the source fails or passes `maxBytes`, the file is removed
 * and the error is rethrown.
 *
 * Each chunk is hashed and copied in one synchronous step, so what is written is what was hashed
 * even if the chunk's memory were reused afterwards.
 */
export async function stageBlob(
  directory: string,
  source: AsyncIterable<Uint8Array>,
  maxBytes: number,
): Promise<StagedBlob> {
  // A tenant's bytes: readable by no other user of the host (the blob it becomes is its link).
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const path = join(directory, `${randomBytes(12).toString("hex")}.staged`);
  const file = await open(path, "wx", 0o600);
  const hash = createHash("sha256");
  let bytes = 0;
  try {
    const buffer = Buffer.allocUnsafe(WRITE_BUFFER_BYTES);
    let filled = 0;
    /** Writes `length` bytes of `from` at the file's end (positioned: a short write is resumed). */
    const writeOut = async (from: Uint8Array, length: number) => {
      for (let written = 0; written < length; ) {
        written += (await file.write(from, written, length - written, bytes + written)).bytesWritten;
      }
      bytes += length;
    };
    for await (const chunk of source) {
      if (bytes + filled + chunk.byteLength > maxBytes) throw new StagedBlobTooLargeError(maxBytes);
      if (filled + chunk.byteLength > WRITE_BUFFER_BYTES) {
        await writeOut(buffer, filled);
        filled = 0;
      }
      // Hashed and copied in one synchronous step: what is hashed is what is written.
      hash.update(chunk);
      if (chunk.byteLength > WRITE_BUFFER_BYTES) await writeOut(Buffer.from(chunk), chunk.byteLength);
      else {
        buffer.set(chunk, filled);
        filled += chunk.byteLength;
      }
    }
    await writeOut(buffer, filled);
    await file.close();
  } catch (error) {
    await file.close().catch(() => {});
    await discardStagedBlob(path);
    throw error;
  }
  return { path, sha256: hash.digest("hex"), bytes };
}

/** Removes a staging file; one already gone is not an error. */
export async function discardStagedBlob(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

/**
 * Removes staging files last written before `before`: those of a process killed while it
 * received them (every live one is removed when its response is done, and a request is cut off
 * by Node's request timeout long before). Answers how many it removed; a missing directory is none.
 */
export async function removeStaleStagedBlobs(directory: string, before: Date): Promise<number> {
  let names: string[];
  try {
    names = await readdir(directory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw error;
  }
  let removed = 0;
  for (const name of names.filter((n) => n.endsWith(".staged"))) {
    const path = join(directory, name);
    try {
      if ((await stat(path)).mtimeMs >= before.getTime()) continue;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw error;
    }
    await discardStagedBlob(path);
    removed += 1;
  }
  return removed;
}
