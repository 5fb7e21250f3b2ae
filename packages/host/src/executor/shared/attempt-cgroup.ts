/**
 * One cgroup per attempt: created under a `kiln` parent in every hierarchy that carries a
 * controller we use, limited from the job's size, read for usage, killed as a whole and removed.
 *
 * Each controller is used wherever the layout puts it (see cgroup-layout.ts): on this kind of
 * hybrid machine cpu/cpuacct/memory/pids/freezer are v1 hierarchies while the cgroup2 mount
 * still provides cgroup.kill and cpu.stat; on pure v2 everything is in one directory.
 *
 * The kiln parent is nested under the cgroup the host agent itself runs in, so attempts stay
 * inside whatever budget and accounting the agent was given (and whoever supervises the agent
 * still sees them). Only where cgroup v2's no-internal-processes rule forbids enabling
 * controllers there does the parent move to the hierarchy's root.
 */
import { constants } from "node:fs";
import { access, mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { ResourceLimits } from "../executor.js";
import {
  type CgroupHierarchy,
  type CgroupLayout,
  cgroupDirectory,
  describeCgroupLayout,
  hierarchyKey,
} from "./cgroup-layout.js";

/** The CFS period used for the CPU quota (the kernel default). */
export const CPU_PERIOD_MICROSECONDS = 100_000;

/**
 * The scheduling weight of one vCPU: what one busy thread at nice 0 weighs (cgroup v1
 * `cpu.shares` 1024, v2 `cpu.weight` 100). At the kernel's default every attempt weighed the
 * same, so on a saturated host an attempt of 8 vCPUs got no more CPU than one of 2; an attempt
 * now weighs by its size against the other attempts. The shared parent keeps the default weight:
 * against the host's other processes (one autogroup per session where the kernel groups them)
 * the attempts together weigh like one of them, as a bare cargo would.
 */
const WEIGHT_PER_VCPU = { 1: 1024, 2: 100 } as const;

/** Thrown when no hierarchy could hold the attempt at all (read-only or absent cgroupfs, no permission). */
export class CgroupUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CgroupUnavailableError";
  }
}

export interface EnforcedLimits {
  readonly cpu: boolean;
  readonly memory: boolean;
  readonly pids: boolean;
}

export interface CgroupUsage {
  readonly cpuSeconds: number | null;
  readonly peakMemoryBytes: number | null;
  readonly oomKilled: boolean;
  /**
   * Forks and clones the pids controller refused at pids.max (`pids.events` "max", v1 and v2):
   * the kernel's own count, so a fork bomb's containment is read, not sampled.
   */
  readonly pidsRefused: number | null;
  /** The most processes the attempt held at once (`pids.peak`, where the kernel keeps it). */
  readonly pidsPeak: number | null;
}

export interface AttemptCgroupOptions {
  readonly layout: CgroupLayout;
  /** The agent's own cgroup paths, keyed by `hierarchyKey` (from /proc/self/cgroup). */
  readonly ownCgroups: ReadonlyMap<string, string>;
  /** Name of the parent cgroup that groups all attempts (e.g. "kiln"). */
  readonly parentName: string;
  readonly attemptId: string;
  readonly limits: ResourceLimits;
}

/** Where one controller's files for this attempt live. */
interface Role {
  readonly directory: string;
  readonly version: 1 | 2;
}

interface Roles {
  cpu: Role | null;
  cpuacct: Role | null;
  memory: Role | null;
  pids: Role | null;
  freezer: Role | null;
  /** The cgroup2 directory (core files: cgroup.kill, cgroup.freeze, cpu.stat), if cgroup2 is mounted. */
  unified: string | null;
}

