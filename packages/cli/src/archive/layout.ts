import { createHash } from "node:crypto";
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import type { InputOf } from "@kiln/client";
import type { Capture } from "./capture.js";

/** Largest part (sources.chunk.put accepts at most 4 MiB). */
export const PART_BYTES = 4 * 1024 * 1024;
/** Files above this get parts of their own; smaller ones are packed together. */
export const LARGE_FILE_BYTES = 1024 * 1024;
/** A pack is not closed at a boundary file before it holds this much. */
export const PACK_MIN_BYTES = 1024 * 1024;
/** One file in this many (by a hash of its path) ends a pack that holds PACK_MIN_BYTES. */
const BOUNDARY_ONE_IN = 8;
/**
 * A previous layout is reused only while the bytes its reused packs hold for no current file
 * stay under this fraction of the packed bytes; beyond it, packing afresh is cheaper to keep.
 */
const MAX_DEAD_FRACTION = 0.25;
/** Reused packs under PACK_MIN_BYTES (left by earlier edits) kept before they are packed again. */
const MAX_SMALL_PACKS = 16;
/**
 * Small files' bytes kept in memory between hashing and packing; beyond this, files are read
 * again. (Keeping them, file by file, until their pack was sent made sending slower than reading
 * the pack again: the pack's bytes are kept whole instead, KEPT_PART_BYTES.)
 */
const HELD_BYTES = 128 * 1024 * 1024;
/**
 * Parts' bytes kept, whole, from the layout until they are sent, so sending a part is not
 * opening and reading every file of a pack again on the uploader's one thread, between the
 * socket writes of the parts in flight (measured in alternating runs: the parts phase of a
 * 61 MiB tree took 200–270 ms instead of 290–405 ms). Beyond this, parts are read from the
 * workspace when sent.
 */
const KEPT_PART_BYTES = 256 * 1024 * 1024;
/** Manifest format version this layout writes. */
export const FORMAT_VERSION = 1;

/** What sources.reserve takes (SourceReservation): the manifest and totals this layout writes. */
type SourceReservation = InputOf<"sources.reserve">["body"];
export type Manifest = SourceReservation["manifest"];
export type ManifestEntry = Manifest["entries"][number];
export type ManifestPart = Manifest["parts"][number];
export type Segment = Extract<ManifestEntry, { kind: "file" }>["segments"][number];
export type Totals = SourceReservation["totals"];

/** Where one part's bytes come from on disk: pieces concatenated in order. */
export interface PartSource {
  part: number;
  sha256: string;
  bytes: number;
  pieces: { absolute: string; offset: number; length: number }[];
  /** The part's bytes, when the layout kept them from hashing (see KEPT_PART_BYTES). */
  content?: Buffer;
  /**
   * False for a pack reused from a previous layout that also holds bytes of files no longer in
   * the tree: it can be attached from the service but not sent again (see StaleLayoutError).
   */
  reproducible: boolean;
}

/** Where a packed file's content sits in a pack: what the next layout may reuse. */
export interface PackedFile {
  sha256: string;
  size: number;
  offset: number;
}

/**
 * The packs of an earlier upload (kept by the CLI after a verified upload, layout-cache.ts):
 * small files whose content is in one of them are pointed there again instead of being packed
 * anew, so an edit sends a pack of the changed files only.
 */
export interface PreviousLayout {
  packs: { sha256: string; bytes: number; files: PackedFile[] }[];
}

