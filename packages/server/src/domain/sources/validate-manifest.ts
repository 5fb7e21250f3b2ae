import { createHash } from "node:crypto";
import { SOURCE_LIMITS } from "@kiln/contract";
import { longSegmentOf } from "../policy/host-safe-strings.js";
import { refuse } from "../refusal.js";
import type { ManifestEntry, Reservation, SourceManifest, SourceTotals } from "./manifest-types.js";

const MiB = 2 ** 20;

export interface ValidatedManifest {
  readonly manifestSha256: string;
  /**
   * Names the whole reservation (repository, format, totals, entries with their segments, parts):
   * equal reservations, however their JSON was ordered, have equal digests and any difference
   * changes it. sources.reserve compares it on a repeat of the upload id; it comes out of the
   * pass that validates every entry anyway, where generic canonical JSON of a manifest with
   * hundreds of thousands of small objects would cost as much again.
   */
  readonly reservationSha256: string;
  /** What the manifest implies; equal to the declared totals once validated. */
  readonly totals: SourceTotals;
}

const invalid = (detail: string): never => refuse("invalid_request", detail);

/**
 * Order of two strings' UTF-8 bytes, as the manifest sorts paths. UTF-16 code unit order (the
 * string comparison) agrees with it except where the first difference puts a surrogate against
 * a unit at or above U+E000; only then are the strings encoded.
 */
function utf8Order(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) return Buffer.compare(Buffer.from(a), Buffer.from(b));
    return x - y;
  }
  return a.length - b.length;
}

/**
 * The declared totals against the per-archive limits: checked first, so an archive over a
 * limit is refused from its totals alone, before its manifest is even read.
 */
export function checkDeclaredTotals(totals: SourceTotals, formatVersion: number): void {
  const formats: readonly number[] = SOURCE_LIMITS.formatVersions;
  if (!formats.includes(formatVersion)) {
    invalid(`body.format_version ${formatVersion} is not accepted; accepted: ${JSON.stringify(formats)}`);
  }
  const over = (field: keyof SourceTotals, limit: number, what: string) => {
    if (totals[field] > limit) invalid(`body.totals.${field} ${totals[field]} exceeds the ${what} (${limit})`);
  };
  over("file_bytes", SOURCE_LIMITS.maxFileBytes, "regular-file budget of 1 GiB");
  over("entries", SOURCE_LIMITS.maxEntries, "limit of file and symlink entries");
  over("directories", SOURCE_LIMITS.maxDirectories, "limit of derived directories");
  over("metadata_bytes", SOURCE_LIMITS.maxMetadataBytes, "archive metadata budget of 32 MiB");
  over("parts", SOURCE_LIMITS.maxParts, "largest part count");
}

/** The manifest's canonical line for one entry (see SourceUpload.manifest_sha256). */
export function canonicalLine(entry: ManifestEntry): string {
  return entry.kind === "file"
    ? `file\t${entry.executable ? 1 : 0}\t${entry.size}\t${entry.sha256}\t${entry.path}\n`
    : `symlink\t${entry.target}\t${entry.path}\n`;
}

