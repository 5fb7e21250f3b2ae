import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/** The Cargo workspace root: the nearest Cargo.toml upward with [workspace], else the nearest Cargo.toml. */
export function findWorkspaceRoot(from: string): string | undefined {
  let nearest: string | undefined;
  let dir = resolve(from);
  for (;;) {
    const manifest = join(dir, "Cargo.toml");
    if (existsSync(manifest)) {
      nearest ??= dir;
      if (/^\s*\[workspace\]/m.test(readFileSync(manifest, "utf8"))) return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) return nearest;
    dir = parent;
  }
}

/** `cwd` relative to the root, `/`-separated; `.` at the root or outside it. */
export function workingDirectory(root: string, cwd: string): string {
  const rel = relative(root, resolve(cwd));
  if (rel === "" || rel.startsWith("..")) return ".";
  return rel.split(sep).join("/");
}

const git = (root: string, args: string[]): string | undefined => {
  try {
    return execFileSync("git", ["-C", root, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return undefined;
  }
};

/** owner/name from a git remote URL (https, ssh or scp-like), or undefined. */
export function repositoryFromRemote(url: string): string | undefined {
  const m = /[:/]([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+?)(?:\.git)?\/?$/.exec(url.trim());
  if (m?.[1] === undefined || m[2] === undefined) return undefined;
  return `${m[1]}/${m[2]}`;
}

export interface GitFacts {
  repository: string | undefined;
  commit: string | undefined;
  branch: string | undefined;
  /** Where the asked directory lives in its git repository (`rust`); undefined at its root or outside git. */
  directory: string | undefined;
}

/**
 * The paths where the work tree differs from HEAD as the capture sees it: modified, added,
 * deleted or renamed tracked files and untracked files that are not ignored (`git status
 * --porcelain`, paths relative to the repository root).
 */
export function uncommittedPaths(root: string): string[] {
  let status: string;
  try {
    // Not through `git()`: its trim would eat the first line's leading status column.
    status = execFileSync("git", ["-C", root, "status", "--porcelain=v1", "-z", "--untracked-files=all"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
  } catch {
    return [];
  }
  const paths: string[] = [];
  const entries = status.split("\0");
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i] ?? "";
    if (entry.length < 4) continue;
    paths.push(entry.slice(3));
    // A rename or copy is followed by its source path, which is not another change.
    if (entry[0] === "R" || entry[0] === "C") i++;
  }
  return paths.sort();
}

/** The `origin` remote as owner/name, HEAD's commit and the current branch, where git knows them. */
export function gitFacts(root: string): GitFacts {
  return factsOf(
    git(root, ["remote", "get-url", "origin"]),
    git(root, ["rev-parse", "--verify", "-q", "HEAD"]),
    git(root, ["symbolic-ref", "--short", "-q", "HEAD"]),
    git(root, ["rev-parse", "--show-prefix"]),
  );
}

const gitConcurrently = (root: string, args: string[]): Promise<string | undefined> =>
  new Promise((resolve) =>
    execFile("git", ["-C", root, ...args], { encoding: "utf8" }, (error, stdout) =>
      resolve(error === null ? stdout.trim() : undefined),
    ),
  );

/** gitFacts with its three questions asked at once, while this process goes on. */
export async function gitFactsConcurrently(root: string): Promise<GitFacts> {
  const [remote, commit, branch, prefix] = await Promise.all([
    gitConcurrently(root, ["remote", "get-url", "origin"]),
    gitConcurrently(root, ["rev-parse", "--verify", "-q", "HEAD"]),
    gitConcurrently(root, ["symbolic-ref", "--short", "-q", "HEAD"]),
    gitConcurrently(root, ["rev-parse", "--show-prefix"]),
  ]);
  return factsOf(remote, commit, branch, prefix);
}

function factsOf(
  remote: string | undefined,
  commit: string | undefined,
  branch: string | undefined,
  prefix: string | undefined,
): GitFacts {
  const directory = prefix?.replace(/\/$/, "");
  return {
    repository: remote === undefined ? undefined : repositoryFromRemote(remote),
    commit: commit === "" ? undefined : commit,
    branch: branch === "" ? undefined : branch,
    directory: directory === undefined || directory === "" ? undefined : directory,
  };
}
