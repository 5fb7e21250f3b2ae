import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { AdmittedToolchain, ExecutionRequest, ExecutionResult, Executor } from "../src/executor/executor.js";
import { createSandboxExecutor } from "../src/executor/sandbox/sandbox-executor.js";
import { sandboxIsolation } from "../src/executor/sandbox/sandbox-isolation.js";
import { admitToolchain } from "../src/executor/shared/admit-toolchains.js";
import { NO_CGROUPS } from "../src/executor/shared/cgroup-layout.js";
import { removeJobDirectories } from "../src/executor/shared/remove-job-directories.js";
import { cgroupDirectoriesNamed } from "../src/testing/index.js";
import { assertNothingSurvives, executorSuite, hostProcessesMatching, type Job, makeJob } from "./executor-suite.js";

executorSuite("sandbox", () => sandboxIsolation());

const MiB = 1024 * 1024;

describe("sandbox executor specifics", () => {
  let root: string;
  let job: Job;
  let toolchain: AdmittedToolchain;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "kiln-sandbox-specifics-"));
    job = await makeJob(root, "job");
    toolchain = await admitToolchain("stable");
  });
  after(() => removeJobDirectories([root]));

  const start = (
    executor: Executor,
    request: Partial<ExecutionRequest> & { argv: readonly string[] },
  ): { attemptId: string; output: () => string; done: Promise<ExecutionResult> } => {
    const attemptId = `sandbox-specific-${randomBytes(4).toString("hex")}`;
    const chunks: Buffer[] = [];
    const done = executor.run({
      attemptId,
      limits: { vcpus: 1.5, memoryBytes: 768 * MiB, pids: 100, diskBytes: 1024 * MiB },
      ...job,
      toolchain,
      workingDirectory: ".",
      environment: {},
      wallClockSeconds: 30,
      network: "offline",
      signal: new AbortController().signal,
      onOutput: (_stream, chunk) => chunks.push(chunk),
      ...request,
    });
    return { attemptId, output: () => Buffer.concat(chunks).toString("utf8"), done };
  };

  it("applies the size's limits to the attempt cgroup and runs it as the unprivileged sandbox uid", async () => {
    const executor = createSandboxExecutor();
    const run = start(executor, { argv: ["sleep", "3"] });
    let finished = false;
    void run.done.finally(() => {
      finished = true;
    });
    // Waits for the state, not for a time: the cgroup exists and the command runs in it (it sleeps
    // 3 s once started, however long the start took on a loaded machine). Before the command, the
    // cgroup holds the launcher and its mount helpers, root until the launcher execs setpriv.
    const commandRuns = async () => {
      for (const pid of await hostProcessesMatching(run.attemptId, true)) {
        const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
        if (cmdline === "sleep\x003\x00") return true;
      }
      return false;
    };
    let directories: string[] = [];
    while (!finished && (!(await commandRuns()) || directories.length === 0)) {
      await sleep(50);
      directories = await cgroupDirectoriesNamed(run.attemptId);
    }
    const files = new Map<string, string>();
    for (const dir of directories)
      for (const name of [
        "cpu.max",
        "cpu.cfs_quota_us",
        "cpu.cfs_period_us",
        "memory.max",
        "memory.limit_in_bytes",
        "pids.max",
      ])
        try {
          files.set(name, (await readFile(join(dir, name), "utf8")).trim());
        } catch {
          // Not this hierarchy's file.
        }
    const pids = await hostProcessesMatching(run.attemptId, true);
    const uids = await Promise.all(
      pids.map(async (pid) => /^Uid:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, "utf8"))?.[1]),
    );
    const result = await run.done;
    assert.equal(result.outcome, "exited", result.detail.join("\n"));
    assert.equal(result.exitCode, 0);

    // Every limit the kernel could hold is in place, as cgroup v2 or v1 files.
    const cpu = files.get("cpu.max") ?? `${files.get("cpu.cfs_quota_us")} ${files.get("cpu.cfs_period_us")}`;
    assert.equal(cpu, "150000 100000", `cpu quota for 1.5 vCPU: ${[...files].join(", ")}`);
    assert.equal(files.get("memory.max") ?? files.get("memory.limit_in_bytes"), String(768 * MiB));
    assert.equal(files.get("pids.max"), "100");
    assert.ok(result.detail.some((d) => d.startsWith("cgroup layout: ")));
    assert.ok(result.cpuSeconds !== null && result.cpuSeconds >= 0);
    assert.ok(result.peakMemoryBytes !== null && result.peakMemoryBytes > 0);

    // Everything in the attempt's cgroup (bwrap and the command) is an unprivileged host uid.
    assert.ok(pids.length >= 2, `processes in the attempt cgroup: ${pids.length}`);
    for (const uid of uids) assert.ok(uid !== undefined && uid !== "0", `a process ran as host uid ${uid}`);
    await assertNothingSurvives(run.attemptId);
  });

  it("reports an infrastructure outcome, not a job failure, when the sandbox cannot start the command", async () => {
    const executor = createSandboxExecutor();
    const missing = await start(executor, { argv: ["kiln-no-such-command"] }).done;
    assert.equal(missing.outcome, "infrastructure");
    assert.ok(missing.detail.some((d) => /did not start the command.*kiln-no-such-command/s.test(d)));
    const refused = await start(executor, { argv: ["true"], workingDirectory: "../.." }).done;
    assert.equal(refused.outcome, "infrastructure");
    assert.ok(refused.detail.some((d) => d.includes("leaves the workspace")));
  });

  it("falls back to rlimits, says so, and still reaps the whole tree, where cgroups cannot be used", async () => {
    const executor = createSandboxExecutor({ cgroupLayout: NO_CGROUPS });
    const limits = await start(executor, { argv: ["cat", "/proc/self/limits"] });
    const result = await limits.done;
    assert.equal(result.exitCode, 0, result.detail.join("\n"));
    assert.match(limits.output(), /Max processes\s+100\s+100/);
    assert.match(limits.output(), new RegExp(`Max address space\\s+${768 * MiB}\\s+${768 * MiB}`));
    assert.ok(result.detail.some((d) => d.startsWith("cgroups unavailable: ")));
    assert.ok(result.detail.some((d) => d.startsWith("cpu: not enforced")));

    const marker = `kiln-fallback-${randomBytes(6).toString("hex")}`;
    const controller = new AbortController();
    const daemonized = start(executor, {
      argv: ["sh", "-c", `setsid sh -c 'while :; do sleep 1; done' ${marker} & sleep 60`],
      signal: controller.signal,
    });
    for (let i = 0; i < 100 && (await hostProcessesMatching(marker)).length === 0; i++) await sleep(50);
    controller.abort();
    assert.equal((await daemonized.done).outcome, "cancelled");
    // Without a cgroup the launcher's pid namespace takes them down; a loaded machine may take a
    // moment, so the wait is a bound on a hang (60 s), not a measure of speed.
    for (let i = 0; i < 1200 && (await hostProcessesMatching(marker)).length > 0; i++) await sleep(50);
    assert.deepEqual(await hostProcessesMatching(marker), []);
  });
});
