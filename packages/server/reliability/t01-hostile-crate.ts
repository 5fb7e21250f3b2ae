/**
 * T1 hostile crate, through the embedded server and host (SQLite: the promise is the host's
 * sandbox, not the database's), real cargo in the real sandbox. While a victim job runs (its
 * build script waits to be released, its source holds a secret), hostile jobs try:
 *
 * - network: a public address, 169.254.169.254, the server's own API port, the dependency
 *   gateway's upstream (a listener standing for the registry), each from the build script and a test;
 * - reading /root, the running victim's files and directory (by their host paths), the work root;
 * - writing /usr, /etc, the toolchain, the victim's directory, the host's /tmp;
 * - seeing host paths through /proc (mountinfo, mounts, cwd, exe, cmdline, partitions) or the
 *   environment, running without a seccomp filter, and 15 system calls the filter refuses
 *   (raw `syscall` instructions whose unfiltered answer here is not EPERM);
 * - a fork bomb (counted by the kernel's refusals at pids.max, pids.events, never by time),
 *   a test allocating 6 GiB on a 4 GiB size, and a build script filling its disk.
 *
 * With KILN_T1_ISOLATION=microvm the host is a microVM host (under TCG: `KILN_TEST_GUEST_DIR`,
 * default /var/cache/kiln-test/guest, holds its guest): the same probes from inside a VM, but for
 * the seccomp ones (in a microVM a job's system calls reach only its own guest kernel). The
 * victim then cannot be released from the host (its workspace is a disk image inside its VM): it
 * sleeps, and is cancelled once the hostile job has probed it.
 *
 * Broken: any escape allowed (a build probe ALLOWED or a hostile test failing), a connection
 * reaching a listener, the victim's file changed or a marker file outside the jobs' directories,
 * the fork bomb never refused or seen above pids.max, the memory job not OOM-killed, the disk
 * job not stopped at its quota with the typed cause (or its lineage kept); and afterwards any
 * process carrying a marker, any attempt cgroup, any mount or loop device of an attempt, or any
 * attempt directory left.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { admitToolchain, chooseScratchRoot, createSandboxExecutor, microvmIsolation } from "@kiln/host";
import { cgroupDirectoriesNamed } from "@kiln/host/testing";
import {
  crate,
  type Doc,
  type Embedded,
  type Jobs,
  processesCarrying,
  startEmbedded,
} from "../src/testing/e2e-jobs.js";
import {
  DISK_FILL_CRATE,
  escapesFor,
  FORK_BOMB_CRATE,
  hostileCrateFor,
  hostileTestsFor,
  hostPathsFor,
  MEMORY_HOG_CRATE,
  VICTIM_CRATE,
} from "../test/hostile-crates.js";
import { count, runTrial } from "./trial.js";

const MiB = 2 ** 20;
/** The disk quota the trial's host grants (kiln2-cpu's is 16 GiB; filling 512 MiB proves the same bound in seconds). */
const DISK_QUOTA = 512 * MiB;
const KILN2_PIDS = 1024;
const ISOLATION = process.env.KILN_T1_ISOLATION === "microvm" ? "microvm" : "sandbox";
/**
 * The jobs' wall-clock ceiling, and how long the fork bomb waits for a refusal: each only ends
 * what would never finish (no verdict is a time), so a microVM under software emulation on a
 * loaded machine, whose compiling and forking are tens of times slower, gets far longer ones.
 */
const CEILING_SECONDS = ISOLATION === "microvm" ? 3600 : 300;
const BOMB_PATIENCE_SECONDS = ISOLATION === "microvm" ? 1200 : 60;
/** How long the trial waits for a job to settle: past its ceiling, which settles it. */
const SETTLE_MS = (CEILING_SECONDS + 600) * 1000;

/** A victim for a microVM: its build script sleeps until the trial cancels it (nothing reaches into its VM). */
const SLEEPING_VICTIM_CRATE: Record<string, string> = {
  ...VICTIM_CRATE,
  "build.rs": `fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    std::thread::sleep(std::time::Duration::from_secs(3600));
}
`,
};

/** A loopback listener that counts connections (and accepts none). */
async function countingListener(): Promise<{ server: Server; port: number; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  return {
    server,
    port: typeof address === "object" && address !== null ? address.port : 0,
    connections: () => connections,
  };
}

