import { createHash, randomBytes } from "node:crypto";
import {
  chmodSync,
  closeSync,
  createReadStream,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  write,
  writeSync,
} from "node:fs";
import { access, chmod, constants, copyFile, link, mkdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { assertSha256, type BlobReadStream, type BlobStore, type StoredBlob } from "./blob-store.js";

const writeAsync = promisify(write);

/** Blobs up to this size are written with synchronous calls (see `put`). */
const SYNCHRONOUS_WRITE_BYTES = 1024 * 1024;
/** Blobs up to this size are read with synchronous calls (see `get`). */
const SYNCHRONOUS_READ_BYTES = 8 * 1024 * 1024;

/** Blobs are tenants' sources, logs and artifacts: files 0600 in directories 0700, root's alone. */
const FILE_MODE = 0o600;
const DIRECTORY_MODE = 0o700;

/**
 * Content-addressed bytes on the local filesystem (the embedded default; S3-compatible
 * storage is the scale-out equivalent). A blob is named by its SHA-256, written to a
 * temporary file and renamed into place, so a reader never sees a partial blob and
 * two writers of the same bytes converge on one file. No other user of the host can read one
 * (FILE_MODE, DIRECTORY_MODE; a root an earlier version made readable is closed when this
 * process first writes): nothing outside this process reads them by path, the sandbox included
 * (an attempt's source is written into its workspace).
 */
export class LocalBlobStore implements BlobStore {
  /** Shard directories known to exist: each is created once per process, not once per write. */
  readonly #shards = new Set<string>();

  constructor(readonly root: string) {}

  get location(): string {
    return this.root;
  }

  /** The blob's file: for this store and its tests only; callers go through `BlobStore`. */
  pathOf(sha256: string): string {
    assertSha256(sha256);
    return join(this.root, sha256.slice(0, 2), sha256);
  }

  /**
   * Stores `bytes`. `verifiedSha256` is for a caller that has just hashed them itself (a source
   * part checked against its declared digest): it spares hashing the same bytes twice.
   *
   * Up to 1 MiB (a source pack of small files) the file operations are synchronous on purpose: writing
   * that into the page cache takes about as long as hashing it, which the caller has just done
   * on this thread anyway, while the asynchronous calls cost six thread-pool round trips per
   * blob (stat, mkdir, open, write, close, rename). On a small machine those wake-ups made up
   * most of a small part's cost (docs/benchmarks.md). Larger blobs (4 MiB pieces of large files,
   * artifacts) are written asynchronously, so the event loop never stalls for long: writing
   * 4 MiB synchronously made big parts slower, stalling the socket reads it used to overlap.
   * Both open the file in a shard created once per process (`#create`) and rename it into place.
   */
  async put(bytes: Uint8Array, verifiedSha256?: string): Promise<StoredBlob> {
    const sha256 = verifiedSha256 ?? createHash("sha256").update(bytes).digest("hex");
    const path = this.pathOf(sha256);
    if (!existsSync(path)) {
      const temporary = `${path}.${randomBytes(6).toString("hex")}.tmp`;
      const fd = this.#create(sha256.slice(0, 2), temporary);
      try {
        for (let written = 0; written < bytes.byteLength; ) {
          const length = bytes.byteLength - written;
          written +=
            bytes.byteLength > SYNCHRONOUS_WRITE_BYTES
              ? (await writeAsync(fd, bytes, written, length)).bytesWritten
              : writeSync(fd, bytes, written, length);
        }
      } finally {
        closeSync(fd);
      }
      renameSync(temporary, path);
    }
    return { sha256, bytes: bytes.byteLength };
  }

  /** `staging/` under the root: on the blobs' filesystem, so `putFile` is a hard link. */
  get stagingDirectory(): string {
    return join(this.root, "staging");
  }

  /**
   * Links the file into place under its digest (link(2): no byte is copied, and the name appears
   * whole or not at all, as a rename would make it); the staging name stays for its writer to
   * remove. A file on another filesystem is copied to a temporary name and renamed instead.
   * Every call runs on the thread pool: these are the parts a noisy tenant sends ten a second.
   */
  putFile(path: string, sha256: string): Promise<StoredBlob> {
    return this.#linkIn(path, sha256, false);
  }

  async #linkIn(path: string, sha256: string, shardChecked: boolean): Promise<StoredBlob> {
    const target = this.pathOf(sha256);
    const { size } = await stat(path);
    const shard = sha256.slice(0, 2);
    if (!this.#shards.has(shard)) {
      await mkdir(join(this.root, shard), { recursive: true, mode: DIRECTORY_MODE });
      if (this.#shards.size === 0) await chmod(this.root, DIRECTORY_MODE);
      this.#shards.add(shard);
    }
    try {
      await link(path, target);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" && !shardChecked) {
        // The shard may have gone away behind this process's back: create it again, once.
        this.#shards.delete(shard);
        return this.#linkIn(path, sha256, true);
      }
      if (code === "EXDEV") {
        const temporary = `${target}.${randomBytes(6).toString("hex")}.tmp`;
        await copyFile(path, temporary);
        await chmod(temporary, FILE_MODE);
        await rename(temporary, target);
      } else if (code !== "EEXIST") throw error;
    }
    return { sha256, bytes: size };
  }

  /** Opens a new file in a shard, creating the shard the first time (or again, if it went away). */
  #create(shard: string, path: string): number {
    if (this.#shards.has(shard)) {
      try {
        return openSync(path, "w", FILE_MODE);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      }
    }
    mkdirSync(join(this.root, shard), { recursive: true, mode: DIRECTORY_MODE });
    if (this.#shards.size === 0) chmodSync(this.root, DIRECTORY_MODE);
    this.#shards.add(shard);
    return openSync(path, "w", FILE_MODE);
  }

  /**
   * The blob's bytes. Up to 8 MiB (a source file or part, a log) they are read with synchronous
   * calls, one open, fstat, read and close, instead of the promise API's thread-pool round trip
   * for each (a job's materialization reads dozens of small blobs back to back). Larger ones
   * (artifacts) are read asynchronously.
   */
  async get(sha256: string): Promise<Buffer> {
    const path = this.pathOf(sha256);
    const fd = openSync(path, "r");
    try {
      const size = fstatSync(fd).size;
      if (size <= SYNCHRONOUS_READ_BYTES) {
        const bytes = Buffer.allocUnsafe(size);
        let read = 0;
        while (read < size) {
          const n = readSync(fd, bytes, read, size - read, read);
          if (n === 0) break;
          read += n;
        }
        return read === size ? bytes : bytes.subarray(0, read);
      }
    } finally {
      closeSync(fd);
    }
    return readFile(path);
  }

  async has(sha256: string): Promise<boolean> {
    try {
      await stat(this.pathOf(sha256));
      return true;
    } catch {
      return false;
    }
  }

  /** The file opened for streaming; its length from the same descriptor, so the two agree. */
  async openRead(sha256: string): Promise<BlobReadStream | undefined> {
    const path = this.pathOf(sha256);
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
    try {
      return { bytes: fstatSync(fd).size, stream: createReadStream(path, { fd }) };
    } catch (error) {
      closeSync(fd);
      throw error;
    }
  }

  /** unlink(2): a reader with the file open keeps its bytes until it closes; a missing file is fine. */
  async delete(sha256: string): Promise<void> {
    try {
      await unlink(this.pathOf(sha256));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }

  /** access(2) on the root: no write, so the readiness probe stays cheap. */
  async probeWritable(): Promise<void> {
    await access(this.root, constants.W_OK);
  }
}
