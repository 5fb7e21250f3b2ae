import { createHash, randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import type { LocalBlobStore } from "@kiln/storage";
import type { ManifestFile, SourceManifest } from "./manifest-types.js";

/** Parts kept in memory while files are assembled: packs are laid out in path order. */
const CACHED_PARTS = 8;

export type VerificationOutcome =
  | { readonly state: "verified" }
  | { readonly state: "rejected"; readonly rejection: { path: string | null; detail: string } };

/**
 * Verifies a complete upload: every part's bytes against its digest, then every regular file
 * reassembled from its segments against the file's sha256. Each verified file is stored as a
 * blob of its own (named by that digest), so a job materializes its source file by file,
 * exactly like an inline source. The first file that does not verify rejects the upload,
 * naming its path.
 */
export async function verifyUpload(
  blobs: LocalBlobStore,
  manifest: SourceManifest,
  partDigests: ReadonlyMap<number, string>,
): Promise<VerificationOutcome> {
  const cache = new Map<number, Buffer>();
  const partBytes = async (part: number): Promise<Buffer> => {
    const cached = cache.get(part);
    if (cached !== undefined) {
      cache.delete(part);
      cache.set(part, cached);
      return cached;
    }
    const digest = partDigests.get(part);
    if (digest === undefined) throw new Error(`part ${part} is not held`);
    const bytes = await blobs.get(digest);
    if (createHash("sha256").update(bytes).digest("hex") !== digest) {
      throw new Error(`stored part ${part} does not match its digest ${digest}`);
    }
    cache.set(part, bytes);
    if (cache.size > CACHED_PARTS) cache.delete(cache.keys().next().value as number);
    return bytes;
  };
  for (const entry of manifest.entries) {
    if (entry.kind !== "file") continue;
    const stored = await storeFile(blobs, entry, partBytes);
    if (stored !== entry.sha256) {
      return {
        state: "rejected",
        rejection: {
          path: entry.path,
          detail: `the segments of ${entry.path} produce sha256 ${stored}; the manifest declares ${entry.sha256}`,
        },
      };
    }
  }
  return { state: "verified" };
}

/** Hashes a file's segments and, unless the blob store already has the digest, writes it there. */
async function storeFile(
  blobs: LocalBlobStore,
  file: ManifestFile,
  partBytes: (part: number) => Promise<Buffer>,
): Promise<string> {
  const hash = createHash("sha256");
  const present = await blobs.has(file.sha256);
  if (present) {
    for (const s of file.segments) hash.update((await partBytes(s.part)).subarray(s.offset, s.offset + s.length));
    return hash.digest("hex");
  }
  const target = blobs.pathOf(file.sha256);
  await mkdir(dirname(target), { recursive: true });
  const temporary = `${target}.${randomBytes(6).toString("hex")}.tmp`;
  const out = createWriteStream(temporary);
  try {
    for (const s of file.segments) {
      const piece = (await partBytes(s.part)).subarray(s.offset, s.offset + s.length);
      hash.update(piece);
      if (!out.write(piece)) await new Promise<void>((resolve) => out.once("drain", () => resolve()));
    }
    await new Promise<void>((resolve, reject) =>
      out.end((error?: Error | null) => (error ? reject(error) : resolve())),
    );
    const digest = hash.digest("hex");
    if (digest === file.sha256) await rename(temporary, target);
    else await rm(temporary, { force: true });
    return digest;
  } catch (error) {
    out.destroy();
    await rm(temporary, { force: true });
    throw error;
  }
}
