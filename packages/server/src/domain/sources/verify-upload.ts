import { createHash } from "node:crypto";
import type { BlobStore } from "@kiln/storage";
import type { ManifestFile, SourceManifest } from "./manifest-types.js";
import type { SegmentDigests } from "./segment-digests.js";

/** Parts kept in memory while files are hashed: packs are laid out in path order. */
const CACHED_PARTS = 8;

export type VerificationOutcome =
  | { readonly state: "verified" }
  | { readonly state: "rejected"; readonly rejection: { path: string | null; detail: string } };

/**
 * Verifies a complete upload: every regular file reassembled from its segments against the
 * file's sha256. Every byte a job can receive lies in some file's segments, so this covers each
 * of them once; a part's own digest was checked when it was stored (chunk.put) and names its
 * blob, so hashing whole parts again here would only read and hash the same bytes twice. For the
 * same reason a file that is exactly one whole part has that part's digest, and a packed file
 * whose slice chunk.put already hashed (`segments`) is looked up rather than read again. Nothing
 * is copied: a job materializes each file from the same slices of the same part blobs
 * (domain/jobs/admit-archive-source.ts, host materialize-source.ts), so what was verified is what the
 * job gets, and the upload's bytes are stored once. The first file that does not verify rejects
 * the upload, naming its path.
 */
export async function verifyUpload(
  blobs: BlobStore,
  manifest: SourceManifest,
  heldParts: ReadonlyMap<number, { readonly sha256: string; readonly bytes: number }>,
  segments?: SegmentDigests,
): Promise<VerificationOutcome> {
  const cache = new Map<number, Buffer>();
  const partBytes = async (part: number): Promise<Buffer> => {
    const cached = cache.get(part);
    if (cached !== undefined) {
      cache.delete(part);
      cache.set(part, cached);
      return cached;
    }
    const digest = heldParts.get(part)?.sha256;
    if (digest === undefined) throw new Error(`part ${part} is not held`);
    const bytes = await blobs.get(digest);
    cache.set(part, bytes);
    if (cache.size > CACHED_PARTS) cache.delete(cache.keys().next().value as number);
    return bytes;
  };
  const known = (file: ManifestFile): string | undefined => {
    const [only, ...more] = file.segments;
    const held = only === undefined ? undefined : heldParts.get(only.part);
    if (only === undefined || more.length > 0 || held === undefined) return undefined;
    if (only.offset === 0 && only.length === held.bytes) return held.sha256;
    return segments?.lookup(held.sha256, only.offset, only.length);
  };
  for (const entry of manifest.entries) {
    if (entry.kind !== "file") continue;
    const produced = known(entry) ?? (await hashFile(entry, partBytes));
    if (produced !== entry.sha256) {
      return {
        state: "rejected",
        rejection: {
          path: entry.path,
          detail: `the segments of ${entry.path} produce sha256 ${produced}; the manifest declares ${entry.sha256}`,
        },
      };
    }
  }
  return { state: "verified" };
}

async function hashFile(file: ManifestFile, partBytes: (part: number) => Promise<Buffer>): Promise<string> {
  const hash = createHash("sha256");
  for (const s of file.segments) hash.update((await partBytes(s.part)).subarray(s.offset, s.offset + s.length));
  return hash.digest("hex");
}
