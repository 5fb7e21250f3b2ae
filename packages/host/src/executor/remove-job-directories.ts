/**
 * Deletes an attempt's job directories. The job owned them and may have left anything behind:
 * read-only files, directories without write or search permission (cargo's registry sources
 * are read-only, and a job can chmod 000 whatever it likes). Root ignores those modes, but a
 * non-root agent does not, so on a permission error every directory is made writable and
 * searchable again — walking without following symlinks, so a link planted by the job never
 * redirects the walk outside the directory — and the removal is retried.
 */
import { chmod, lstat, readdir, rm } from "node:fs/promises";
import { join } from "node:path";

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
