import { createHash } from "node:crypto";

/** Slices remembered per process: ~100 bytes each, so about 100 MB at most. */
const CAPACITY = 1_000_000;

/**
 * SHA-256 of slices of stored parts, taken at sources.chunk.put while the part's bytes are in
 * memory, so that sources.complete need not read and hash a packed file's bytes a second time.
 * Keyed by the part's digest, offset and length: the blob a digest names never changes (the
 * digest was checked before it was stored), so an entry cannot go stale, and a hit is as good
 * as hashing the slice again. A working set, not a store: a miss (another process, a restart,
 * an evicted entry) only means completion hashes that file itself. Oldest entries go first.
 */
export class SegmentDigests {
  readonly #entries = new Map<string, string>();

  constructor(private readonly capacity = CAPACITY) {}

  /** Hashes each [offset, length] slice of a part's verified bytes and remembers it. */
  remember(partSha256: string, bytes: Uint8Array, slices: readonly (readonly [number, number])[]): void {
    for (const [offset, length] of slices) {
      const key = keyOf(partSha256, offset, length);
      if (this.#entries.has(key)) continue;
      this.#entries.set(
        key,
        createHash("sha256")
          .update(bytes.subarray(offset, offset + length))
          .digest("hex"),
      );
    }
    while (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }

  lookup(partSha256: string, offset: number, length: number): string | undefined {
    return this.#entries.get(keyOf(partSha256, offset, length));
  }
}

const keyOf = (partSha256: string, offset: number, length: number) => `${partSha256}:${offset}:${length}`;
