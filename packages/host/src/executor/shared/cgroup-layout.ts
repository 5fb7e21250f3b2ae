/**
 * Which cgroup hierarchies this machine has, and where they are mounted.
 *
 * Machines differ: pure cgroup v2 (one unified hierarchy at /sys/fs/cgroup), pure v1 (one
 * hierarchy per controller or controller group) and the systemd "hybrid" layout (v1
 * controllers plus a cgroup2 mount, usually /sys/fs/cgroup/unified, with no controllers of
 * its own but with the v2 core files: cgroup.kill, cgroup.freeze, cgroup.events, cpu.stat).
 * The attempt cgroup uses each controller wherever it lives, so detection reports every
 * hierarchy rather than a single "version".
 *
 * The parsing is a pure function over the mount-table text so that all three layouts are
 * unit-tested from fixtures; `detectCgroupLayout` feeds it the live tables.
 */
import { readFile } from "node:fs/promises";
import { join, posix } from "node:path";

export interface CgroupHierarchy {
  readonly version: 1 | 2;
  /** Where the hierarchy is mounted on this host. */
  readonly mountPoint: string;
  /**
   * The cgroup the mount shows at its mount point (mountinfo's "root" field): "/" normally,
   * a sub-path when the mount was made inside a cgroup namespace or a container. `/proc/self/cgroup`
   * paths are relative to the hierarchy's true root, so this is needed to turn them into directories.
   */
  readonly mountRoot: string;
  /** v1: the controllers bound to this hierarchy; v2: those listed in its root cgroup.controllers. */
  readonly controllers: readonly string[];
}

export type CgroupLayoutKind = "v2" | "v1" | "hybrid" | "none";

export interface CgroupLayout {
  readonly kind: CgroupLayoutKind;
  /** The cgroup2 mount, if any (the whole picture on v2; the core files only on hybrid). */
  readonly unified: CgroupHierarchy | null;
  /** v1 hierarchies that carry at least one controller (named ones such as name=systemd are left out). */
  readonly v1: readonly CgroupHierarchy[];
}

/** The v1 controllers the kernel knows; anything else in the mount options is an ordinary option. */
const V1_CONTROLLERS = new Set([
  "blkio",
  "cpu",
  "cpuacct",
  "cpuset",
  "devices",
  "freezer",
  "hugetlb",
  "memory",
  "misc",
  "net_cls",
  "net_prio",
  "perf_event",
  "pids",
  "rdma",
]);

interface MountEntry {
  readonly mountPoint: string;
  readonly mountRoot: string;
  readonly fsType: string;
  readonly options: readonly string[];
}

/** The kernel escapes space, tab, newline and backslash in mount paths as octal (`\040`). */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/**
 * One line of either /proc/self/mountinfo (`id parent major:minor root mountpoint opts [tags] - fstype source superopts`)
 * or /proc/mounts (`source mountpoint fstype opts dump pass`). For cgroup v1 the controllers are in the
 * super options in mountinfo and in the single option list in /proc/mounts; both are collected.
 */
function parseMountLine(line: string): MountEntry | null {
  const fields = line.trim().split(/\s+/);
  const separator = fields.indexOf("-");
  if (separator >= 6) {
    const root = fields[3];
    const mountPoint = fields[4];
    const perMount = fields[5];
    const fsType = fields[separator + 1];
    const superOptions = fields[separator + 3];
    if (root === undefined || mountPoint === undefined || fsType === undefined) return null;
    return {
      mountPoint: unescapeMountPath(mountPoint),
      mountRoot: unescapeMountPath(root),
      fsType,
      options: [...(perMount ?? "").split(","), ...(superOptions ?? "").split(",")],
    };
  }
  if (fields.length >= 4) {
    const [, mountPoint, fsType, options] = fields;
    if (mountPoint === undefined || fsType === undefined || options === undefined) return null;
    return { mountPoint: unescapeMountPath(mountPoint), mountRoot: "/", fsType, options: options.split(",") };
  }
  return null;
}

/**
 * Classifies the layout from a mount table. `unifiedControllers` returns the text of
 * `cgroup.controllers` at a cgroup2 mount point (null when unreadable), which is what says
 * whether v2 carries controllers at all.
 */