export interface Archive {
  readonly manifest: Manifest;
  readonly totals: Totals;
  /** SHA-256 of the canonical form (SourceUpload.manifest_sha256): names the tree's content. */
  readonly manifestSha256: string;
  /** SHA-256 over the manifest including its part layout: what the upload id derives from. */
  readonly layoutSha256: string;
  readonly sources: PartSource[];
  /** This archive's packs, to be kept as the next upload's PreviousLayout once it verified. */
  readonly packs: PreviousLayout;
  /** Packs of the previous layout this archive points into (0 when it was laid out afresh). */
  readonly reusedPacks: number;
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

/** FNV-1a of the path: whether a pack may end after this file (content-defined, by path). */
function isBoundary(path: string): boolean {
  let h = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    h ^= path.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % BOUNDARY_ONE_IN === 0;
}

/** A part while the layout is built; numbered once every entry is placed. */
interface PartRef {
  number: number;
  sha256: string;
  bytes: number;
  pieces: { at: number; absolute: string; length: number }[];
  /** Pack parts only: the files placed in it (reused: only the current ones). */
  files: PackedFile[] | null;
  /** Byte offsets of large-file pieces (a large part holds one piece of a file at `offset`). */
  fileOffset: number;
  reused: boolean;
  content?: Buffer;
}

interface SmallFile {
  entry: Extract<ManifestEntry, { kind: "file" }>;
  absolute: string;
  data: Buffer | null;
}

interface PlacedSegment {
  ref: PartRef;
  offset: number;
  length: number;
}

/**
 * The recommended layout (SourceReservation's description): a file over 1 MiB gets parts of
 * its own, cut at fixed 4 MiB offsets of the file (identical pieces share one part); smaller
 * files are concatenated in path order into packs of up to 4 MiB, a pack ending after the first
 * file at or past 1 MiB whose path hash is a boundary (one in 8), so an edit moves no other
 * pack's boundaries. Identical small files share one segment.
 *
 * With a `previous` layout, a small file whose content one of its packs already holds points
 * there, and only the others are packed afresh: after an edit the upload sends the changed
 * files, not the packs they used to share. Parts are numbered in order of first use.
 */
export function buildArchive(capture: Capture, previous?: PreviousLayout): Archive {
  const entries: ManifestEntry[] = [];
  const placements = new Map<ManifestEntry, PlacedSegment[]>();
  const small: SmallFile[] = [];
  const largeByDigest = new Map<string, PartRef>();
  const buffer = Buffer.allocUnsafe(PART_BYTES);
  let fileBytes = 0;
  let held = 0;
  const kept = { left: KEPT_PART_BYTES };

  for (const captured of capture.entries) {
    if (captured.kind === "symlink") {
      entries.push({ kind: "symlink", path: captured.path, target: captured.target });
      continue;
    }
    if (captured.size <= LARGE_FILE_BYTES) {
      const data = readFileSync(captured.absolute);
      const entry = {
        kind: "file" as const,
        path: captured.path,
        executable: captured.executable,
        size: data.length,
        sha256: sha256(data),
        segments: [],
      };
      entries.push(entry);
      fileBytes += data.length;
      if (data.length > 0) {
        const keep = held + data.length <= HELD_BYTES;
        if (keep) held += data.length;
        small.push({ entry, absolute: captured.absolute, data: keep ? data : null });
      }
      continue;
    }
    const fileHash = createHash("sha256");
    const placed: PlacedSegment[] = [];
    let size = 0;
    const fd = openSync(captured.absolute, "r");
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
        let ref = largeByDigest.get(key);
        if (ref === undefined) {
          ref = {
            number: 0,
            sha256: digest,
            bytes: filled,
            pieces: [{ at: 0, absolute: captured.absolute, length: filled }],
            files: null,
            fileOffset: size,
            reused: false,
          };
          if (kept.left >= filled) {
            ref.content = Buffer.from(piece);
            kept.left -= filled;
          }
          largeByDigest.set(key, ref);
        }
        placed.push({ ref, offset: 0, length: filled });
        size += filled;
        if (filled < PART_BYTES) break;
      }
    } finally {
      closeSync(fd);
    }
    fileBytes += size;
    const entry = {
      kind: "file" as const,
      path: captured.path,
      executable: captured.executable,
      size,
      sha256: fileHash.digest("hex"),
      segments: [],
    };
    entries.push(entry);
    placements.set(entry, placed);
  }

  const fresh = reusePrevious(small, previous, placements);
  packAfresh(fresh, placements, kept);

  // Number parts in order of first use; fill in every file's segments.
  const refs: PartRef[] = [];
  for (const entry of entries) {
    if (entry.kind !== "file") continue;
    for (const { ref, offset, length } of placements.get(entry) ?? []) {
      if (ref.number === 0) {
        refs.push(ref);
        ref.number = refs.length;
      }
      entry.segments.push({ part: ref.number, offset, length });
    }
  }
  const manifestParts = refs.map((r) => ({ part: r.number, sha256: r.sha256, bytes: r.bytes }));
  const canonical = canonicalManifest(entries);
  const manifest = { entries, parts: manifestParts };
  return {
    manifest,
    totals: {
      file_bytes: fileBytes,
      entries: entries.length,
      directories: impliedDirectories(entries.map((e) => e.path)),
      metadata_bytes: canonical.length,
      parts: refs.length,
      part_bytes: manifestParts.reduce((sum, p) => sum + p.bytes, 0),
    },
    manifestSha256: sha256(canonical),
    layoutSha256: sha256(JSON.stringify(manifest)),
    sources: refs.map(sourceOf),
    packs: {
      packs: refs.flatMap((r) => (r.files === null ? [] : [{ sha256: r.sha256, bytes: r.bytes, files: r.files }])),
    },
    reusedPacks: refs.filter((r) => r.reused).length,
  };
}

/**
 * Points every small file whose content a previous pack holds at it, unless the reused packs
 * would then carry too many bytes of files no longer in the tree; returns the files still to
 * pack (all of them when the previous layout is not reused).
 */
