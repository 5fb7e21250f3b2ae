import type { Readable } from "node:stream";

/** What `put` answers: the blob's name (its SHA-256, lower-case hex) and its length. */
export interface StoredBlob {
  readonly sha256: string;
  readonly bytes: number;
}

/** A blob opened for a streamed reply: its length (for content-length) and its bytes. */
export interface BlobReadStream {
  readonly bytes: number;
  readonly stream: Readable;
}

/**
 * Content-addressed bytes: source parts, inline source files, retained Cargo output, artifacts,
 * all in one namespace. A blob is named by the SHA-256 of its bytes, so two writers of the same
 * bytes write the same blob, a blob never changes once written, and no store needs conditional
 * writes or a lock to stay correct: every compare-and-set about which blobs a job or upload owns
 * lives in the database. Only the artifact retention sweep deletes a blob, and it and every
 * writer coordinate through a per-digest row (`SweepFencedBlobStore`, artifact-blobs/).
 *
 * Implementations: `LocalBlobStore` (files under the data directory, the embedded default) and
 * `S3BlobStore` (S3-compatible object storage, KILN_BLOB_URL).
 */
export interface BlobStore {
  /** Where the blobs live, for operators' messages (a directory, or `s3://bucket/prefix`); no secret. */
  readonly location: string;
  /**
   * Stores `bytes` under their digest; storing bytes already held is a no-op. `verifiedSha256`
   * is for a caller that has just hashed the bytes itself, sparing a second hash.
   */
  put(bytes: Uint8Array, verifiedSha256?: string): Promise<StoredBlob>;
  /**
   * Where bytes received as a stream are written before they are stored (`stageBlob`): a
   * directory of this machine from which `putFile` stores them cheaply (the local store's is on
   * its own filesystem, so storing is a hard link, not a copy).
   */
  readonly stagingDirectory: string;
  /**
   * Stores the bytes of the file at `path` under `sha256`, which its writer has just taken of them
   * (`stageBlob`): bytes received as a stream are stored without ever being held whole. The file
   * is left as it was, for its writer to remove; storing bytes already held is a no-op.
   */
  putFile(path: string, sha256: string): Promise<StoredBlob>;
  /** The blob's bytes; rejects with an error whose `code` is `ENOENT` (`isBlobNotFound`) when it is not held. */
  get(sha256: string): Promise<Buffer>;
  has(sha256: string): Promise<boolean>;
  /** The blob as a stream for a reply, with its length; undefined when it is not held. */
  openRead(sha256: string): Promise<BlobReadStream | undefined>;
  /**
   * Removes the blob; removing one that is not held is not an error (two sweeps may both try).
   * Only the artifact retention sweep calls it, after its per-digest mark committed: a blob is
   * shared by every record naming its digest, so no other caller can know it is unreferenced
   * (artifact-blobs/sweep-artifact-blobs.ts).
   */
  delete(sha256: string): Promise<void>;
  /**
   * Rejects when this process cannot store blobs (a directory it may not write, a bucket it
   * cannot reach). Cheap and without writing: readiness probes call it on every states read.
   */
  probeWritable(): Promise<void>;
}

/**
 * The error every store's `get` rejects with for a digest it does not hold. Its code is the
 * local filesystem's own ENOENT, so a caller tells an absent blob from a failing store the
 * same way for every store (the host protocol answers `not_found` for it).
 */
export class BlobNotFoundError extends Error {
  readonly code = "ENOENT";
  constructor(readonly sha256: string) {
    super(`no blob ${sha256}`);
    this.name = "BlobNotFoundError";
  }
}

/** True when `error` says the blob is not held (see `BlobStore.get`). */
export function isBlobNotFound(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | null)?.code === "ENOENT";
}

/** The digest checked before it becomes a file name or an object key. */
export function assertSha256(sha256: string): void {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`not a sha256 digest: ${sha256}`);
}