function errorText(error: unknown): string {
  if (error instanceof Error) return (error as NodeJS.ErrnoException).code ?? error.message;
  return String(error);
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

async function readText(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch {
    return null;
  }
}

/** `key value` lines (cpu.stat, memory.events, memory.oom_control) → the value of `key`. */
function statField(text: string | null, key: string): number | null {
  if (text === null) return null;
  for (const line of text.split("\n")) {
    const [name, value] = line.trim().split(/\s+/);
    if (name === key && value !== undefined) {
      const n = Number(value);
      return Number.isFinite(n) ? n : null;
    }
  }
  return null;
}

function numberIn(text: string | null): number | null {
  if (text === null) return null;
  const n = Number(text.trim());
  return Number.isFinite(n) ? n : null;
}

/**
 * Enables `controllers` for the children of `directory` (cgroup v2 only), one at a time so that
 * one refusal (say, cpu with realtime tasks present) does not cost the others; returns those enabled.
 */
async function enableSubtreeControllers(directory: string, controllers: readonly string[]): Promise<string[]> {
  const enabled: string[] = [];
  for (const controller of controllers) {
    const present = ((await readText(join(directory, "cgroup.subtree_control"))) ?? "").split(/\s+/);
    if (!present.includes(controller)) {
      try {
        await writeFile(join(directory, "cgroup.subtree_control"), `+${controller}`);
      } catch {
        continue;
      }
    }
    enabled.push(controller);
  }
  return enabled;
}

export class AttemptCgroup {
  private constructor(
    /** Every directory created for this attempt, one per hierarchy, in creation order. */
    readonly directories: readonly string[],
    /** The shared parents; removed after the attempt when no other attempt uses them. */
    private readonly parents: readonly string[],
    private readonly roles: Roles,
    /** What was found and applied, for the evidence. */
    readonly detail: readonly string[],
  ) {}

  /** Which limits the kernel holds for this attempt (read back after writing). */
  enforced: EnforcedLimits = { cpu: false, memory: false, pids: false };

  /** The files the launcher writes its own pid into to join the attempt in every hierarchy. */
  get procsFiles(): string[] {
    return this.directories.map((d) => join(d, "cgroup.procs"));
  }

  static async create(options: AttemptCgroupOptions): Promise<AttemptCgroup> {
    const { layout, ownCgroups, parentName, attemptId, limits } = options;
    const detail: string[] = [describeCgroupLayout(layout)];
    if (layout.kind === "none") throw new CgroupUnavailableError("no cgroup hierarchy is mounted");

    const unifiedControllers = layout.unified?.controllers ?? [];
    const hierarchyFor = (controller: string): CgroupHierarchy | null =>
      layout.v1.find((h) => h.controllers.includes(controller)) ??
      (layout.unified !== null && unifiedControllers.includes(controller) ? layout.unified : null);

    const wanted = ["cpu", "cpuacct", "memory", "pids", "freezer"] as const;
    const byController = new Map<string, CgroupHierarchy>();
    for (const controller of wanted) {
      const h = hierarchyFor(controller);
      if (h !== null) byController.set(controller, h);
    }
    const hierarchies: CgroupHierarchy[] = [];
    for (const h of [...byController.values(), ...(layout.unified !== null ? [layout.unified] : [])]) {
      if (!hierarchies.includes(h)) hierarchies.push(h);
    }
    const v2Wanted = ["cpu", "memory", "pids"].filter((c) => byController.get(c) === layout.unified);

    const created: string[] = [];
    const parents: string[] = [];
    const placed = new Map<CgroupHierarchy, string>();
    for (const hierarchy of hierarchies) {
      try {
        const { parent, directory, enabled } = await AttemptCgroup.createIn(
          hierarchy,
          ownCgroups,
          parentName,
          attemptId,
          hierarchy.version === 2 ? v2Wanted : [],
          detail,
        );
        // Controllers cgroup v2 would not enable here are simply absent for this attempt (rlimit fallback).
        for (const controller of v2Wanted)
          if (hierarchy.version === 2 && !enabled.includes(controller)) byController.delete(controller);
        created.push(directory);
        parents.push(parent);
        placed.set(hierarchy, directory);
      } catch (error) {
        detail.push(`cgroup: cannot create the attempt cgroup in ${hierarchy.mountPoint}: ${errorText(error)}`);
      }
    }
    if (created.length === 0) {
      throw new CgroupUnavailableError(
        `cgroups are not writable here (${detail.slice(1).join("; ") || "no usable hierarchy"})`,
      );
    }

    const roleOf = (controller: string): Role | null => {
      const h = byController.get(controller);
      const directory = h === undefined ? undefined : placed.get(h);
      return h === undefined || directory === undefined ? null : { directory, version: h.version };
    };
    const roles: Roles = {
      cpu: roleOf("cpu"),
      cpuacct: roleOf("cpuacct"),
      memory: roleOf("memory"),
      pids: roleOf("pids"),
      freezer: roleOf("freezer"),
      unified: layout.unified === null ? null : (placed.get(layout.unified) ?? null),
    };
    const attempt = new AttemptCgroup(created, parents, roles, detail);
    try {
      attempt.enforced = await attempt.applyLimits(limits, detail);
      return attempt;
    } catch (error) {
      await attempt.remove();
      throw error;
    }
  }

  /**
   * Creates the attempt's directory in `hierarchy` under the shared parent. Another attempt's
   * cleanup may remove the (then empty) parent between our mkdirs, so a vanished parent is
   * simply prepared again.
   */
  private static async createIn(
    hierarchy: CgroupHierarchy,
    ownCgroups: ReadonlyMap<string, string>,
    parentName: string,
    attemptId: string,
    v2Wanted: readonly string[],
    detail: string[],
  ): Promise<{ parent: string; directory: string; enabled: readonly string[] }> {
    for (let tries = 1; ; tries++) {
      const { parent, enabled } = await AttemptCgroup.prepareParent(
        hierarchy,
        ownCgroups,
        parentName,
        v2Wanted,
        detail,
      );
      const directory = join(parent, attemptId);
      try {
        await mkdir(directory);
        return { parent, directory, enabled };
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ENOENT" && tries < 5) continue;
        if (code !== "EEXIST") throw error;
        // A leftover of a crashed agent with the same attempt id: reuse it only if it is empty.
        await rmdir(directory);
        await mkdir(directory);
        return { parent, directory, enabled };
      }
    }
  }

  /** Creates (if needed) the `kiln` parent for `hierarchy`; on cgroup v2 also enables what it can of `v2Wanted`. */
  private static async prepareParent(
    hierarchy: CgroupHierarchy,
    ownCgroups: ReadonlyMap<string, string>,
    parentName: string,
    v2Wanted: readonly string[],
    detail: string[],
  ): Promise<{ parent: string; enabled: readonly string[] }> {
    const own = cgroupDirectory(hierarchy, ownCgroups.get(hierarchyKey(hierarchy)) ?? "/");
    if (v2Wanted.length === 0) {
      // v1 has no internal-process rule, and cgroup2's core files need no controllers: nest under our own cgroup.
      const parent = join(own, parentName);
      await mkdir(parent, { recursive: true });
      return { parent, enabled: [] };
    }
    // cgroup v2 with controllers: they must be enabled in every ancestor's subtree_control, which
    // the kernel refuses (EBUSY) for a non-root cgroup that has processes of its own, such as ours.
    let base = own;
    let enabled = await enableSubtreeControllers(own, v2Wanted);
    if (enabled.length < v2Wanted.length && own !== hierarchy.mountPoint) {
      detail.push(`cgroup: cannot enable ${v2Wanted.join(",")} below ${own}; using ${hierarchy.mountPoint}`);
      base = hierarchy.mountPoint;
      enabled = await enableSubtreeControllers(base, v2Wanted);
    }
    const parent = join(base, parentName);
    await mkdir(parent, { recursive: true });
    enabled = await enableSubtreeControllers(parent, enabled);
    for (const controller of v2Wanted)
      if (!enabled.includes(controller))
        detail.push(`cgroup: the ${controller} controller cannot be enabled for attempts under ${parent}`);
    return { parent, enabled };
  }

  /** Writes the limits and reads each back, so the evidence states what the kernel actually holds. */
  private async applyLimits(limits: ResourceLimits, detail: string[]): Promise<EnforcedLimits> {
    const { cpu, memory, pids } = this.roles;
    let cpuEnforced = false;
    let memoryEnforced = false;
    let pidsEnforced = false;

    const quota = Math.max(1000, Math.round(limits.vcpus * CPU_PERIOD_MICROSECONDS));
    if (cpu === null) detail.push("cpu: no cpu controller; the vCPU quota is not enforced");
    else
      try {
        if (cpu.version === 2) {
          await writeFile(join(cpu.directory, "cpu.max"), `${quota} ${CPU_PERIOD_MICROSECONDS}`);
          const back = (await readText(join(cpu.directory, "cpu.max")))?.trim();
          cpuEnforced = back === `${quota} ${CPU_PERIOD_MICROSECONDS}`;
          detail.push(`cpu: cpu.max = "${back}" (${limits.vcpus} vCPU) at ${cpu.directory}`);
        } else {
          await writeFile(join(cpu.directory, "cpu.cfs_period_us"), String(CPU_PERIOD_MICROSECONDS));
          await writeFile(join(cpu.directory, "cpu.cfs_quota_us"), String(quota));
          const backQuota = numberIn(await readText(join(cpu.directory, "cpu.cfs_quota_us")));
          const backPeriod = numberIn(await readText(join(cpu.directory, "cpu.cfs_period_us")));
          cpuEnforced = backQuota === quota && backPeriod === CPU_PERIOD_MICROSECONDS;
          detail.push(
            `cpu: cpu.cfs_quota_us = ${backQuota} per cpu.cfs_period_us = ${backPeriod} (${limits.vcpus} vCPU) at ${cpu.directory}`,
          );
        }
      } catch (error) {
        detail.push(`cpu: could not set the vCPU quota at ${cpu.directory}: ${errorText(error)}`);
      }
    if (cpu !== null) {
      const perVcpu = WEIGHT_PER_VCPU[cpu.version];
      const file = cpu.version === 2 ? "cpu.weight" : "cpu.shares";
      // cgroup v2 bounds cpu.weight to 1..10000; v1's cpu.shares to 2..262144.
      const weight = (vcpus: number) => Math.min(perVcpu * 100, Math.max(2, Math.round(vcpus * perVcpu)));
      try {
        await writeFile(join(cpu.directory, file), String(weight(limits.vcpus)));
        detail.push(`cpu: ${file} = ${(await readText(join(cpu.directory, file)))?.trim()} (${limits.vcpus} vCPU)`);
      } catch (error) {
        // Only a weight: the attempt still runs, at the default one.
        detail.push(`cpu: could not set ${file} at ${cpu.directory}: ${errorText(error)}`);
      }
    }

    if (memory === null) detail.push("memory: no memory controller");
    else
      try {
        if (memory.version === 2) {
          await writeFile(join(memory.directory, "memory.max"), String(limits.memoryBytes));
          const back = numberIn(await readText(join(memory.directory, "memory.max")));
          memoryEnforced = back !== null && Math.abs(back - limits.memoryBytes) < 65536;
          let swap = "memory.swap.max absent (no swap accounting)";
          if (await exists(join(memory.directory, "memory.swap.max"))) {
            await writeFile(join(memory.directory, "memory.swap.max"), "0");
            swap = `memory.swap.max = ${(await readText(join(memory.directory, "memory.swap.max")))?.trim()}`;
          }
          detail.push(`memory: memory.max = ${back}, ${swap} at ${memory.directory}`);
        } else {
          await writeFile(join(memory.directory, "memory.limit_in_bytes"), String(limits.memoryBytes));
          const back = numberIn(await readText(join(memory.directory, "memory.limit_in_bytes")));
          memoryEnforced = back !== null && Math.abs(back - limits.memoryBytes) < 65536;
          // memsw (memory + swap) must be ≥ the memory limit, so it is written second; equal means no swap.
          let swap = "memory.memsw.limit_in_bytes absent (no swap accounting)";
          if (await exists(join(memory.directory, "memory.memsw.limit_in_bytes"))) {
            await writeFile(join(memory.directory, "memory.memsw.limit_in_bytes"), String(limits.memoryBytes));
            swap = `memory.memsw.limit_in_bytes = ${numberIn(await readText(join(memory.directory, "memory.memsw.limit_in_bytes")))}`;
          }
          detail.push(`memory: memory.limit_in_bytes = ${back}, ${swap} at ${memory.directory}`);
        }
      } catch (error) {
        detail.push(`memory: could not set the memory limit at ${memory.directory}: ${errorText(error)}`);
      }

    if (pids === null) detail.push("pids: no pids controller");
    else
      try {
        await writeFile(join(pids.directory, "pids.max"), String(limits.pids));
        const back = numberIn(await readText(join(pids.directory, "pids.max")));
        pidsEnforced = back === limits.pids;
        detail.push(`pids: pids.max = ${back} (cgroup v${pids.version}) at ${pids.directory}`);
      } catch (error) {
        detail.push(`pids: could not set pids.max at ${pids.directory}: ${errorText(error)}`);
      }

    return { cpu: cpuEnforced, memory: memoryEnforced, pids: pidsEnforced };
  }

  /** Every process in the attempt, from all hierarchies (they should agree; the union is the safe answer). */
  async processes(): Promise<number[]> {
    const all = new Set<number>();
    for (const directory of this.directories) {
      const text = await readText(join(directory, "cgroup.procs"));
      for (const line of (text ?? "").split("\n")) {
        const pid = Number(line.trim());
        if (Number.isInteger(pid) && pid > 0) all.add(pid);
      }
    }
    return [...all];
  }

  async usage(): Promise<CgroupUsage> {
    const { cpuacct, memory, unified, pids } = this.roles;
    const pidsRefused = pids === null ? null : statField(await readText(join(pids.directory, "pids.events")), "max");
    const pidsPeak = pids === null ? null : numberIn(await readText(join(pids.directory, "pids.peak")));
    let cpuSeconds: number | null = null;
    if (unified !== null) {
      const usec = statField(await readText(join(unified, "cpu.stat")), "usage_usec");
      if (usec !== null) cpuSeconds = usec / 1e6;
    }
    if (cpuSeconds === null && cpuacct !== null && cpuacct.version === 1) {
      const ns = numberIn(await readText(join(cpuacct.directory, "cpuacct.usage")));
      if (ns !== null) cpuSeconds = ns / 1e9;
    }
    let peakMemoryBytes: number | null = null;
    let oomKilled = false;
    if (memory !== null) {
      if (memory.version === 2) {
        peakMemoryBytes = numberIn(await readText(join(memory.directory, "memory.peak")));
        oomKilled = (statField(await readText(join(memory.directory, "memory.events")), "oom_kill") ?? 0) > 0;
      } else {
        peakMemoryBytes = numberIn(await readText(join(memory.directory, "memory.max_usage_in_bytes")));
        const kills = statField(await readText(join(memory.directory, "memory.oom_control")), "oom_kill");
        // Kernels before 4.13 have no oom_kill counter; hitting the limit (failcnt) is the closest signal.
        oomKilled =
          kills !== null ? kills > 0 : (numberIn(await readText(join(memory.directory, "memory.failcnt"))) ?? 0) > 0;
      }
    }
    return { cpuSeconds, peakMemoryBytes, oomKilled, pidsRefused, pidsPeak };
  }

  private async setFrozen(frozen: boolean): Promise<void> {
    const { freezer, unified } = this.roles;
    try {
      if (unified !== null && (await exists(join(unified, "cgroup.freeze")))) {
        await writeFile(join(unified, "cgroup.freeze"), frozen ? "1" : "0");
      } else if (freezer !== null && freezer.version === 1) {
        await writeFile(join(freezer.directory, "freezer.state"), frozen ? "FROZEN" : "THAWED");
      }
    } catch {
      // Freezing only narrows the fork-while-killing window; killing proceeds without it.
    }
  }

  /**
   * Kills every process of the attempt, including daemonized, double-forked and setsid'd ones
   * (cgroup membership survives all of those). cgroup.kill (v2, Linux ≥ 5.14) does it
   * atomically with respect to forks; otherwise, and as a backstop, the cgroup is frozen so
   * nothing can fork, every member gets SIGKILL, and it is thawed so the signals are delivered,
   * repeated until it is empty. Returns whether it emptied within `timeoutMs`.
   */
  async killAll(timeoutMs = 5000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const { unified } = this.roles;
    if (unified !== null) {
      try {
        await writeFile(join(unified, "cgroup.kill"), "1");
      } catch {
        // No cgroup.kill (kernel < 5.14): the loop below does the work.
      }
    }
    for (;;) {
      if ((await this.processes()).length === 0) return true;
      if (Date.now() > deadline) return false;
      await this.setFrozen(true);
      for (const pid of await this.processes()) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
      await this.setFrozen(false);
      await sleep(20);
    }
  }

  /** Removes the attempt's directories (they must be empty; a just-killed cgroup may stay busy for a moment). */
  async remove(timeoutMs = 3000): Promise<string[]> {
    const failures: string[] = [];
    const deadline = Date.now() + timeoutMs;
    for (const directory of [...this.directories].reverse()) {
      for (;;) {
        try {
          await rmdir(directory);
          break;
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code === "ENOENT") break;
          if (code === "EBUSY" && Date.now() < deadline) {
            await sleep(20);
            continue;
          }
          failures.push(`${directory}: ${errorText(error)}`);
          break;
        }
      }
    }
    // Leave the host's hierarchies as they were found: an empty parent goes too (EBUSY while
    // another attempt still runs under it is expected and fine).
    for (const parent of this.parents) await rmdir(parent).catch(() => undefined);
    return failures;
  }
}