export function parseCgroupLayout(
  mountTable: string,
  unifiedControllers: (mountPoint: string) => string | null,
): CgroupLayout {
  let unified: CgroupHierarchy | null = null;
  const v1: CgroupHierarchy[] = [];
  const seenV1 = new Set<string>();
  for (const line of mountTable.split("\n")) {
    const entry = parseMountLine(line);
    if (entry === null) continue;
    if (entry.fsType === "cgroup2") {
      // The first cgroup2 mount wins; later ones are bind mounts of the same single hierarchy.
      if (unified !== null) continue;
      const text = unifiedControllers(entry.mountPoint) ?? "";
      unified = {
        version: 2,
        mountPoint: entry.mountPoint,
        mountRoot: entry.mountRoot,
        controllers: text.split(/\s+/).filter((c) => c.length > 0),
      };
    } else if (entry.fsType === "cgroup") {
      const controllers = [...new Set(entry.options.filter((o) => V1_CONTROLLERS.has(o)))].sort();
      if (controllers.length === 0) continue;
      // The same hierarchy mounted twice shows the same controller set; keep the first mount.
      const key = controllers.join(",");
      if (seenV1.has(key)) continue;
      seenV1.add(key);
      v1.push({ version: 1, mountPoint: entry.mountPoint, mountRoot: entry.mountRoot, controllers });
    }
  }
  const kind: CgroupLayoutKind =
    v1.length > 0 ? (unified !== null ? "hybrid" : "v1") : unified !== null ? "v2" : "none";
  return { kind, unified, v1 };
}

/** The layout with no usable cgroups: executors fall back to rlimits and say so. */
export const NO_CGROUPS: CgroupLayout = { kind: "none", unified: null, v1: [] };

/**
 * Parses /proc/self/cgroup (`id:controllers:path`; v2's line is `0::path`) into the process's
 * own cgroup path per hierarchy, keyed by "v2" or by a v1 hierarchy's sorted controller list.
 */
export function parseProcessCgroups(text: string): Map<string, string> {
  const paths = new Map<string, string>();
  for (const line of text.split("\n")) {
    const first = line.indexOf(":");
    const second = line.indexOf(":", first + 1);
    if (first < 0 || second < 0) continue;
    const controllers = line.slice(first + 1, second);
    const path = line.slice(second + 1).trim();
    if (controllers === "") paths.set("v2", path);
    else {
      const key = controllers
        .split(",")
        .filter((c) => V1_CONTROLLERS.has(c))
        .sort()
        .join(",");
      if (key !== "") paths.set(key, path);
    }
  }
  return paths;
}

/** The key under which `parseProcessCgroups` reports a hierarchy. */
export function hierarchyKey(hierarchy: CgroupHierarchy): string {
  return hierarchy.version === 2 ? "v2" : [...hierarchy.controllers].sort().join(",");
}

/**
 * The directory of cgroup `path` (as /proc/self/cgroup names it) in `hierarchy`. When the path
 * is not under the mount's root (the process sits outside what the mount shows, or a cgroup
 * namespace already rebased it), the mount point itself is the best available answer.
 */
export function cgroupDirectory(hierarchy: CgroupHierarchy, path: string): string {
  const root = hierarchy.mountRoot;
  if (root === "/" || root === "") return join(hierarchy.mountPoint, path);
  const relative = posix.relative(root, path);
  if (relative.startsWith("..")) return hierarchy.mountPoint;
  return join(hierarchy.mountPoint, relative);
}

async function readOrNull(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch {
    return null;
  }
}

/** The live layout of this machine, from /proc/self/mountinfo (or /proc/mounts on very old kernels). */
export async function detectCgroupLayout(): Promise<CgroupLayout> {
  const table = (await readOrNull("/proc/self/mountinfo")) ?? (await readOrNull("/proc/mounts")) ?? "";
  const controllerTexts = new Map<string, string | null>();
  // Read every cgroup2 mount's controllers first so that the parse itself stays synchronous and pure.
  for (const line of table.split("\n")) {
    const entry = parseMountLine(line);
    if (entry?.fsType === "cgroup2" && !controllerTexts.has(entry.mountPoint)) {
      controllerTexts.set(entry.mountPoint, await readOrNull(join(entry.mountPoint, "cgroup.controllers")));
    }
  }
  return parseCgroupLayout(table, (mountPoint) => controllerTexts.get(mountPoint) ?? null);
}

/** This process's own cgroup paths, keyed as `hierarchyKey` keys them. */
export async function readOwnCgroups(): Promise<Map<string, string>> {
  return parseProcessCgroups((await readOrNull("/proc/self/cgroup")) ?? "");
}

/** One line for the evidence: what was found. */
export function describeCgroupLayout(layout: CgroupLayout): string {
  const parts: string[] = [];
  for (const h of layout.v1) parts.push(`v1 ${h.controllers.join(",")} at ${h.mountPoint}`);
  if (layout.unified !== null) {
    const controllers = layout.unified.controllers.length > 0 ? layout.unified.controllers.join(",") : "no controllers";
    parts.push(`cgroup2 (${controllers}) at ${layout.unified.mountPoint}`);
  }
  return `cgroup layout: ${layout.kind}${parts.length > 0 ? ` — ${parts.join("; ")}` : ""}`;
}
