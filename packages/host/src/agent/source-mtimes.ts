/**
 * Deterministic source mtimes. cargo decides whether a path package is fresh from file
 * modification times: a unit is stale when a source file is newer than its dep-info, and a
 * build script without `rerun-if-changed` is stale when the newest file of its package
 * (name and mtime, compared exactly) differs from the one it last ran against. A freshly
 * materialized source has every mtime "now", so each attempt would rebuild every workspace
 * crate even with a warm target dir.
 *
 * So the lineage keeps a manifest path → (sha256, mtime) of the source its target dir was
 * built from. Materializing the next attempt's source, a file whose bytes are unchanged gets
 * exactly the mtime it had then; a changed or new file gets the attempt's provisioning time,
 * which is later than anything the previous run wrote, so cargo rebuilds what depends on it.
 * Every mtime is set from an integer of milliseconds by the same call, so an unchanged file
 * gets the same on-disk timestamp to the nanosecond each time (cargo compares them exactly).
 */
import { lstat, utimes } from "node:fs/promises";
import { join } from "node:path";
import type { SourceEntry } from "./host-protocol.js";

export interface SourceManifestEntry {
  readonly sha256: string;
  /** Milliseconds since the epoch, as set on the file. */
  readonly mtime_ms: number;
}

/** Source path → what the file was and the mtime it was given. */
export type SourceManifest = Readonly<Record<string, SourceManifestEntry>>;

/** A manifest as stored with a lineage, or null when it is not one (never trust a shape blindly). */
export function parseSourceManifest(value: unknown): SourceManifest | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  // No prototype: a source file may well be called `__proto__` or `constructor`.
  const manifest: Record<string, SourceManifestEntry> = Object.create(null);
  for (const [path, entry] of Object.entries(value)) {
    const e = entry as Partial<SourceManifestEntry> | null;
    if (typeof e?.sha256 !== "string" || typeof e.mtime_ms !== "number" || !Number.isInteger(e.mtime_ms)) return null;
    manifest[path] = { sha256: e.sha256, mtime_ms: e.mtime_ms };
  }
  return manifest;
}

/** The mtimes this attempt's source gets: unchanged bytes keep the previous run's, the rest `nowMs`. */
export function planSourceMtimes(
  source: readonly SourceEntry[],
  previous: SourceManifest | null,
  nowMs: number,
): { manifest: SourceManifest; unchanged: number; changed: number } {
  const manifest: Record<string, SourceManifestEntry> = Object.create(null);
  let unchanged = 0;
  for (const entry of source) {
    // A symlink's own mtime is not what cargo looks at; setting it would follow the link.
    if (entry.kind === "symlink") continue;
    const before = previous !== null && Object.hasOwn(previous, entry.path) ? previous[entry.path] : undefined;
    const keep = before !== undefined && before.sha256 === entry.sha256;
    if (keep) unchanged++;
    manifest[entry.path] = { sha256: entry.sha256, mtime_ms: keep ? before.mtime_ms : Math.floor(nowMs) };
  }
  return { manifest, unchanged, changed: Object.keys(manifest).length - unchanged };
}

/** Sets every file's mtime (and atime) as the manifest says. */
export async function applySourceMtimes(workspaceDir: string, manifest: SourceManifest): Promise<void> {
  for (const [path, entry] of Object.entries(manifest)) {
    const at = new Date(entry.mtime_ms);
    await utimes(join(workspaceDir, path), at, at);
  }
}

/**
 * The manifest without the files the job itself rewrote while it ran (their mtime is no longer
 * the one set): the target dir was built from the rewritten bytes, so such a file must count as
 * changed next time rather than keep an mtime that would vouch for outputs of other bytes.
 */
export async function withoutRewrittenFiles(workspaceDir: string, manifest: SourceManifest): Promise<SourceManifest> {
  const kept: Record<string, SourceManifestEntry> = Object.create(null);
  for (const [path, entry] of Object.entries(manifest)) {
    try {
      const stats = await lstat(join(workspaceDir, path), { bigint: true });
      // Set from whole milliseconds through a double of seconds: equal to within a millisecond.
      if (stats.isFile() && Math.abs(Number(stats.mtimeNs / 1_000_000n) - entry.mtime_ms) <= 1) kept[path] = entry;
    } catch {
      // Removed by the job: not kept either.
    }
  }
  return kept;
}
