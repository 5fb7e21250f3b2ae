import { stat } from "node:fs/promises";
import { isAbsolute, relative, resolve } from "node:path";
import { type ExecutionRequest, type MountPoints, NEUTRAL_MOUNTS } from "../executor.js";

/** Paths a job directory may not be (or be inside): the isolation's own structure (plus the executor's own paths). */
const RESERVED_PATHS = ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/dev", "/sys"];

export function within(path: string, parent: string): boolean {
  const rel = relative(parent, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/** Where the job directories appear inside: the request's mount points, else neutral ones. */
export function mountPointsOf(request: ExecutionRequest): MountPoints {
  return request.mounts ?? NEUTRAL_MOUNTS;
}

/**
 * What is wrong with an execution request, or null: the one validation every executor applies
 * before it starts anything, so a request one isolation refuses the other refuses with the same
 * words. `reserved` adds the executor's own in-isolation paths (its toolchain mount point, its
 * staging directory) to the system's.
 */
export async function requestProblem(request: ExecutionRequest, reserved: readonly string[]): Promise<string | null> {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(request.attemptId))
    return `attemptId ${JSON.stringify(request.attemptId)} must be 1–128 of [A-Za-z0-9_.-]`;
  if (request.argv.length === 0) return "argv is empty";
  if (request.network !== "offline") return `network policy ${String(request.network)} is not supported`;
  if (!(request.wallClockSeconds > 0)) return "wallClockSeconds must be positive";
  const { vcpus, memoryBytes, pids, diskBytes } = request.limits;
  if (!(vcpus > 0) || !(memoryBytes > 0) || !(pids > 0) || !(diskBytes > 0)) return "limits must be positive";
  if (request.workspaceDir === "/" || request.homeDir === "/") return "the workspace and home may not be /";
  const directories: [string, string][] = [
    ["workspaceDir", request.workspaceDir],
    ["targetDir", request.targetDir],
    ["homeDir", request.homeDir],
    ["toolchain.path", request.toolchain.path],
    ...(request.readOnlyBinds ?? []).map((b, i): [string, string] => [`readOnlyBinds[${i}].source`, b.source]),
  ];
  for (const [name, path] of directories) {
    if (!isAbsolute(path) || resolve(path) !== path) return `${name} must be an absolute, normalized path: ${path}`;
    try {
      if (!(await stat(path)).isDirectory()) return `${name} is not a directory: ${path}`;
    } catch {
      return `${name} does not exist: ${path}`;
    }
    if (name === "toolchain.path") continue;
    // The host's memory-backed scratch (scratch-root.ts) lies under /dev, but it is a plain
    // tmpfs directory of the agent's, not part of any device tree the sandbox builds.
    const scratch = within(path, "/dev/shm") && path !== "/dev/shm";
    if (path === "/" || path === "/tmp" || (!scratch && [...RESERVED_PATHS, ...reserved].some((r) => within(path, r))))
      return `${name} may not be ${path}: it would cover the sandbox's own structure`;
  }
  // The in-sandbox side: the same rules as host paths (nothing may cover the sandbox's own
  // structure), and disjoint, so that no job directory hides part of another or a read-only bind.
  const mounts = mountPointsOf(request);
  const points: [string, string][] = [
    ["mounts.workspace", mounts.workspace],
    ["mounts.target", mounts.target],
    ["mounts.home", mounts.home],
    ...(request.readOnlyBinds ?? []).map((b, i): [string, string] => [`readOnlyBinds[${i}].target`, b.target]),
  ];
  for (const [name, path] of points) {
    if (!isAbsolute(path) || resolve(path) !== path) return `${name} must be an absolute, normalized path: ${path}`;
    if (path === "/" || path === "/tmp" || [...RESERVED_PATHS, ...reserved].some((r) => within(path, r)))
      return `${name} may not be ${path}: it would cover the sandbox's own structure`;
    for (const [other, otherPath] of points) {
      if (other !== name && (within(path, otherPath) || within(otherPath, path)))
        return `${name} (${path}) overlaps ${other} (${otherPath})`;
    }
  }
  if (!within(resolve(mounts.workspace, request.workingDirectory), mounts.workspace))
    return `workingDirectory ${JSON.stringify(request.workingDirectory)} leaves the workspace`;
  return null;
}
