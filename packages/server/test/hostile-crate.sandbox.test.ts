import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statfsSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { admitToolchain, createSandboxExecutor } from "@kiln/host";
import { onboardRepository } from "@kiln/storage";
import {
  crate,
  type Doc,
  type Embedded,
  explainJob,
  Jobs,
  processesCarrying,
  startEmbedded,
} from "../src/testing/e2e-jobs.js";
import {
  DISK_FILL_CRATE,
  DISK_FILL_GIVE_UP_MIB,
  ESCAPES,
  FORK_BOMB_CRATE,
  HOSTILE_CRATE,
  HOSTILE_TESTS,
  hostPathsFor,
  MEMORY_HOG_CRATE,
  UNSTOPPABLE_BOMB_CRATE,
} from "./hostile-crates.js";

const GiB = 2 ** 30;
const MiB = 2 ** 20;
/** The disk quota this file's host grants (below kiln2-cpu's 16 GiB, so that filling it is quick). */
const DISK_QUOTA = 512 * MiB;

/** The processes kiln2-cpu grants an attempt (2 vCPU × 512). */
const KILN2_PIDS = 1024;

const newMarker = (what: string) => `kiln-e2e-${what}-${randomBytes(6).toString("hex")}`;

/** `true` starts and exits 0: the machine still answers (how fast depends on the machine's load). */
function assertHostResponsive(): void {
  const r = spawnSync("true");
  assert.equal(r.status, 0, `the host could not start a process: ${String(r.error)}`);
}

/** Test results of the evidence as `name=outcome`, for messages. */
const testOutcomes = (evidence: Doc): string[] =>
  (evidence.report.tests as Doc[]).map((t) => `${t.target}:${t.name}=${t.outcome}`);

