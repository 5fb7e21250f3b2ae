import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { xdgKilnDirectory } from "../config.js";
import type { PreviousLayout } from "./layout.js";

/**
 * The packs of the last verified upload per endpoint and repository, kept so the next upload
 * can point unchanged files into them (layout.ts, buildArchive's `previous`). It holds digests
 * and offsets only, never file contents or credentials. Losing it costs speed, not
 * correctness: the next upload lays the tree out afresh.
 */

/** $XDG_CACHE_HOME/kiln/layouts, else ~/.cache/kiln/layouts; KILN_LAYOUT_CACHE=off disables it. */
export function layoutCacheDirectory(env: NodeJS.ProcessEnv): string | undefined {
  if (env.KILN_LAYOUT_CACHE?.trim() === "off") return undefined;
  return join(xdgKilnDirectory(env, "XDG_CACHE_HOME", ".cache"), "layouts");
}

export function layoutCachePath(directory: string, endpoint: string, repository: string): string {
  const name = createHash("sha256").update(`${endpoint}\n${repository}`).digest("hex").slice(0, 32);
  return join(directory, `${name}.json`);
}

const isDigest = (v: unknown) => typeof v === "string" && /^[0-9a-f]{64}$/.test(v);
const isCount = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

/** The kept layout, or undefined when there is none or it is not one this version wrote. */
export function readLayoutCache(path: string): PreviousLayout | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return undefined;
  }
  const packs = (parsed as { version?: unknown; packs?: unknown }).packs;
  if ((parsed as { version?: unknown }).version !== 1 || !Array.isArray(packs)) return undefined;
  for (const pack of packs) {
    if (!isDigest(pack?.sha256) || !isCount(pack?.bytes) || !Array.isArray(pack?.files)) return undefined;
    for (const f of pack.files) {
      if (!isDigest(f?.sha256) || !isCount(f?.size) || !isCount(f?.offset) || f.offset + f.size > pack.bytes) {
        return undefined;
      }
    }
  }
  return { packs };
}

/** Replaces the kept layout (written aside and renamed, so a reader never sees half of it). */
export function writeLayoutCache(path: string, layout: PreviousLayout): void {
  mkdirSync(join(path, ".."), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, JSON.stringify({ version: 1, packs: layout.packs }), { mode: 0o600 });
  renameSync(temporary, path);
}

/**
 * Beside the layout: the generation of the newest upload of a layout that a submitted job
 * claimed. An upload sources one job, so an unchanged tree's next run needs the generation
 * after it; starting there reserves once, instead of once per earlier run of the same bytes.
 */
const claimedPath = (path: string) => path.replace(/\.json$/, ".claimed.json");

/** The generation a job claimed of this layout, or undefined (another layout, or nothing kept). */
export function readClaimedGeneration(path: string, layoutSha256: string): number | undefined {
  try {
    const parsed = JSON.parse(readFileSync(claimedPath(path), "utf8")) as { layout?: unknown; generation?: unknown };
    return parsed.layout === layoutSha256 && isCount(parsed.generation) ? (parsed.generation as number) : undefined;
  } catch {
    return undefined;
  }
}

export function writeClaimedGeneration(path: string, layoutSha256: string, generation: number): void {
  mkdirSync(join(path, ".."), { recursive: true, mode: 0o700 });
  const target = claimedPath(path);
  const temporary = `${target}.${process.pid}.tmp`;
  writeFileSync(temporary, JSON.stringify({ layout: layoutSha256, generation }), { mode: 0o600 });
  renameSync(temporary, target);
}
