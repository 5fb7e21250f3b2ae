import { readFile } from "node:fs/promises";
import { join, posix } from "node:path";
import type { FailureLocation } from "@kiln/contract";
import { parse } from "smol-toml";

/**
 * Maps the file names in a job's output back to paths of the submitted repository.
 *
 * rustc is given a workspace member's files relative to the Cargo workspace root and prints them
 * so (`src/lib.rs:3:18`), as do panics (`file!()`); a path dependency outside the workspace is
 * named absolutely, under the sandbox's source mount. The workspace root is wherever Cargo found
 * it, which need not be the repository's root nor the job's working directory: the nearest
 * Cargo.toml at or above the working directory, then the nearest manifest at or above that one
 * with a `[workspace]` table (or the one its `package.workspace` names), else the package itself.
 */
export async function cargoWorkspaceRoot(workspaceDir: string, workingDirectory: string): Promise<string> {
  const read = async (dir: string): Promise<Record<string, unknown> | null> => {
    try {
      return parse(await readFile(join(workspaceDir, dir, "Cargo.toml"), "utf8")) as Record<string, unknown>;
    } catch {
      return null;
    }
  };
  const ancestors = (dir: string): string[] => {
    const found: string[] = [];
    for (let at = dir; ; at = posix.dirname(at)) {
      found.push(at);
      if (at === ".") return found;
    }
  };
  const start = posix.normalize(workingDirectory === "" ? "." : workingDirectory);
  if (start.startsWith("..")) return ".";
  for (const dir of ancestors(start)) {
    const manifest = await read(dir);
    if (manifest === null) continue;
    const explicit = (manifest.package as { workspace?: unknown } | undefined)?.workspace;
    if (typeof explicit === "string") {
      const root = posix.normalize(posix.join(dir, explicit));
      return root.startsWith("..") ? dir : root;
    }
    for (const above of ancestors(dir)) if ((await read(above))?.workspace !== undefined) return above;
    return dir;
  }
  return start;
}

/**
 * A location as printed, with `file` made a repository path where it is one: relative names
 * resolve against the Cargo workspace root, absolute ones under `sourceMount` lose that prefix;
 * anything else (a registry crate, the standard library) stays as printed.
 */
export function inRepository(location: FailureLocation, workspaceRoot: string, sourceMount: string): FailureLocation {
  const printed = location.file;
  let path: string | null = null;
  if (printed.startsWith(`${sourceMount}/`)) path = posix.normalize(printed.slice(sourceMount.length + 1));
  else if (!posix.isAbsolute(printed)) path = posix.normalize(posix.join(workspaceRoot, printed));
  if (path === null || path.startsWith("..") || path === ".") return { ...location, in_repository: false };
  return { ...location, file: path, in_repository: true };
}
