import { execFile, execFileSync } from "node:child_process";
import { lstatSync, readdirSync, readlinkSync } from "node:fs";
import { join, posix } from "node:path";

/** One regular file or symlink of the captured tree. */
export type CapturedEntry =
  | { kind: "file"; path: string; absolute: string; size: number; executable: boolean }
  | { kind: "symlink"; path: string; absolute: string; target: string };

export interface Capture {
  readonly root: string;
  /** Sorted by path in UTF-8 byte order, unique. */
  readonly entries: CapturedEntry[];
  /** git: tracked plus untracked-not-ignored files (git ls-files); walk: every file but target/ and .git/. */
  readonly method: "git" | "walk";
}

/** A path the archive cannot carry (absolute or escaping link, unsupported file type …). */
export class CaptureError extends Error {
  override name = "CaptureError";
}

/** UTF-8 byte order, as the manifest requires (JavaScript's default sort is UTF-16 order). */
export const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Cargo's build directory at the workspace root never travels. */
const excludedAtRoot = (path: string) => path === "target" || path.startsWith("target/");

/** Whether `root` is inside a git work tree (git on PATH and `git rev-parse` agrees). */
export function insideGitWorkTree(root: string): boolean {
  try {
    return (
      execFileSync("git", ["-C", root, "rev-parse", "--is-inside-work-tree"], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }).trim() === "true"
    );
  } catch {
    return false;
  }
}

const LS_FILES = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"];

function pathsOfListing(out: Buffer): string[] {
  const seen = new Set<string>();
  for (const path of out.toString("utf8").split("\0")) if (path !== "") seen.add(path);
  return [...seen];
}

function gitPaths(root: string): string[] {
  return pathsOfListing(
    execFileSync("git", ["-C", root, ...LS_FILES], { maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "pipe"] }),
  );
}

/** `git` with its output as bytes, or the failure (git absent, not a work tree …) as null. */
function gitOutput(root: string, args: readonly string[]): Promise<Buffer | null> {
  return new Promise((resolve) => {
    execFile("git", ["-C", root, ...args], { encoding: "buffer", maxBuffer: 1 << 30 }, (error, stdout) =>
      resolve(error === null ? stdout : null),
    );
  });
}

/**
 * Every path under `root` but `.git/` anywhere and `target/` at the root, walked with a stack of
 * directories rather than by recursion: a tree of a few hundred thousand files (a vendored
 * dependency set) must not depend on the call stack's size.
 */
function walkPaths(root: string): string[] {
  const out: string[] = [];
  const pending = [""];
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const rel = dir === "" ? entry.name : `${dir}/${entry.name}`;
      if (entry.name === ".git") continue;
      if (dir === "" && entry.name === "target") continue;
      if (entry.isDirectory()) pending.push(rel);
      else out.push(rel);
    }
  }
  return out;
}

/** Resolves a link target from its directory; null when it leaves the tree. */
export function linkStaysInside(path: string, target: string): boolean {
  if (target.startsWith("/")) return false;
  const resolved = posix.normalize(posix.join(posix.dirname(path), target));
  return resolved !== ".." && !resolved.startsWith("../") && !posix.isAbsolute(resolved);
}

/**
 * Captures the workspace at `root`: with git, the tracked files plus the untracked files
 * git does not ignore (exactly `git ls-files --cached --others --exclude-standard`, deleted
 * tracked files skipped); without git, every file but `target/` and `.git/`. `target/` at the
 * root is never captured. Executable bits come from the owner's execute bit; symlinks are
 * kept as links and must stay inside the tree.
 */
export function captureWorkspace(root: string, options: { git?: boolean } = {}): Capture {
  const useGit = options.git ?? insideGitWorkTree(root);
  return captureEntries(root, useGit ? gitPaths(root) : walkPaths(root), useGit ? "git" : "walk");
}

/**
 * captureWorkspace with git's two questions (a work tree? its files?) asked at once, in child
 * processes that run while this one goes on (`kiln cargo` asks git for its facts meanwhile):
 * the same capture, without waiting for one git process after another.
 */
export async function captureWorkspaceConcurrently(root: string): Promise<Capture> {
  const [inside, listing] = await Promise.all([
    gitOutput(root, ["rev-parse", "--is-inside-work-tree"]),
    gitOutput(root, LS_FILES),
  ]);
  if (inside?.toString("utf8").trim() !== "true") return captureEntries(root, walkPaths(root), "walk");
  // Inside a work tree git must list it; a listing that failed there is an error, as in captureWorkspace.
  return captureEntries(root, listing === null ? gitPaths(root) : pathsOfListing(listing), "git");
}

function captureEntries(root: string, listed: readonly string[], method: Capture["method"]): Capture {
  const paths = listed.filter((p) => !excludedAtRoot(p));
  const entries: CapturedEntry[] = [];
  for (const path of paths) {
    const absolute = join(root, path);
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(absolute);
    } catch (error) {
      // A tracked file deleted in the work tree is not part of the workspace's bytes.
      if ((error as { code?: string }).code === "ENOENT") continue;
      throw error;
    }
    if (stat.isSymbolicLink()) {
      const target = readlinkSync(absolute);
      if (!linkStaysInside(path, target)) {
        throw new CaptureError(`symlink ${path} → ${target} points outside the workspace; kiln keeps links inside it`);
      }
      entries.push({ kind: "symlink", path, absolute, target });
    } else if (stat.isFile()) {
      entries.push({ kind: "file", path, absolute, size: stat.size, executable: (stat.mode & 0o100) !== 0 });
    } else if (stat.isDirectory()) {
      // A git submodule (gitlink) or nested repository: its files are not this workspace's.
    } else {
      throw new CaptureError(`${path} is neither a regular file nor a symlink`);
    }
  }
  entries.sort((a, b) => byteOrder(a.path, b.path));
  return { root, entries, method };
}
