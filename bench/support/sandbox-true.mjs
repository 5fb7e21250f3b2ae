// The sandbox executor's fixed cost: attempts that run `true` (hand-over, target disk, cgroup,
// launcher, bwrap, teardown), timed one by one. Needs root, as the executor does.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { requireBuilt, root } from "./built-packages.mjs";
import { temp } from "./scratch.mjs";

requireBuilt(join(root, "packages", "host", "dist", "src", "index.js"));
const { admitToolchain, createSandboxExecutor, releaseKeptDisksUnder } = await import("@kiln/host");

/**
 * Seconds of `runs` attempts of `true`, after one unmeasured first attempt (the executor's
 * one-time setup: sandbox user, tool lookup). With `warmTarget` every attempt reuses one set of
 * directories and, after the first, says its target is warm (a lineage's next attempt); without
 * it every attempt gets fresh directories.
 */
export async function sandboxTrueSeconds({ runs, vcpus, cgroupParentName, scratchPrefix, warmTarget }) {
  const executor = createSandboxExecutor({ cgroupParentName });
  const toolchain = await admitToolchain("stable");
  const samples = [];
  const bases = [];
  const directories = () => {
    const base = temp(scratchPrefix);
    bases.push(base);
    const dirs = ["src", "target", "home"].map((d) => join(base, d));
    for (const d of dirs) mkdirSync(d);
    return dirs;
  };
  const shared = warmTarget ? directories() : null;
  for (let i = 0; i <= runs; i++) {
    const dirs = shared ?? directories();
    const started = process.hrtime.bigint();
    const result = await executor.run({
      attemptId: `bench-true-${process.pid}-${i}`,
      limits: { vcpus, memoryBytes: 4 * 2 ** 30, pids: 1024, diskBytes: 16 * 2 ** 30 },
      workspaceDir: dirs[0],
      targetDir: dirs[1],
      homeDir: dirs[2],
      ...(warmTarget ? { warmTarget: i > 0 } : {}),
      toolchain,
      argv: ["true"],
      workingDirectory: ".",
      environment: {},
      wallClockSeconds: 60,
      network: "offline",
      onOutput: () => {},
      signal: new AbortController().signal,
    });
    if (result.outcome !== "exited" || result.exitCode !== 0)
      throw new Error(`sandboxed true failed: ${result.detail.join("; ")}`);
    if (i > 0) samples.push(Number(process.hrtime.bigint() - started) / 1e9);
  }
  // The executor keeps each target disk mounted for a next attempt (kept-target-disk.ts): unmounted
  // here, before the scratch directories holding the images are removed.
  await releaseKeptDisksUnder(bases);
  return samples;
}