function checkPath(field: string, path: string): void {
  const quoted = JSON.stringify(path);
  if (Buffer.byteLength(path) > SOURCE_LIMITS.maxPathBytes) {
    invalid(`${field} is longer than ${SOURCE_LIMITS.maxPathBytes} bytes of UTF-8`);
  }
  if (path.startsWith("/")) invalid(`${field} ${quoted} is absolute`);
  if (/[\\\0]/.test(path)) invalid(`${field} ${quoted} contains a backslash or NUL`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
  if (/[\u0000-\u001f\u007f]/.test(path)) invalid(`${field} ${quoted} contains a control character`);
  for (const segment of path.split("/")) {
    if (segment === "..") invalid(`${field} ${quoted} escapes the tree (a .. segment)`);
    if (segment === "" || segment === ".") invalid(`${field} ${quoted} is not canonical (an empty or . segment)`);
  }
  const long = longSegmentOf(field, path);
  if (long !== null) invalid(long);
}

/**
 * Where a symlink's target leads, followed through the tree's other symlinks as the kernel
 * would, or null when it leaves the tree (or loops). A lexical check alone is not enough:
 * `d/l2 -> l1/..` stays inside lexically but escapes when `d/l1 -> ..` points at the root.
 */
function resolvesInside(linkPath: string, target: string, links: ReadonlyMap<string, string>): boolean {
  const stack = linkPath.split("/").slice(0, -1);
  let queue = target.split("/");
  let hops = 0;
  while (queue.length > 0) {
    const [segment, ...rest] = queue;
    queue = rest;
    if (segment === undefined || segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (stack.length === 0) return false;
      stack.pop();
      continue;
    }
    stack.push(segment);
    const through = links.get(stack.join("/"));
    if (through !== undefined) {
      hops += 1;
      if (hops > 40) return false;
      stack.pop();
      queue = [...through.split("/"), ...queue];
    }
  }
  return true;
}

/**
 * The spec's manifest rules, each refusal naming the offending entry or field and the problem:
 * canonical, sorted, unique paths; no path that is both an entry and a directory of another;
 * symlink targets relative and resolving inside the tree; parts numbered 1..N; segments inside
 * their part, summing to the file's size; no more part bytes outside every segment than inside;
 * the limits;
 * and the declared totals equal to what the manifest implies.
 */
export function validateManifest(reservation: Reservation): ValidatedManifest {
  checkDeclaredTotals(reservation.totals, reservation.format_version);
  const manifest: SourceManifest = reservation.manifest;
  const { entries, parts } = manifest;
  if (entries.length > SOURCE_LIMITS.maxEntries) {
    invalid(`body.manifest.entries holds ${entries.length} entries; at most ${SOURCE_LIMITS.maxEntries}`);
  }
  if (parts.length > SOURCE_LIMITS.maxParts) {
    invalid(`body.manifest.parts holds ${parts.length} parts; at most ${SOURCE_LIMITS.maxParts}`);
  }
  let partBytes = 0;
  parts.forEach((part, index) => {
    if (part.part !== index + 1) {
      invalid(
        `body.manifest.parts[${index}].part is ${part.part}; parts are numbered 1..N in order without gaps (expected ${index + 1})`,
      );
    }
    partBytes += part.bytes;
  });

  const lines: string[] = [];
  /** Each file's segments, in entry order: with the lines and parts, the reservation's identity. */
  const layout: string[] = [];
  let fileBytes = 0;
  let previous: string | null = null;
  const paths = new Set<string>();
  const links = new Map<string, string>();
  /** [part, offset, end] of every segment, for the coverage sweep. */
  const pieces: [number, number, number][] = [];
  entries.forEach((entry, index) => {
    const field = `body.manifest.entries[${index}]`;
    checkPath(`${field}.path`, entry.path);
    if (previous !== null) {
      const order = utf8Order(previous, entry.path);
      if (order === 0) invalid(`${field}.path ${JSON.stringify(entry.path)} duplicates the previous entry`);
      if (order > 0) {
        invalid(
          `${field}.path ${JSON.stringify(entry.path)} is out of order: entries are sorted by path in UTF-8 byte order`,
        );
      }
    }
    previous = entry.path;
    paths.add(entry.path);
    if (entry.kind === "symlink") {
      if (entry.target.startsWith("/")) invalid(`${field}.target ${JSON.stringify(entry.target)} is absolute`);
      if (/[\\\0]/.test(entry.target)) invalid(`${field}.target contains a backslash or NUL`);
      if (Buffer.byteLength(entry.target) > SOURCE_LIMITS.maxPathBytes) {
        invalid(`${field}.target is longer than ${SOURCE_LIMITS.maxPathBytes} bytes of UTF-8`);
      }
      links.set(entry.path, entry.target);
    } else {
      if (entry.size > SOURCE_LIMITS.maxFileBytes) invalid(`${field}.size ${entry.size} exceeds the 1 GiB budget`);
      fileBytes += entry.size;
      let length = 0;
      entry.segments.forEach((segment, j) => {
        const part = parts[segment.part - 1];
        if (part === undefined) {
          invalid(
            `${field}.segments[${j}].part ${segment.part} is not a part of the manifest (it has ${parts.length})`,
          );
          return;
        }
        if (segment.offset + segment.length > part.bytes) {
          invalid(
            `${field}.segments[${j}] (offset ${segment.offset}, length ${segment.length}) runs past the end of part ${segment.part} (${part.bytes} bytes)`,
          );
        }
        length += segment.length;
        pieces.push([segment.part, segment.offset, segment.offset + segment.length]);
      });
      if (length !== entry.size) {
        invalid(
          `${field}.segments hold ${length} bytes but ${field}.size is ${entry.size} (${JSON.stringify(entry.path)})`,
        );
      }
    }
    lines.push(canonicalLine(entry));
    if (entry.kind === "file") {
      let segments = "";
      for (const seg of entry.segments) segments += `${seg.part},${seg.offset},${seg.length};`;
      layout.push(`${segments}\n`);
    }
  });
  if (fileBytes > SOURCE_LIMITS.maxFileBytes) {
    invalid(`body.manifest's files hold ${fileBytes} bytes, over the regular-file budget of 1 GiB`);
  }
  const canonical = lines.join("");
  const metadataBytes = Buffer.byteLength(canonical);
  if (metadataBytes > SOURCE_LIMITS.maxMetadataBytes) {
    invalid(
      `body.manifest's canonical form is ${metadataBytes} bytes, over the metadata budget of 32 MiB (${32 * MiB})`,
    );
  }

  // No entry may also be a directory of another; count the directories the paths imply.
  const directories = new Set<string>();
  entries.forEach((entry, index) => {
    let slash = entry.path.indexOf("/");
    while (slash >= 0) {
      const parent = entry.path.slice(0, slash);
      if (paths.has(parent)) {
        invalid(
          `body.manifest.entries[${index}].path ${JSON.stringify(entry.path)} lies under ${JSON.stringify(parent)}, which is itself an entry (a file or symlink cannot also be a directory)`,
        );
      }
      directories.add(parent);
      slash = entry.path.indexOf("/", slash + 1);
    }
  });
  if (directories.size > SOURCE_LIMITS.maxDirectories) {
    invalid(`body.manifest implies ${directories.size} directories; at most ${SOURCE_LIMITS.maxDirectories}`);
  }

  entries.forEach((entry, index) => {
    if (entry.kind === "symlink" && !resolvesInside(entry.path, entry.target, links)) {
      invalid(
        `body.manifest.entries[${index}] symlink ${JSON.stringify(entry.path)} -> ${JSON.stringify(entry.target)} escapes the tree (or loops)`,
      );
    }
  });

  // Bytes of a part outside every segment (a pack reused after its file changed) are never
  // materialized, but they are stored and reserved: at most as many as the segments cover.
  pieces.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cursor = 0;
  let coveredBytes = 0;
  let firstGap: { part: number; from: number; to: number } | undefined;
  for (const part of parts) {
    let covered = 0;
    let end = 0;
    while (cursor < pieces.length && (pieces[cursor]?.[0] ?? 0) === part.part) {
      const [, start, stop] = pieces[cursor] as [number, number, number];
      if (start > end && firstGap === undefined) firstGap = { part: part.part, from: end, to: start - 1 };
      covered += Math.max(0, stop - Math.max(start, end));
      end = Math.max(end, stop);
      cursor += 1;
    }
    if (end < part.bytes && firstGap === undefined) firstGap = { part: part.part, from: end, to: part.bytes - 1 };
    coveredBytes += covered;
  }
  if (partBytes - coveredBytes > coveredBytes && firstGap !== undefined) {
    invalid(
      `body.manifest.parts: ${partBytes - coveredBytes} part bytes belong to no file segment (first: part ${firstGap.part}, bytes ${firstGap.from} to ${firstGap.to}), more than the ${coveredBytes} the segments cover`,
    );
  }

  const implied: SourceTotals = {
    file_bytes: fileBytes,
    entries: entries.length,
    directories: directories.size,
    metadata_bytes: metadataBytes,
    parts: parts.length,
    part_bytes: partBytes,
  };
  for (const field of Object.keys(implied) as (keyof SourceTotals)[]) {
    if (reservation.totals[field] !== implied[field]) {
      invalid(`body.totals.${field} is ${reservation.totals[field]}; the manifest implies ${implied[field]}`);
    }
  }
  const t = reservation.totals;
  const reservationSha256 = createHash("sha256")
    .update(`${reservation.repository}\n${reservation.format_version}\n`)
    .update(`${t.file_bytes},${t.entries},${t.directories},${t.metadata_bytes},${t.parts},${t.part_bytes}\n`)
    .update(`entries ${lines.length}\n`)
    .update(canonical)
    .update("segments\n")
    .update(layout.join(""))
    .update(`parts ${parts.length}\n`)
    .update(parts.map((p) => `${p.part},${p.sha256},${p.bytes}\n`).join(""))
    .digest("hex");
  return {
    manifestSha256: createHash("sha256").update(canonical).digest("hex"),
    reservationSha256,
    totals: implied,
  };
}
