import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";

/** `release/*`, `doc/**` → a matcher on target-relative paths with `/` separators. */
export function patternMatcher(pattern: string): (path: string) => boolean {
  let source = "^";
  const segments = pattern.split("/");
  segments.forEach((segment, index) => {
    const last = index === segments.length - 1;
    if (segment === "**") {
      source += last ? ".*" : "(?:[^/]+/)*";
      return;
    }
    source += segment
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, "[^/]*")
      .replace(/\?/g, "[^/]");
    if (!last) source += "/";
  });
  const re = new RegExp(`${source}$`);
  return (path) => re.test(path);
}

async function* walk(root: string, dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(root, full);
    else if (entry.isFile()) yield relative(root, full).split(sep).join("/");
  }
}

/** Regular files under the target dir matching any pattern, sorted, at most `limit`. */
export async function collectArtifacts(
  targetDir: string,
  patterns: readonly string[],
  limit = 1000,
): Promise<{ path: string; read: () => Promise<Buffer>; bytes: number; executable: boolean }[]> {
  if (patterns.length === 0) return [];
  const matchers = patterns.map(patternMatcher);
  const found: string[] = [];
  for await (const path of walk(targetDir, targetDir)) {
    if (matchers.some((m) => m(path))) found.push(path);
    if (found.length >= limit) break;
  }
  found.sort();
  return Promise.all(
    found.map(async (path) => {
      const { size, mode } = await stat(join(targetDir, path));
      return { path, bytes: size, executable: (mode & 0o100) !== 0, read: () => readFile(join(targetDir, path)) };
    }),
  );
}
