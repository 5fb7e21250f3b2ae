import type { BlobStore } from "@kiln/storage";

/** One entry of a job's source manifest, as both source kinds (inline, streamed archive) store it. */
export type SourceManifestEntry =
  | {
      path: string;
      sha256: string;
      bytes: number;
      executable: boolean;
      /** Streamed archives: the content as slices of part blobs (see host-protocol.ts SourceEntry). */
      segments?: { part: string; offset: number; length: number }[];
    }
  | { path: string; sha256: string; bytes: number; executable: boolean; kind: "symlink"; target: string };

/**
 * One regular file of a job's source manifest, read back: its own blob (inline sources) or the
 * slices of the part blobs it was uploaded in (streamed archives).
 */
export async function readSourceFile(blobs: BlobStore, entry: SourceManifestEntry): Promise<Buffer> {
  if ("kind" in entry) throw new Error(`${entry.path} is a symlink`);
  if (entry.segments === undefined) return blobs.get(entry.sha256);
  const pieces: Buffer[] = [];
  for (const s of entry.segments) pieces.push((await blobs.get(s.part)).subarray(s.offset, s.offset + s.length));
  return Buffer.concat(pieces);
}
