import { createHash, randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { LocalBlobStore } from "@kiln/storage";
import type { ManifestFile, SourceManifest } from "./manifest-types.js";

/** Parts kept in memory while files are assembled: packs are laid out in path order. */
const CACHED_PARTS = 16;

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
  const files = manifest.entries.filter((entry): entry is ManifestFile => entry.kind === "file");
  // Files are stored several at a time: each is a handful of file-system calls that the
  // thread pool runs in parallel, and one after another they dominate the completion of a
  // workspace of thousands of small files. Workers take files in manifest order, so the parts
  // they need are adjacent and stay in the part cache.
  const produced: (string | undefined)[] = new Array(files.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    for (let i = next++; i < files.length && !failed; i = next++) {
      const file = files[i] as ManifestFile;
      produced[i] = await storeFile(blobs, file, partBytes, directories);
      if (produced[i] !== file.sha256) failed = true;
    }
  };
  const directories = new Set<string>();
  await Promise.all(Array.from({ length: Math.min(CONCURRENT_FILES, files.length) }, worker));
  // The first file in manifest order that does not verify names the rejection.
  for (const [i, file] of files.entries()) {
    const stored = produced[i];
    if (stored === undefined || stored === file.sha256) continue;
    return {
      state: "rejected",
      rejection: {
        path: file.path,
        detail: `the segments of ${file.path} produce sha256 ${stored}; the manifest declares ${file.sha256}`,
      },
    };
  }
  return { state: "verified" };
}

/** Files hashed and stored at once during completion. */
const CONCURRENT_FILES = 8;

/** Files up to this size are assembled in memory and written with one call. */
const SMALL_FILE_BYTES = 4 * 2 ** 20;

/** Hashes a file's segments and, unless the blob store already has the digest, writes it there. */
async function storeFile(
  blobs: LocalBlobStore,
  file: ManifestFile,
  partBytes: (part: number) => Promise<Buffer>,
  directories: Set<string>,
): Promise<string> {
  const hash = createHash("sha256");
  const target = blobs.pathOf(file.sha256);
  if (!directories.has(dirname(target))) {
    await mkdir(dirname(target), { recursive: true });
    directories.add(dirname(target));
  }
  if (file.size <= SMALL_FILE_BYTES) {
    const pieces: Buffer[] = [];
    for (const s of file.segments) pieces.push((await partBytes(s.part)).subarray(s.offset, s.offset + s.length));
    const content = Buffer.concat(pieces);
    const digest = hash.update(content).digest("hex");
    if (digest !== file.sha256 || (await blobs.has(digest))) return digest;
    const temporary = `${target}.${randomBytes(6).toString("hex")}.tmp`;
    await writeFile(temporary, content);
    await rename(temporary, target);
    return digest;
  }
  if (await blobs.has(file.sha256)) {
    for (const s of file.segments) hash.update((await partBytes(s.part)).subarray(s.offset, s.offset + s.length));
    return hash.digest("hex");
  }
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