describe("a hostile crate in the sandbox, end to end (SQLite, real cargo, real sandbox)", () => {
  let e: Embedded;
  /** The same host and storage through an app whose wall-clock ceiling bounds the bombs. */
  let bounded: Jobs;
  let quick: Jobs;
  let workRoot: string;
  let listener: Server;
  let connections = 0;
  let port = 0;
  let secretPath: string;
  /** The job whose test was OOM-killed. */
  let memoryJob: string | undefined;
  const secret = `another job's secret ${randomBytes(8).toString("hex")}\n`;

  before(async () => {
    // World-readable on the host: only the sandbox's isolation keeps the job from them.
    workRoot = mkdtempSync(join(tmpdir(), "kiln-e2e-hostile-"));
    chmodSync(workRoot, 0o755);
    listener = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((r) => listener.listen(0, "127.0.0.1", r));
    const address = listener.address();
    port = typeof address === "object" && address !== null ? address.port : 0;
    e = await startEmbedded({ workRoot, executor: createSandboxExecutor({ maxDiskBytes: DISK_QUOTA }) });
    // Another job's directory, planted once the host runs (at start a host reaps what its
    // killed predecessor left in its work root — which is what this would look like then).
    const other = join(workRoot, "job_00000000000000000000000000-a1", "src");
    mkdirSync(other, { recursive: true, mode: 0o755 });
    secretPath = join(other, "secret.txt");
    writeFileSync(secretPath, secret, { mode: 0o644 });
    bounded = await e.extraApp({ wallClockSeconds: 90 });
    // The bomb's ceiling: its build script is compiled by an earlier job of the same lineage, so
    // this is room on a loaded machine for starting the sandbox and cargo and running the script
    // again (no rustc); the test waits for the ceiling, not for a time. For as long as it lasts
    // the bomb keeps both cores busy, which is why the compiling is not done under it.
    quick = await e.extraApp({ wallClockSeconds: 30 });
  });
  after(async () => {
    listener.close();
    await e.close();
    rmSync(workRoot, { recursive: true, force: true });
  });

  it("build script and tests try network, /root, another job, and writes outside their dirs: every attempt is denied and the job passes", async (t) => {
    const marker = newMarker("hostile");
    const canary = join("/tmp", `${marker}-host-canary`);
    writeFileSync(canary, "the host's /tmp\n");
    const toolchain = await admitToolchain("stable");
    try {
      const id = await e.jobs.submit(crate("hostile", HOSTILE_CRATE), `submit-${marker}`, {
        environment: {
          KILN_MARKER: marker,
          KILN_HOST_PORT: String(port),
          KILN_UPSTREAM_ADDR: `127.0.0.1:${port}`,
          KILN_OTHER_SECRET: secretPath,
          KILN_WORK_ROOT: workRoot,
          KILN_HOST_CANARY: canary,
          KILN_HOST_PATHS: hostPathsFor([workRoot, e.lineageRoot, e.crateRoot, toolchain.path]),
        },
      });
      const job = await e.jobs.settle(id, 180_000);
      const evidence = await e.jobs.evidence(id);
      const failed = (evidence.report.tests as Doc[]).filter((t) => t.outcome === "failed").map((t) => t.name);
      assert.equal(
        job.status,
        "passed",
        `something escaped; failed tests: ${JSON.stringify(failed)}\n${await explainJob(e.jobs, id)}`,
      );
      // Every test ran and passed, i.e. each one saw its escape denied.
      const outcomes = testOutcomes(evidence);
      for (const name of [...Object.keys(HOSTILE_TESTS), "host_tmp_is_private"])
        assert.ok(
          (evidence.report.tests as Doc[]).some((t) => t.name === `tests::${name}` && t.outcome === "passed"),
          `tests::${name} passed: ${JSON.stringify(outcomes)}`,
        );
      // The build script reported every probe denied (cargo relays its warnings to the log).
      const log = await e.jobs.logText(id);
      for (const probe of [...ESCAPES, "see the host's /tmp"])
        assert.ok(log.includes(`BUILD-PROBE ${probe} DENIED`), `the build script's "${probe}" was denied\n${log}`);
      assert.doesNotMatch(log, /BUILD-PROBE .* ALLOWED/);
      t.diagnostic(
        log
          .split("\n")
          .filter((l) => l.includes("BUILD-PROBE"))
          .map((l) => l.replace(/^.*BUILD-PROBE /, ""))
          .join("; "),
      );

      // Nothing reached the host.
      assert.equal(connections, 0, "the host's loopback listener was reached from inside");
      assert.deepEqual(
        readdirSync("/tmp").filter((f) => f.includes(marker) && f !== `${marker}-host-canary`),
        [],
        "the host's /tmp received the job's files",
      );
      for (const dir of ["/usr", "/etc", join(toolchain.path, "bin"), workRoot, join(secretPath, "..")])
        assert.deepEqual(
          readdirSync(dir).filter((f) => f.includes(marker)),
          [],
          `${dir} received the job's files`,
        );
      assert.equal(readFileSync(secretPath, "utf8"), secret, "the other job's file is untouched");
      assert.deepEqual(await processesCarrying(marker), []);
    } finally {
      rmSync(canary, { force: true });
    }
  });

  it("a test allocating 6 GiB on kiln2-cpu (4 GiB) is OOM-killed: the job fails and says so; the host survives", async (t) => {
    const marker = newMarker("memory");
    const id = await bounded.submit(crate("memoryhog", MEMORY_HOG_CRATE), `submit-${marker}`, {
      environment: { KILN_MARKER: marker },
    });
    memoryJob = id;
    const job = await bounded.settle(id, 120_000);
    const explanation = await explainJob(bounded, id);
    assert.equal(job.status, "failed", explanation);
    const evidence = await bounded.evidence(id);
    const unit = evidence.report.units[0];
    const hog = (evidence.report.tests as Doc[]).find((t) => t.name === "tests::fills_memory");
    t.diagnostic(
      `failure ${JSON.stringify(job.failure)}; unit oom_killed=${unit.oom_killed} peak=${unit.peak_memory_bytes}; tests ${JSON.stringify(testOutcomes(evidence))}`,
    );
    assert.ok(
      unit.oom_killed === true || hog?.outcome === "failed",
      `the evidence reports the OOM kill or the failed test\n${explanation}`,
    );
    assert.equal(unit.oom_killed, true, `the evidence's unit says the kernel OOM-killed the attempt\n${explanation}`);
    const log = await bounded.logText(id);
    assert.doesNotMatch(log, /CONTAINMENT FAILED/, "the test held 6 GiB");
    assert.match(log, /cleanup: no process of the attempt remains; its cgroup was removed/);
    assert.match(job.failure.detail, /memory/, "the failure says it was memory");
    assert.equal(job.failure.phase, "test", "the failure names the test phase");
    if (typeof unit.peak_memory_bytes === "number")
      assert.ok(unit.peak_memory_bytes <= 4 * GiB + 64 * 2 ** 20, `peak ${unit.peak_memory_bytes} bytes`);
    assert.deepEqual(await processesCarrying(marker), []);
    assertHostResponsive();
  });

  it("the OOM-killed test binary is named in the evidence's tests as failed", async () => {
    assert.ok(memoryJob !== undefined, "the memory job ran");
    const evidence = await bounded.evidence(memoryJob);
    assert.ok(
      (evidence.report.tests as Doc[]).some((t) => /memoryhog/.test(t.target) && t.outcome === "failed"),
      `the killed target is reported failed: ${JSON.stringify(testOutcomes(evidence))}`,
    );
  });

  it("the OOM kill in the test phase (after a passed build) fails the job with cause test_failure, not build_error", async () => {
    assert.ok(memoryJob !== undefined, "the memory job ran");
    const evidence = await bounded.evidence(memoryJob);
    assert.ok(
      (evidence.report.crates as Doc[]).every((c) => c.outcome !== "failed"),
      "the crate built",
    );
    assert.equal(evidence.job.failure?.cause, "test_failure", JSON.stringify(evidence.job.failure));
  });

  it("a build script filling its disk stops at the quota: the job fails saying so, the target dir held no more than the quota, the lineage is dropped", async (t) => {
    const marker = newMarker("diskfill");
    const freeBefore = statfsSync(workRoot).bavail * statfsSync(workRoot).bsize;
    const id = await bounded.submit(crate("diskfill", DISK_FILL_CRATE), `submit-${marker}`, {
      operation: "build",
      environment: { KILN_MARKER: marker },
    });
    const job = await bounded.settle(id, 150_000);
    const explanation = await explainJob(bounded, id);
    const evidence = await bounded.evidence(id);
    const unit = evidence.report.units[0];
    const log = await bounded.logText(id);
    const wrote = /kiln-test: wrote (\d+) MiB, then: ([^\n]*)/.exec(log);
    t.diagnostic(
      `failure ${JSON.stringify(job.failure)}; unit disk ${unit?.disk_used_bytes}/${unit?.disk_bytes}; ${wrote?.[0]}`,
    );
    assert.equal(job.status, "failed", explanation);
    assert.equal(job.failure?.cause, "build_error", JSON.stringify(job.failure));
    assert.match(
      job.failure?.detail ?? "",
      /filled its disk quota \(512 MiB in its target dir\)/,
      "the failure names the disk quota",
    );
    assert.equal(unit?.disk_quota_exceeded, true, `the unit says the disk quota was hit\n${explanation}`);
    assert.equal(unit?.disk_bytes, DISK_QUOTA);
    assert.ok(unit.disk_used_bytes <= DISK_QUOTA + 16 * MiB, `the target dir held ${unit.disk_used_bytes} bytes`);
    assert.ok(wrote !== null, `the build script said how far it got\n${explanation}`);
    assert.ok(Number(wrote[1]) < DISK_FILL_GIVE_UP_MIB && Number(wrote[1]) <= 512, `it wrote ${wrote[1]} MiB`);
    assert.match(wrote[2] ?? "", /No space left on device/);
    assert.match(log, /the job filled the 512 MiB disk quota of its target dir/);
    // The host's disk: at most the quota (plus the file system's own blocks) went to the job.
    const freeAfter = statfsSync(workRoot).bavail * statfsSync(workRoot).bsize;
    t.diagnostic(`host disk free ${freeBefore} → ${freeAfter}`);
    // The lineage is dropped: its save says why, and the next job of the class starts cold.
    const caches = (evidence.report.caches as Doc[]).find((c) => typeof c.lineage === "string");
    assert.match(String(caches?.save), /filled its disk quota/, JSON.stringify(evidence.report.caches));
    assert.deepEqual(await processesCarrying(marker), []);
    assertHostResponsive();
  });

  it("a fork bomb is capped at the size's pids limit; the job reports the test; nothing of it remains; the host answers", async (t) => {
    const marker = newMarker("forkbomb");
    const id = await bounded.submit(crate("forkbomb", FORK_BOMB_CRATE), `submit-${marker}`, {
      environment: { KILN_MARKER: marker, KILN_PIDS_MAX: String(KILN2_PIDS) },
    });
    const job = await bounded.settle(id, 150_000);
    const explanation = await explainJob(bounded, id);
    const evidence = await bounded.evidence(id);
    t.diagnostic(`job ${job.status} ${JSON.stringify(job.failure)}; tests ${JSON.stringify(testOutcomes(evidence))}`);
    for (const name of ["fork_bomb_is_capped", "unreaped_children_are_capped"]) {
      const test = (evidence.report.tests as Doc[]).find((t) => t.name === name);
      assert.ok(test !== undefined, `the evidence names ${name}\n${explanation}`);
      assert.equal(test.outcome, "passed", `${name}: contained by the pids limit\n${explanation}`);
    }
    assert.equal(job.status, "passed", explanation);
    // The kernel's own count of forks refused at pids.max (pids.events), whatever the load.
    assert.match(
      await bounded.logText(id),
      new RegExp(`pids: the kernel refused [1-9]\\d* forks at the attempt's limit of ${KILN2_PIDS} processes`),
    );
    assert.deepEqual(await processesCarrying(marker), [], "a process of the attempt remains");
    assert.match(await bounded.logText(id), /cleanup: no process of the attempt remains; its cgroup was removed/);
    assertHostResponsive();
  });

  it("a fork bomb nobody stops ends at the wall-clock ceiling with every process killed; the host answers", async (t) => {
    const marker = newMarker("bomb");
    const repository = "acme/unstoppable";
    await onboardRepository(e.storage, { tenantId: e.tenant, name: repository, onboardedBy: "test" }, new Date());
    const source = crate("unstoppable", UNSTOPPABLE_BOMB_CRATE);
    // -vv: cargo streams the build script's output, which says when the bomb rages.
    const invocation = { operation: "build", arguments: ["-vv"] };
    // First the bomb disarmed, under the platform's ceiling: cargo compiles the build script
    // into the repository's lineage and runs it once (it returns without KILN_BOMB=go).
    const unarmed = new Jobs(e.jobs.api, repository);
    const built = await unarmed.submit(source, `build-${marker}`, {
      ...invocation,
      environment: { KILN_MARKER: marker },
    });
    assert.equal((await unarmed.settle(built, 180_000)).status, "passed", await explainJob(unarmed, built));
    const bombs = new Jobs(quick.api, repository);
    const submittedAt = Date.now();
    const id = await bombs.submit(source, `submit-${marker}`, {
      ...invocation,
      environment: { KILN_MARKER: marker, KILN_BOMB: "go" },
    });
    const job = await bombs.settle(id, 180_000);
    t.diagnostic(`settled ${Date.now() - submittedAt} ms after submission: ${JSON.stringify(job.failure)}`);
    assert.equal(job.status, "failed", await explainJob(bombs, id));
    assert.equal(job.failure?.cause, "wall_clock_ceiling", JSON.stringify(job.failure));
    const caches = (await bombs.evidence(id)).report.caches as Doc[];
    assert.equal(caches[0]?.outcome, "warm", `the build script came compiled: ${JSON.stringify(caches)}`);
    const log = await bombs.logText(id);
    assert.match(log, /kiln-test: bomb launched as pid \d+/, "the bomb ran before the ceiling ended it");
    assert.deepEqual(await processesCarrying(marker), [], "a process of the bomb survived");
    assert.match(log, /cleanup: no process of the attempt remains; its cgroup was removed/);
    // The host removes a finished attempt's directory in the background (the next job need
    // not wait for the disk): wait for that state, however loaded the machine is.
    const attemptDir = join(workRoot, `${id}-a1`);
    for (let waited = 0; existsSync(attemptDir) && waited < 120_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(!existsSync(attemptDir), "the attempt's directory was removed");
    assertHostResponsive();
  });
});
