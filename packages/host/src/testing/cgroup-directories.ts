import type { Dirent } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * Directories named `name` anywhere in the mounted cgroup hierarchies (bounded depth): what
 * tests look for to prove an attempt's cgroup was removed. For tests of this package and of
 * the server (which runs the host in-process); not part of the host's runtime surface.
 */
export async function cgroupDirectoriesNamed(name: string): Promise<string[]> {
  const mountinfo = await readFile("/proc/self/mountinfo", "utf8");
  const roots = mountinfo
    .split("\n")
    .map((line) => line.split(" "))
    .filter((f) => {
      const dash = f.indexOf("-");
      return dash > 0 && (f[dash + 1] === "cgroup" || f[dash + 1] === "cgroup2");
    })
    .map((f) => f[4] ?? "");
  const found: string[] = [];
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (depth > 6) return;
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      if (e.name === name) found.push(join(dir, e.name));
      else await walk(join(dir, e.name), depth + 1);
    }
  };
  for (const root of roots) if (root !== "") await walk(root, 0);
  return found;
}
