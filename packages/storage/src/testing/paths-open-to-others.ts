import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/**
 * Every file and directory under `root` (itself included) whose mode lets anyone but its owner
 * in, as `<path> <octal mode>`: what the tests of the data dir's privacy expect to be empty.
 */
export function pathsOpenToOthers(root: string): string[] {
  const found: string[] = [];
  const visit = (path: string) => {
    const stats = statSync(path);
    if ((stats.mode & 0o077) !== 0) found.push(`${path} ${(stats.mode & 0o777).toString(8)}`);
    if (stats.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(root);
  return found;
}
