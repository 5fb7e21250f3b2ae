import { createHash, type Hash } from "node:crypto";
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import { posix } from "node:path";
import type { Capture } from "./capture.js";

/** Largest part (sources.chunk.put accepts at most 4 MiB). */
export const PART_BYTES = 4 * 1024 * 1024;
/** Files above this get parts of their own; smaller ones are packed per directory. */
export const LARGE_FILE_BYTES = 64 * 1024;
/** Manifest format version this layout writes. */
export const FORMAT_VERSION = 1;

export interface Segment {
  part: number;
  offset: number;
  length: number;
}

export type ManifestEntry =
  | { kind: "file"; path: string; executable: boolean; size: number; sha256: string; segments: Segment[] }
  | { kind: "symlink"; path: string; target: string };

export interface ManifestPart {
  part: number;
  sha256: string;
  bytes: number;
}

/** Where one part's bytes come from on disk: pieces concatenated in order. */
export interface PartSource {
  part: number;
  sha256: string;
  bytes: number;
  pieces: { absolute: string; offset: number; length: number }[];
}

export interface Totals {
  file_bytes: number;
  entries: number;
  directories: number;
  metadata_bytes: number;
  parts: number;
  part_bytes: number;
}

export interface Archive {
  readonly manifest: { entries: ManifestEntry[]; parts: ManifestPart[] };
  readonly totals: Totals;
  /** SHA-256 of the canonical form (SourceUpload.manifest_sha256): names the tree's content. */
  readonly manifestSha256: string;
  /** SHA-256 over the manifest including its part layout: what the upload id derives from. */
  readonly layoutSha256: string;
  readonly sources: PartSource[];
}

const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

/** The manifest's canonical form (SourceUpload.manifest_sha256 describes it). */
export function canonicalManifest(entries: readonly ManifestEntry[]): Buffer {
  const lines = entries.map((e) =>
    e.kind === "file"
      ? `file\t${e.executable ? 1 : 0}\t${e.size}\t${e.sha256}\t${e.path}\n`
      : `symlink\t${e.target}\t${e.path}\n`,
  );
  return Buffer.from(lines.join(""), "utf8");
}

/** Distinct directories implied by the paths (every proper prefix ending before a `/`). */
export function impliedDirectories(paths: readonly string[]): number {
  const dirs = new Set<string>();
  for (const path of paths) {
    let i = path.indexOf("/");
    while (i !== -1) {
      dirs.add(path.slice(0, i));
      i = path.indexOf("/", i + 1);
    }
  }
  return dirs.size;
}

interface Building extends PartSource {
  hash: Hash | null;
}

/**
 * The recommended layout (SourceReservation's description): a file over 64 KiB gets parts of
 * its own, cut at fixed 4 MiB offsets of the file (identical pieces share one part); smaller
 * files are concatenated in path order into one pack per directory, a pack closed before it
 * would pass 4 MiB. Parts are numbered in the order they are opened. Every file is read once.
 */
export function buildArchive(capture: Capture): Archive {
  const parts: Building[] = [];
  const openPacks = new Map<string, Building>();
  const largeByDigest = new Map<string, Building>();
  const entries: ManifestEntry[] = [];
  const buffer = Buffer.allocUnsafe(PART_BYTES);
  const close = (pack: Building) => {
    pack.sha256 = pack.hash?.digest("hex") ?? pack.sha256;
    pack.hash = null;
  };
  const newPart = (): Building => {
    const part: Building = { part: parts.length + 1, sha256: "", bytes: 0, pieces: [], hash: createHash("sha256") };
    parts.push(part);
    return part;
  };
  let fileBytes = 0;

  for (const entry of capture.entries) {
    if (entry.kind === "symlink") {
      entries.push({ kind: "symlink", path: entry.path, target: entry.target });
      continue;
    }
    const fileHash = createHash("sha256");
    const segments: Segment[] = [];
    let size = 0;
    if (entry.size <= LARGE_FILE_BYTES) {
      const data = readFileSync(entry.absolute);
      size = data.length;
      fileHash.update(data);
      if (size > 0) {
        const dir = posix.dirname(entry.path);
        let pack = openPacks.get(dir);
        if (pack !== undefined && pack.bytes + size > PART_BYTES) {
          close(pack);
          pack = undefined;
        }
        if (pack === undefined) {
          pack = newPart();
          openPacks.set(dir, pack);
        }
        segments.push({ part: pack.part, offset: pack.bytes, length: size });
        pack.pieces.push({ absolute: entry.absolute, offset: 0, length: size });
        pack.hash?.update(data);
        pack.bytes += size;
      }
    } else {
      const fd = openSync(entry.absolute, "r");
      try {
        for (;;) {
          let filled = 0;
          while (filled < PART_BYTES) {
            const n = readSync(fd, buffer, filled, PART_BYTES - filled, size + filled);
            if (n === 0) break;
            filled += n;
          }
          if (filled === 0) break;
          const piece = buffer.subarray(0, filled);
          fileHash.update(piece);
          const digest = sha256(piece);
          const key = `${digest}:${filled}`;
          let part = largeByDigest.get(key);
          if (part === undefined) {
            part = { part: parts.length + 1, sha256: digest, bytes: filled, pieces: [], hash: null };
            part.pieces.push({ absolute: entry.absolute, offset: size, length: filled });
            parts.push(part);
            largeByDigest.set(key, part);
          }
          segments.push({ part: part.part, offset: 0, length: filled });
          size += filled;
          if (filled < PART_BYTES) break;
        }
      } finally {
        closeSync(fd);
      }
    }
    fileBytes += size;
    entries.push({
      kind: "file",
      path: entry.path,
      executable: entry.executable,
      size,
      sha256: fileHash.digest("hex"),
      segments,
    });
  }
  for (const pack of openPacks.values()) if (pack.hash !== null) close(pack);

  const manifestParts = parts.map((p) => ({ part: p.part, sha256: p.sha256, bytes: p.bytes }));
  const canonical = canonicalManifest(entries);
  const manifest = { entries, parts: manifestParts };
  return {
    manifest,
    totals: {
      file_bytes: fileBytes,
      entries: entries.length,
      directories: impliedDirectories(entries.map((e) => e.path)),
      metadata_bytes: canonical.length,
      parts: parts.length,
      part_bytes: manifestParts.reduce((sum, p) => sum + p.bytes, 0),
    },
    manifestSha256: sha256(canonical),
    layoutSha256: sha256(JSON.stringify(manifest)),
    sources: parts.map(({ hash: _, ...source }) => source),
  };
}

/** Reads one part's bytes from the workspace. */
export function readPart(source: PartSource): Buffer {
  const out = Buffer.allocUnsafe(source.bytes);
  let at = 0;
  for (const piece of source.pieces) {
    const fd = openSync(piece.absolute, "r");
    try {
      let done = 0;
      while (done < piece.length) {
        const n = readSync(fd, out, at + done, piece.length - done, piece.offset + done);
        if (n === 0) throw new Error(`${piece.absolute} shrank while it was uploaded; run again`);
        done += n;
      }
    } finally {
      closeSync(fd);
    }
    at += piece.length;
  }
  return out;
}

/**
 * The upload id: derived from the repository, the manifest with its layout, and a generation
 * (bumped only when an earlier upload of the same bytes was already claimed or expired), so a
 * run killed mid-upload and started again resumes the same upload.
 */
export function uploadIdOf(repository: string, archive: Archive, generation: number): string {
  const digest = sha256(`${repository}\n${archive.layoutSha256}`).slice(0, 48);
  return `kiln-${digest}-${generation}`;
}