function reusePrevious(
  small: SmallFile[],
  previous: PreviousLayout | undefined,
  placements: Map<ManifestEntry, PlacedSegment[]>,
): SmallFile[] {
  if (previous === undefined || previous.packs.length === 0) return small;
  const index = new Map<string, { ref: PartRef; offset: number }>();
  for (const pack of previous.packs) {
    const ref: PartRef = {
      number: 0,
      sha256: pack.sha256,
      bytes: pack.bytes,
      pieces: [],
      files: [],
      fileOffset: 0,
      reused: true,
    };
    for (const file of pack.files) index.set(`${file.sha256}:${file.size}`, { ref, offset: file.offset });
  }
  const hits = new Map<SmallFile, { ref: PartRef; offset: number }>();
  for (const file of small) {
    const hit = index.get(`${file.entry.sha256}:${file.entry.size}`);
    if (hit !== undefined) hits.set(file, hit);
  }
  // Every edit leaves a small pack of the files it changed; past a handful of them, their
  // files are packed together again rather than the part count growing with every run.
  const smallPacks = new Set([...hits.values()].map((h) => h.ref).filter((ref) => ref.bytes < PACK_MIN_BYTES));
  if (smallPacks.size > MAX_SMALL_PACKS) {
    for (const [file, hit] of hits) if (smallPacks.has(hit.ref)) hits.delete(file);
  }
  const fresh = small.filter((file) => !hits.has(file));
  // Live bytes per reused pack: identical files share a range, so count each offset once.
  const live = new Map<PartRef, Map<number, number>>();
  for (const [file, { ref, offset }] of hits) {
    const ranges = live.get(ref) ?? new Map<number, number>();
    live.set(ref, ranges);
    if (!ranges.has(offset)) {
      ranges.set(offset, file.entry.size);
      ref.files?.push({ sha256: file.entry.sha256, size: file.entry.size, offset });
    }
    ref.pieces.push({ at: offset, absolute: file.absolute, length: file.entry.size });
  }
  let reusedBytes = 0;
  let liveBytes = 0;
  for (const [ref, ranges] of live) {
    reusedBytes += ref.bytes;
    for (const length of ranges.values()) liveBytes += length;
  }
  const freshBytes = fresh.reduce((sum, f) => sum + f.entry.size, 0);
  if (reusedBytes - liveBytes > MAX_DEAD_FRACTION * (reusedBytes + freshBytes)) return small;
  for (const [file, { ref, offset }] of hits) {
    placements.set(file.entry, [{ ref, offset, length: file.entry.size }]);
  }
  return fresh;
}

/** Packs small files in path order (see buildArchive); identical files share one segment. */
function packAfresh(files: SmallFile[], placements: Map<ManifestEntry, PlacedSegment[]>, kept: { left: number }): void {
  let pack: (PartRef & { hash: ReturnType<typeof createHash>; datas: Buffer[] }) | undefined;
  const byContent = new Map<string, PlacedSegment>();
  const close = () => {
    if (pack !== undefined) {
      pack.sha256 = pack.hash.digest("hex");
      if (kept.left >= pack.bytes) {
        pack.content = Buffer.concat(pack.datas, pack.bytes);
        kept.left -= pack.bytes;
      }
      pack.datas = [];
    }
    pack = undefined;
  };
  for (const file of files) {
    const { entry } = file;
    const key = `${entry.sha256}:${entry.size}`;
    const same = byContent.get(key);
    if (same !== undefined) {
      placements.set(entry, [same]);
      continue;
    }
    if (pack !== undefined && pack.bytes + entry.size > PART_BYTES) close();
    if (pack === undefined) {
      pack = {
        number: 0,
        sha256: "",
        bytes: 0,
        pieces: [],
        files: [],
        fileOffset: 0,
        reused: false,
        hash: createHash("sha256"),
        datas: [],
      };
    }
    const data = file.data ?? readFileSync(file.absolute);
    if (data.length !== entry.size || (file.data === null && sha256(data) !== entry.sha256)) {
      throw new Error(`${file.absolute} changed while it was captured; run again`);
    }
    const placed = { ref: pack, offset: pack.bytes, length: entry.size };
    pack.hash.update(data);
    pack.datas.push(data);
    pack.pieces.push({ at: pack.bytes, absolute: file.absolute, length: entry.size });
    pack.files?.push({ sha256: entry.sha256, size: entry.size, offset: pack.bytes });
    pack.bytes += entry.size;
    byContent.set(key, placed);
    placements.set(entry, [placed]);
    if (pack.bytes >= PACK_MIN_BYTES && isBoundary(entry.path)) close();
  }
  close();
}

/** A part's bytes as pieces of files in order; not reproducible when a range has no current file. */
function sourceOf(ref: PartRef): PartSource {
  const pieces: PartSource["pieces"] = [];
  let cursor = 0;
  let reproducible = true;
  for (const piece of [...ref.pieces].sort((a, b) => a.at - b.at)) {
    if (piece.at < cursor) continue; // an identical file's copy of the same range
    if (piece.at > cursor) reproducible = false;
    pieces.push({ absolute: piece.absolute, offset: ref.files === null ? ref.fileOffset : 0, length: piece.length });
    cursor = piece.at + piece.length;
  }
  if (cursor !== ref.bytes) reproducible = false;
  return {
    part: ref.number,
    sha256: ref.sha256,
    bytes: ref.bytes,
    pieces,
    reproducible,
    ...(ref.content === undefined ? {} : { content: ref.content }),
  };
}

/** Reads one part's bytes from the workspace. */
export function readPart(source: PartSource): Buffer {
  if (!source.reproducible) {
    throw new Error(`part ${source.part} holds bytes of files no longer in the tree; it cannot be sent again`);
  }
  if (source.content !== undefined) return source.content;
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
