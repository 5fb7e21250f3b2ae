import { createHash } from "node:crypto";
import type { Clock } from "@kiln/contract";
import { clearBlobForPut } from "../artifact-blobs/clear-blob-for-put.js";
import { confirmBlobPut } from "../artifact-blobs/confirm-blob-put.js";
import type { Storage } from "../dialect.js";
import type { BlobReadStream, BlobStore, StoredBlob } from "./blob-store.js";

/** The first and the longest pause between two asks while a sweep is deleting the digest. */
const FIRST_WAIT_MS = 20;
const LONGEST_WAIT_MS = 1000;

/**
 * The blob store every kiln-server writer uses: another store's bytes, with each put cleared
 * against the artifact retention sweep (clear-blob-for-put.ts, confirm-blob-put.ts). Without it
 * a put of bytes a sweep is deleting could skip writing (the blob is still there) and lose them
 * a moment later. A put of a digest being deleted waits until the delete is done (asking again,
 * 20 ms to 1 s apart; at most the mark's lease, after which it writes over the mark), then
 * writes; a put of a digest that was swept writes the bytes back and then makes it held again,
 * starting over if a sweep marked it in between. A digest never published as an artifact
 * (nearly every put) costs one read by primary key.
 *
 * Reads and the sweep's own delete go straight to the store underneath.
 */
export class SweepFencedBlobStore implements BlobStore {
  constructor(
    private readonly inner: BlobStore,
    private readonly deps: { readonly storage: Storage; readonly clock: Clock },
  ) {}

  get location(): string {
    return this.inner.location;
  }

  put(bytes: Uint8Array, verifiedSha256?: string): Promise<StoredBlob> {
    const sha256 = verifiedSha256 ?? createHash("sha256").update(bytes).digest("hex");
    return this.#fenced(sha256, () => this.inner.put(bytes, sha256));
  }

  get stagingDirectory(): string {
    return this.inner.stagingDirectory;
  }

  /** As `put`; the file stays in place until its writer removes it, so a write started over still has it. */
  putFile(path: string, sha256: string): Promise<StoredBlob> {
    return this.#fenced(sha256, () => this.inner.putFile(path, sha256));
  }

  async #fenced(sha256: string, write: () => Promise<StoredBlob>): Promise<StoredBlob> {
    for (let wait = FIRST_WAIT_MS; ; wait = Math.min(wait * 2, LONGEST_WAIT_MS)) {
      const clearance = await clearBlobForPut(this.deps.storage, { sha256, now: this.deps.clock.now() });
      if (clearance.kind === "write") {
        const stored = await write();
        if (clearance.ticket === null) return stored;
        const confirmed = await confirmBlobPut(this.deps.storage, {
          sha256,
          ticket: clearance.ticket,
          now: this.deps.clock.now(),
        });
        if (confirmed === "confirmed") return stored;
      }
      await this.deps.clock.sleep(wait);
    }
  }

  get(sha256: string): Promise<Buffer> {
    return this.inner.get(sha256);
  }

  has(sha256: string): Promise<boolean> {
    return this.inner.has(sha256);
  }

  openRead(sha256: string): Promise<BlobReadStream | undefined> {
    return this.inner.openRead(sha256);
  }

  delete(sha256: string): Promise<void> {
    return this.inner.delete(sha256);
  }

  probeWritable(): Promise<void> {
    return this.inner.probeWritable();
  }
}
