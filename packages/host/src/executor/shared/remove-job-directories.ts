/**
 * Deletes an attempt's job directories. The job owned them and may have left anything behind:
 * read-only files, directories without write or search permission (cargo's registry sources
 * are read-only, and a job can chmod 000 whatever it likes). Root ignores those modes, but a
 * non-root agent does not, so on a permission error every directory is made writable and
 * searchable again — walking without following symlinks, so a link planted by the job never
 * redirects the walk outside the directory — and the removal is retried.
 *
 * A host agent that died while it read a target disk (target-disk.ts `withTargetTree`) left
 * that read-only mount below the attempt's directory: mounts below a removed path are detached
 * first, so the removal neither fails on them nor walks into them; so are the kept mounts of
 * target disks whose images lie below it (kept-target-disk.ts).
 */
import { execFile } from "node:child_process";
import { chmod, lstat, readdir, readFile, rm } from "node:fs/promises";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { releaseKeptDisksUnder } from "./kept-target-disk.js";

const run = promisify(execFile);

/** The kernel escapes space, tab, newline and backslash in mount paths as octal (`\040`). */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** Mount points strictly below `path` in this process's mount namespace, deepest first. */
async function mountsBelow(path: string): Promise<string[]> {
  const table = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  return table
    .split("\n")
    .map((line) => line.split(" ")[4])
    .filter((point): point is string => point !== undefined)
    .map(unescapeMountPath)
    .filter((point) => {
      const rel = relative(path, point);
      return rel !== "" && !rel.startsWith("..") && !rel.startsWith("/");
    })
    .sort((a, b) => b.length - a.length);
}

async function detachMountsBelow(path: string): Promise<void> {
  for (const point of await mountsBelow(path)) await run("umount", ["--lazy", point]).catch(() => undefined);
}

async function makeTreeRemovable(path: string): Promise<void> {
  let stats: Awaited<ReturnType<typeof lstat>>;
  try {
    stats = await lstat(path);
  } catch {
    return;
  }
  if (!stats.isDirectory()) return;
  await chmod(path, (stats.mode & 0o7777) | 0o700).catch(() => undefined);
  let entries: string[];
  try {
    entries = await readdir(path);
  } catch {
    return;
  }
  for (const entry of entries) await makeTreeRemovable(join(path, entry));
}

export async function removeJobDirectories(paths: readonly string[]): Promise<void> {
  const failures: string[] = [];
  for (const path of paths) {
    await detachMountsBelow(path);
    // A lineage's target disk kept mounted (kept-target-disk.ts) whose image lies here: unmounted
    // first, or its image would stay allocated, and mounted, after the removal.
    try {
      await releaseKeptDisksUnder([path]);
    } catch (error) {
      failures.push(`${path}: ${String(error)}`);
      continue;
    }
    try {
      await rm(path, { recursive: true, force: true, maxRetries: 3 });
    } catch (first) {
      const code = (first as NodeJS.ErrnoException).code;
      if (code !== "EACCES" && code !== "EPERM" && code !== "ENOTEMPTY") {
        failures.push(`${path}: ${String(first)}`);
        continue;
      }
      await makeTreeRemovable(path);
      try {
        await rm(path, { recursive: true, force: true, maxRetries: 3 });
      } catch (second) {
        failures.push(`${path}: ${String(second)}`);
      }
    }
  }
  if (failures.length > 0) throw new Error(`could not remove job directories: ${failures.join("; ")}`);
}