/** Waits for a condition, however slowly the machine runs; the bound only ends a wait for what never comes. */
async function until(what: string, check: () => boolean | Promise<boolean>, boundMs = 600_000): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(200);
  }
}

runTrial(ISOLATION === "microvm" ? "T1 (microVM)" : "T1", "hostile crate", async () => {
  const broken: string[] = [];
  const workRoot = mkdtempSync(join(tmpdir(), "kiln-t1-attempts-"));
  const upstream = await countingListener();
  const e: Embedded = await startEmbedded({
    workRoot,
    wallClockSeconds: CEILING_SECONDS,
    ...(ISOLATION === "microvm"
      ? {
          isolation: microvmIsolation({
            accel: "tcg",
            guestDirectory: process.env.KILN_TEST_GUEST_DIR ?? "/var/cache/kiln-test/guest",
            maxDiskBytes: DISK_QUOTA,
            // The boot bound only ends a VM that never boots (a starved guest on a loaded machine boots slowly).
            readySeconds: 1800,
          }),
        }
      : { executor: createSandboxExecutor({ maxDiskBytes: DISK_QUOTA }) }),
    cratesIoIndex: `sparse+http://127.0.0.1:${upstream.port}/index/`,
  });
  // The server's real API port, listening on loopback as `kiln-server serve` does.
  let apiConnections = 0;
  e.app.server.on("connection", () => apiConnections++);
  await e.app.listen({ port: 0, host: "127.0.0.1" });
  const apiAddress = e.app.server.address();
  const apiPort = typeof apiAddress === "object" && apiAddress !== null ? apiAddress.port : 0;
  const scratchRoot = chooseScratchRoot(workRoot);
  const markers: string[] = [];
  const attemptIds: string[] = [];
  const newMarker = (what: string) => {
    const marker = `kiln-t1-${what}-${randomBytes(6).toString("hex")}`;
    markers.push(marker);
    return marker;
  };
  const jobs: Jobs = e.jobs;
  const toolchain = await admitToolchain("stable");
  const canary = join("/tmp", `${newMarker("canary")}-host-canary`);
  writeFileSync(canary, "the host's /tmp\n");
  let escapes = 0;
  let probes = 0;
  const figure: string[] = [];
  try {
    // The victim: running (its build script waits) while the hostile job probes its directories.
    const victim = await jobs.submit(
      crate("victim", ISOLATION === "microvm" ? SLEEPING_VICTIM_CRATE : VICTIM_CRATE),
      `t1-${newMarker("victim")}`,
      { operation: "build" },
    );
    attemptIds.push(`${victim}-a1`);
    const victimSource = join(scratchRoot ?? workRoot, `${victim}-a1`, "src");
    await until("the victim to run", async () =>
      ISOLATION === "microvm"
        ? (await processesCarrying(`kiln-${victim}-a1`)).length > 0
        : existsSync(join(victimSource, "started")),
    );
    const secretPath = join(victimSource, "secret.txt");
    const secretBefore = readFileSync(secretPath, "utf8");

    const marker = newMarker("hostile");
    const hostile = await jobs.submit(crate("hostile", hostileCrateFor(ISOLATION)), `t1-${marker}`, {
      environment: {
        KILN_MARKER: marker,
        KILN_HOST_PORT: String(apiPort),
        KILN_UPSTREAM_ADDR: `127.0.0.1:${upstream.port}`,
        KILN_OTHER_SECRET: secretPath,
        KILN_WORK_ROOT: workRoot,
        KILN_HOST_CANARY: canary,
        KILN_HOST_PATHS: hostPathsFor([workRoot, e.lineageRoot, e.crateRoot, toolchain.path], {
          rootDevice: ISOLATION === "sandbox",
        }),
      },
    });
    attemptIds.push(`${hostile}-a1`);
    const hostileJob = await jobs.settle(hostile, SETTLE_MS);
    const hostileLog = await jobs.logText(hostile);
    const hostileEvidence = await jobs.evidence(hostile);
    const buildProbes = [...hostileLog.matchAll(/BUILD-PROBE (.*) (ALLOWED|DENIED)/g)];
    probes += buildProbes.length;
    for (const [, attempted, verdict] of buildProbes)
      if (verdict === "ALLOWED") {
        escapes++;
        broken.push(`the build script's "${attempted}" was allowed`);
      }
    const expectedBuildProbes = escapesFor(ISOLATION).length + 1;
    if (buildProbes.length !== expectedBuildProbes)
      broken.push(`the build script reported ${buildProbes.length} of ${expectedBuildProbes} probes`);
    const tests = hostileEvidence.report.tests as Doc[];
    const hostileTests = hostileTestsFor(ISOLATION);
    for (const name of [...Object.keys(hostileTests), "host_tmp_is_private"]) {
      const test = tests.find((t) => t.name === `tests::${name}`);
      const asserted = name === "host_tmp_is_private" ? 1 : (hostileTests[name]?.length ?? 0);
      probes += asserted;
      if (test?.outcome !== "passed") {
        escapes += asserted;
        broken.push(`the test ${name} ${test === undefined ? "did not run" : test.outcome}`);
      }
    }
    if (hostileJob.status !== "passed")
      broken.push(`the hostile job ${hostileJob.status}: ${JSON.stringify(hostileJob.failure)}`);
    if (apiConnections > 0) broken.push(`${apiConnections} connections reached the API port`);
    if (upstream.connections() > 0) broken.push(`${upstream.connections()} connections reached the gateway's upstream`);
    figure.push(
      `${count(probes)} escape attempts from the build script and tests (network ×4, /root, a running job's files, the work root, writes outside, host paths in /proc${ISOLATION === "sandbox" ? ", no seccomp, 15 filtered system calls" : ""}): ${escapes} escapes`,
    );

    // Release the victim (cancel it, in a microVM); its secret must be as it was.
    if (ISOLATION === "microvm") {
      const cancelled = await jobs.cancel(victim, `t1-cancel-${victim}`);
      if (cancelled.status !== 200) broken.push(`the victim could not be cancelled: ${cancelled.body}`);
    } else writeFileSync(join(victimSource, "release.txt"), "go\n");
    const victimJob = await jobs.settle(victim, 600_000);
    const victimExpected = ISOLATION === "microvm" ? "cancelled" : "passed";
    if (victimJob.status !== victimExpected) broken.push(`the victim job ${victimJob.status}`);
    if (secretBefore !== "the victim job's secret\n") broken.push("the victim's secret changed while it ran");

    // The fork bomb: the kernel's own count of forks refused at pids.max (pids.events), never a sample.
    const bombMarker = newMarker("forkbomb");
    const bomb = await jobs.submit(crate("forkbomb", FORK_BOMB_CRATE), `t1-${bombMarker}`, {
      arguments: ["--", "--nocapture"],
      environment: {
        KILN_MARKER: bombMarker,
        KILN_PIDS_MAX: String(KILN2_PIDS),
        KILN_BOMB_PATIENCE_SECONDS: String(BOMB_PATIENCE_SECONDS),
      },
    });
    attemptIds.push(`${bomb}-a1`);
    const bombJob = await jobs.settle(bomb, SETTLE_MS);
    const bombLog = await jobs.logText(bomb);
    const kernelRefused =
      /pids: the (?:guest )?kernel refused (\d+) forks at the attempt's limit of (\d+) processes/.exec(bombLog);
    const bombLine = /(\d+) forks of the bomb refused/.exec(bombLog);
    if (bombJob.status !== "passed" || kernelRefused === null)
      broken.push(
        `the fork bomb job ${bombJob.status} (${JSON.stringify(bombJob.failure)}); the kernel's refusals: ${kernelRefused?.[1] ?? "none reported"}`,
      );
    else
      figure.push(
        `fork bomb: the kernel refused ${count(Number(kernelRefused[1]))} forks at pids.max ${kernelRefused[2]} (the bomb itself saw ${count(Number(bombLine?.[1] ?? 0))} refused), its tests passed`,
      );

    // Memory: 6 GiB touched on a 4 GiB size.
    const memory = await jobs.submit(crate("memoryhog", MEMORY_HOG_CRATE), `t1-${newMarker("memory")}`);
    attemptIds.push(`${memory}-a1`);
    const memoryJob = await jobs.settle(memory, SETTLE_MS);
    const memoryUnit = (await jobs.evidence(memory)).report.units[0];
    if (memoryJob.status !== "failed" || memoryUnit?.oom_killed !== true)
      broken.push(
        `the memory hog: ${memoryJob.status} (${JSON.stringify(memoryJob.failure)}), oom_killed ${memoryUnit?.oom_killed}; its log says: ${(
          await jobs.logText(memory)
        )
          .split("\n")
          .filter((l) => /kiln: .*(memory|counters|ceiling|cpu|console|QEMU|boot)/.test(l))
          .join(" | ")}`,
      );
    else figure.push(`memory: OOM-killed at 4 GiB (${memoryJob.failure?.cause})`);

    // Disk: a build script writing until its writes fail.
    const disk = await jobs.submit(crate("diskfill", DISK_FILL_CRATE), `t1-${newMarker("disk")}`, {
      operation: "build",
    });
    attemptIds.push(`${disk}-a1`);
    const diskJob = await jobs.settle(disk, SETTLE_MS);
    const diskEvidence = await jobs.evidence(disk);
    const diskUnit = diskEvidence.report.units[0];
    const wrote = /kiln-test: wrote (\d+) MiB, then: ([^\n]*)/.exec(await jobs.logText(disk));
    const dropped = (diskEvidence.report.caches as Doc[]).some((c) => /filled its disk quota/.test(String(c.save)));
    if (
      diskJob.status !== "failed" ||
      diskUnit?.disk_quota_exceeded !== true ||
      !/filled its disk quota/.test(diskJob.failure?.detail ?? "") ||
      wrote === null ||
      Number(wrote[1]) > DISK_QUOTA / MiB ||
      !dropped
    )
      broken.push(
        `the disk fill: ${diskJob.status} ${JSON.stringify(diskJob.failure)}, disk_quota_exceeded ${diskUnit?.disk_quota_exceeded}, ${wrote?.[0]}, lineage dropped ${dropped}`,
      );
    else
      figure.push(
        `disk fill: stopped at ${wrote[1]} MiB of a ${DISK_QUOTA / MiB} MiB quota (${wrote[2]?.replace(/ \(os error \d+\).*/, "")}), ${diskJob.failure?.cause} naming the quota, lineage dropped`,
      );

    // Afterwards: the host clean.
    await until("the host to remove the attempts' directories", () =>
      attemptIds.every((id) => !existsSync(join(workRoot, id)) && !existsSync(join(scratchRoot ?? workRoot, id))),
    );
    let leftovers = 0;
    for (const m of markers) {
      const processes = await processesCarrying(m);
      leftovers += processes.length;
      if (processes.length > 0)
        broken.push(`processes carrying ${m} remain: ${processes.map((p) => p.pid).join(", ")}`);
    }
    let cgroups = 0;
    for (const id of attemptIds) {
      const left = await cgroupDirectoriesNamed(id);
      cgroups += left.length;
      if (left.length > 0) broken.push(`cgroups of ${id} remain: ${left.join(", ")}`);
    }
    const mountinfo = await readFile("/proc/self/mountinfo", "utf8");
    const mounts = mountinfo
      .split("\n")
      .filter((l) => l.includes(workRoot) || (scratchRoot !== undefined && l.includes(scratchRoot)));
    if (mounts.length > 0) broken.push(`mounts remain: ${mounts.join(" | ")}`);
    const loops = readdirSync("/sys/block")
      .filter((d) => d.startsWith("loop"))
      .map((d) => {
        try {
          return readFileSync(`/sys/block/${d}/loop/backing_file`, "utf8").trim();
        } catch {
          return "";
        }
      })
      .filter((f) => f.startsWith(workRoot) || f.startsWith(e.lineageRoot));
    if (loops.length > 0) broken.push(`loop devices remain on ${loops.join(", ")}`);
    const stray = [
      ...["/tmp", "/usr", "/etc", join(toolchain.path, "bin"), workRoot].flatMap((dir) =>
        readdirSync(dir)
          .filter((f) => markers.some((m) => f.includes(m)) && join(dir, f) !== canary)
          .map((f) => join(dir, f)),
      ),
    ];
    if (stray.length > 0) broken.push(`files outside the jobs' directories: ${stray.join(", ")}`);
    figure.push(
      `host afterwards: ${leftovers} processes, ${cgroups} cgroups, ${mounts.length} mounts, ${loops.length} loop devices, ${stray.length} stray files`,
    );
    return { figure: figure.join("; "), broken };
  } finally {
    rmSync(canary, { force: true });
    upstream.server.close();
    await e.close();
    rmSync(workRoot, { recursive: true, force: true });
  }
});
