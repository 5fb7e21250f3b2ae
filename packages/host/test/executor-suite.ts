/**
 * The behaviour every isolation's executor must show, run against the real thing (real
 * isolation, real cargo, crates generated at test time):
 * `executorSuite("sandbox", () => sandboxIsolation())` and
 * `executorSuite("microvm", () => microvmIsolation(…))`. What the host reads back (the target
 * dir's files) goes through the isolation, as the agent's does. Compiles are few (the slowest
 * part in a microVM under software emulation): one crate for passing and failing tests, and one
 * probe crate built once whose build script also serves the cancellation test. What the command
 * sees from inside (environment, network, file system) a Perl script probes, which needs no
 * compile.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type AdmittedToolchain,
  type ExecutionRequest,
  type ExecutionResult,
  NEUTRAL_MOUNTS,
} from "../src/executor/executor.js";
import type { HostIsolation } from "../src/executor/host-isolation.js";
import { admitToolchain } from "../src/executor/shared/admit-toolchains.js";
import { removeJobDirectories } from "../src/executor/shared/remove-job-directories.js";
import { cgroupDirectoriesNamed } from "../src/testing/index.js";

export interface Job {
  readonly workspaceDir: string;
  readonly targetDir: string;
  readonly homeDir: string;
}

export interface Attempt {
  readonly result: ExecutionResult;
  readonly stdout: string;
  readonly stderr: string;
  readonly elapsedMs: number;
  readonly attemptId: string;
}

const MiB = 1024 * 1024;
const DEFAULT_LIMITS = { vcpus: 2, memoryBytes: 2048 * MiB, pids: 512, diskBytes: 4096 * MiB };

/** Creates the three job directories under `root`. */
export async function makeJob(root: string, name: string): Promise<Job> {
  const job = {
    workspaceDir: join(root, name, "workspace"),
    targetDir: join(root, name, "target"),
    homeDir: join(root, name, "home"),
  };
  for (const dir of Object.values(job)) await mkdir(dir, { recursive: true });
  return job;
}

/**
 * The generated crates' build profile: no debug info, no incremental state, no doctests. Under
 * emulation every rustc, rustdoc and link is slow; measured in a microVM under TCG, this takes a
 * `cargo test` of a one-function crate from about 24 to 16 CPU-seconds (docs/benchmarks.md). What
 * the suite asserts never depends on debug info or doctests.
 */
export const LEAN_PROFILE = "\n[profile.dev]\ndebug = 0\nincremental = false\n";
const NO_DOCTESTS = "\n[lib]\ndoctest = false\n";

/** Writes a crate into the job's workspace: Cargo.toml plus the given files. */
export async function writeCrate(job: Job, name: string, files: Record<string, string>): Promise<void> {
  await writeFile(
    join(job.workspaceDir, "Cargo.toml"),
    `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n${"src/lib.rs" in files ? NO_DOCTESTS : ""}${LEAN_PROFILE}\n[dependencies]\n`,
  );
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(job.workspaceDir, path)), { recursive: true });
    await writeFile(join(job.workspaceDir, path), text);
  }
}

/** Every pid on the host whose cgroup path or (unless `cgroupOnly`) command line contains `needle` (never this test process). */
export async function hostProcessesMatching(needle: string, cgroupOnly = false): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const cgroup = await readFile(`/proc/${pid}/cgroup`, "utf8");
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, "utf8")).replaceAll("\0", " ");
      if (cgroup.includes(needle) || (!cgroupOnly && cmdline.includes(needle))) found.push(pid);
    } catch {
      // The process exited while we looked.
    }
  }
  return found;
}

/** Asserts that nothing of the attempt survives: no process, no cgroup directory. */
export async function assertNothingSurvives(attemptId: string, marker?: string): Promise<void> {
  assert.deepEqual(await hostProcessesMatching(attemptId), [], "a process of the attempt is still in its cgroup");
  if (marker !== undefined)
    assert.deepEqual(await hostProcessesMatching(marker), [], "a process carrying the marker survived");
  assert.deepEqual(await cgroupDirectoriesNamed(attemptId), [], "the attempt's cgroup still exists");
}

export function executorSuite(
  name: "sandbox" | "microvm",
  makeIsolation: () => HostIsolation | Promise<HostIsolation>,
  /**
   * The ceiling of the attempts that are not about the ceiling: generous, since it only ends one
   * that hangs (a microVM under software emulation on a loaded machine compiles slowly).
   */
  options: {
    readonly wallClockSeconds?: number;
    /**
     * How many times longer the fork bombs' ceilings are (their verdicts are what the kernel
     * refused, the ceiling only ends a bomb that never meets the limit): a microVM under TCG on
     * a loaded machine forks slowly.
     */
    readonly bombCeilingFactor?: number;
    /** The attempts' vCPUs (default 2). */
    readonly vcpus?: number;
  } = {},
): void {
  const limits = { ...DEFAULT_LIMITS, vcpus: options.vcpus ?? DEFAULT_LIMITS.vcpus };
  describe(`executor suite: ${name}`, () => {
    let isolation: HostIsolation;
    let toolchain: AdmittedToolchain;
    let root: string;
    let counter = 0;

    const attempt = async (
      job: Job,
      request: Partial<ExecutionRequest> & { argv: readonly string[] },
      whileRunning?: (attemptId: string) => void,
      onText?: (text: string) => void,
    ): Promise<Attempt> => {
      const attemptId = `suite-${name}-${++counter}-${randomBytes(4).toString("hex")}`;
      const stdout: Buffer[] = [];
      const stderr: Buffer[] = [];
      const started = Date.now();
      const running = isolation.executor.run({
        attemptId,
        limits,
        ...job,
        toolchain,
        workingDirectory: ".",
        environment: {},
        wallClockSeconds: options.wallClockSeconds ?? 120,
        network: "offline",
        signal: new AbortController().signal,
        onOutput: (stream, chunk) => {
          (stream === "stdout" ? stdout : stderr).push(chunk);
          onText?.(Buffer.concat(stream === "stdout" ? stdout : stderr).toString("utf8"));
        },
        ...request,
      });
      whileRunning?.(attemptId);
      const result = await running;
      return {
        result,
        stdout: Buffer.concat(stdout).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8"),
        elapsedMs: Date.now() - started,
        attemptId,
      };
    };
    const explain = (a: Attempt) =>
      `outcome ${a.result.outcome} exit ${a.result.exitCode}\n--- stdout\n${a.stdout}\n--- stderr\n${a.stderr}\n--- detail\n${a.result.detail.join("\n")}`;

    let probe: Job;
    /**
     * Where the attempts that are killed (the fork bombs', the ceiling's) run: a microVM killed
     * while it runs leaves its target disk uncleanly unmounted, and the next attempt on that disk
     * starts on a fresh one; on the probe's, the cancellation test would compile the probe's
     * build script again (about 10 CPU-seconds under TCG).
     */
    let killedJob: Job;
    let otherJob: Job;
    let secretPath: string;

    before(async () => {
      isolation = await makeIsolation();
      toolchain = await admitToolchain("stable");
      root = await mkdtemp(join(tmpdir(), `kiln-executor-suite-${name}-`));
      probe = await makeJob(root, "probe");
      killedJob = await makeJob(root, "killed");
      await writeCrate(probe, "probe", PROBE_CRATE);
      otherJob = await makeJob(root, "other");
      secretPath = join(otherJob.workspaceDir, "secret.txt");
      await writeFile(secretPath, "another job's secret\n", { mode: 0o600 });
    });
    after(async () => {
      await removeJobDirectories([root]);
    });

    it("reports its isolation", () => {
      assert.equal(isolation.executor.isolation, name);
      assert.equal(isolation.choice.isolation, name);
    });

    // One crate, compiled once: its passing test alone, then with the failing one (the second
    // attempt finds the first one's build in the same target dir).
    let arithmetic: Job;
    it("runs a passing `cargo test --offline` of a generated crate", async () => {
      arithmetic = await makeJob(root, "arithmetic");
      await writeCrate(arithmetic, "arithmetic", {
        "src/lib.rs":
          'pub fn add(a: u32, b: u32) -> u32 { a + b }\n#[test]\nfn adds() { assert_eq!(add(2, 2), 4); }\n#[test]\nfn fails() { assert_eq!(add(1, 1), 3, "arithmetic still works"); }\n',
      });
      const a = await attempt(arithmetic, { argv: ["cargo", "test", "--offline", "--", "--exact", "adds"] });
      assert.equal(a.result.outcome, "exited", explain(a));
      assert.equal(a.result.exitCode, 0, explain(a));
      assert.match(a.stdout, /test adds \.\.\. ok/);
      assert.match(a.stdout, /test result: ok\. 1 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out/);
      assert.equal(a.result.isolation, name);
      assert.ok(a.result.finishedAt >= a.result.startedAt);
      await assertNothingSurvives(a.attemptId);
    });

    // One attempt for both output tests (in a microVM each attempt is a boot): 5,000 alternating
    // lines on stdout and stderr, then a 1 MiB write(2) to stdout and the last bytes before exit.
    let outputRun:
      | Promise<{ attempt: Attempt; order: string[]; written: { stdout: string; stderr: string } }>
      | undefined;
    const outputAttempt = () => {
      outputRun ??= (async () => {
        const job = await makeJob(root, "output");
        const order: string[] = [];
        const pending = { stdout: "", stderr: "" };
        const written = { stdout: "", stderr: "" };
        const a = await attempt(job, {
          // Each `echo` is one write(2), alternating between the two descriptors without a pause:
          // two pipes read by one event loop are both readable at once here, all the time.
          argv: [
            "bash",
            "-c",
            'for i in $(seq 1 5000); do echo "$i out"; echo "$i err" >&2; done; exec perl -e "$0"',
            'my $b = "x" x (1024 * 1024); my $w = syswrite(STDOUT, $b); print STDERR "wrote ", (defined $w ? $w : "error $!"), "\\n"; syswrite(STDOUT, "last\\n"); exit 3',
          ],
          onOutput: (stream, chunk) => {
            written[stream] += chunk.toString("utf8");
            pending[stream] += chunk.toString("utf8");
            const lines = pending[stream].split("\n");
            pending[stream] = lines.pop() ?? "";
            for (const line of lines) order.push(`${stream} ${line}`);
          },
        });
        return { attempt: a, order, written };
      })();
      return outputRun;
    };
    const LINES = 5000;

    it("reports stdout and stderr in the one order the command wrote them", async () => {
      const { attempt: a, order } = await outputAttempt();
      assert.equal(a.result.outcome, "exited", explain(a));
      const expected = [
        ...Array.from({ length: LINES }, (_, i) => [`stdout ${i + 1} out`, `stderr ${i + 1} err`]).flat(),
        `stderr wrote ${1024 * 1024}`,
        `stdout ${"x".repeat(1024 * 1024)}last`,
      ];
      const firstDifference = expected.findIndex((line, i) => order[i] !== line);
      assert.equal(
        firstDifference,
        -1,
        `line ${firstDifference + 1} is ${JSON.stringify(order[firstDifference]?.slice(0, 80))}, written as ${JSON.stringify(expected[firstDifference]?.slice(0, 80))}`,
      );
      assert.equal(order.length, expected.length);
      await assertNothingSurvives(a.attemptId);
    });

    it("takes a 1 MiB write(2) to stdout whole, and the last bytes a command writes before it exits", async () => {
      const { attempt: a, written } = await outputAttempt();
      assert.equal(a.result.outcome, "exited", explain(a));
      assert.equal(a.result.exitCode, 3);
      const lines = (stream: string) => Array.from({ length: LINES }, (_, i) => `${i + 1} ${stream}\n`).join("");
      // Compared whole, reported by their ends (a 1 MiB diff says nothing).
      assert.ok(
        written.stderr === `${lines("err")}wrote ${1024 * 1024}\n`,
        `stderr ends ${JSON.stringify(written.stderr.slice(-60))}`,
      );
      assert.ok(
        written.stdout === `${lines("out")}${"x".repeat(1024 * 1024)}last\n`,
        `stdout (${written.stdout.length} characters) ends ${JSON.stringify(written.stdout.slice(-60))}`,
      );
    });

    it("reports a failing `cargo test` as a non-zero exit", async () => {
      const a = await attempt(arithmetic, { argv: ["cargo", "test", "--offline"] });
      assert.equal(a.result.outcome, "exited", explain(a));
      assert.equal(a.result.exitCode, 101, explain(a));
      assert.match(a.stdout, /test fails \.\.\. FAILED/);
      assert.match(a.stdout, /test result: FAILED\. 1 passed; 1 failed/);
      assert.doesNotMatch(a.stderr, /Compiling arithmetic/, `the first attempt's build was found\n${explain(a)}`);
    });

    it("builds the probe crate; its build script sees only the declared environment", async () => {
      process.env.KILN_HOST_CANARY = "leaked-from-host";
      try {
        // The library and the memory test's harness-less test at once (no libtest: in a microVM
        // under emulation, a test harness is the costliest link of all).
        const a = await attempt(probe, {
          argv: ["cargo", "build", "--offline", "--all-targets"],
          environment: { KILN_DECLARED: "declared-value" },
        });
        assert.equal(a.result.exitCode, 0, explain(a));
        assert.deepEqual(
          await isolation.withTargetFiles(
            probe.targetDir,
            ["debug/libprobe.rlib", "debug/deps/alloc-*"],
            10,
            async (files) =>
              files
                .filter((f) => !f.path.endsWith(".d"))
                .map((f) => [f.path.replace(/-[0-9a-f]{16}$/, "-<hash>"), f.bytes > 0]),
          ),
          [
            ["debug/deps/alloc-<hash>", true],
            ["debug/libprobe.rlib", true],
          ],
          "the probe library and test binary were built into the target dir, and the host reads them there",
        );
        assert.match(a.stderr, /BUILDENV KILN_DECLARED=declared-value/, explain(a));
        assert.match(a.stderr, new RegExp(`BUILDENV HOME=${NEUTRAL_MOUNTS.home}\\b`));
        assert.match(a.stderr, new RegExp(`BUILDENV CARGO_HOME=${NEUTRAL_MOUNTS.home}\\b`));
        // Nothing of the host's paths reaches the build script.
        assert.doesNotMatch(a.stderr, new RegExp(`BUILDENV .*${root}`));
        assert.doesNotMatch(a.stderr, /KILN_HOST_CANARY|leaked-from-host/);
        assert.doesNotMatch(a.stderr, /BUILDENV RUSTUP_TOOLCHAIN=/);
      } finally {
        delete process.env.KILN_HOST_CANARY;
      }
    });

    // One attempt of the probe script for the environment, network and escape probes (in a
    // microVM each attempt is a boot); each test reads its own lines of it.
    let probesRun: Promise<{ attempt: Attempt; connections: number; marker: string; port: number }> | undefined;
    const probesAttempt = () => {
      probesRun ??= (async () => {
        let connections = 0;
        const server: Server = createServer((socket) => {
          connections++;
          socket.destroy();
        });
        await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
        const address = server.address();
        const port = typeof address === "object" && address !== null ? address.port : 0;
        const marker = `kiln-escape-${randomBytes(6).toString("hex")}`;
        process.env.KILN_HOST_CANARY = "leaked-from-host";
        try {
          const a = await attempt(probe, {
            argv: [
              "perl",
              "-e",
              PROBE_SCRIPT,
              "env",
              "--",
              "net",
              ...netTargets(port),
              "--",
              "escape",
              secretPath,
              marker,
            ],
            environment: { KILN_DECLARED: "declared-value" },
          });
          return { attempt: a, connections, marker, port };
        } finally {
          delete process.env.KILN_HOST_CANARY;
          server.close();
        }
      })();
      return probesRun;
    };
    const netTargets = (port: number) => ["1.1.1.1:53", "169.254.169.254:80", `127.0.0.1:${port}`];

    it("gives the command exactly the declared environment plus the executor's variables", async () => {
      const { attempt: a } = await probesAttempt();
      assert.equal(a.result.exitCode, 0, explain(a));
      const env = new Map(
        a.stdout
          .split("\n")
          .filter((l) => l.startsWith("ENV "))
          .map((l) => {
            const [k, ...v] = l.slice(4).split("=");
            return [k ?? "", v.join("=")] as const;
          }),
      );
      assert.equal(env.get("KILN_DECLARED"), "declared-value");
      assert.equal(env.get("HOME"), NEUTRAL_MOUNTS.home);
      assert.equal(env.get("CARGO_HOME"), NEUTRAL_MOUNTS.home);
      assert.equal(env.get("CARGO_TARGET_DIR"), NEUTRAL_MOUNTS.target);
      assert.equal(env.get("CARGO_NET_OFFLINE"), "true");
      const allowed = new Set([
        "KILN_DECLARED",
        "PATH",
        "HOME",
        "CARGO_HOME",
        "CARGO_TARGET_DIR",
        "CARGO_NET_OFFLINE",
        "PWD",
      ]);
      assert.deepEqual(
        [...env.keys()].filter((k) => !allowed.has(k)),
        [],
        "variables nobody declared reached the command",
      );
    });

    it("has no network: public, link-local and the host's loopback are all unreachable", async () => {
      const { attempt: a, connections, port } = await probesAttempt();
      assert.equal(a.result.exitCode, 0, explain(a));
      for (const target of netTargets(port)) assert.match(a.stdout, new RegExp(`NET ${target} FAILED`), explain(a));
      assert.doesNotMatch(a.stdout, /CONNECTED/);
      assert.equal(connections, 0, "the host's listener was reached from inside");
    });

    it("cannot read /root or another job's directory, nor write outside its own directories", async () => {
      const { attempt: a, marker } = await probesAttempt();
      assert.equal(a.result.exitCode, 0, explain(a));
      for (const what of [
        "read /root",
        "read rustup home",
        "read secret",
        "write /usr",
        "write /etc",
        "write toolchain",
      ])
        assert.match(a.stdout, new RegExp(`ESCAPE ${what} DENIED`), explain(a));
      // Writing /tmp may succeed inside (a private tmpfs), but must not reach the host's /tmp.
      assert.match(a.stdout, /ESCAPE write \/tmp (ALLOWED|DENIED)/);
      assert.equal(existsSync(join("/tmp", marker)), false, "the host's /tmp received the job's file");
      assert.equal(existsSync(join("/usr", marker)), false);
      assert.equal(existsSync(join("/etc", marker)), false);
      assert.equal(existsSync(join(toolchain.path, "bin", marker)), false);
      // Its own directories are writable.
      assert.match(a.stdout, /ESCAPE write workspace ALLOWED/);
    });

    it("OOM-kills a test that exceeds the memory limit; cargo (its parent) survives and reports it", async () => {
      // The test was built with room to spare (--all-targets above): only the test meets the limit.
      const a = await attempt(probe, {
        argv: ["cargo", "test", "--offline", "--test", "alloc"],
        environment: { KILN_ALLOC_MIB: "512" },
        limits: { ...limits, memoryBytes: 256 * MiB },
      });
      assert.equal(a.result.oomKilled, true, explain(a));
      assert.equal(a.result.outcome, "exited", explain(a));
      assert.equal(a.result.exitCode, 101, `cargo test reported the failure itself\n${explain(a)}`);
      assert.match(a.stdout, /allocating 512 MiB/);
      assert.doesNotMatch(a.stdout, /allocated/);
      assert.match(a.stderr, /SIGKILL|signal: 9/, `cargo outlived the killed test\n${explain(a)}`);
      await assertNothingSurvives(a.attemptId);
    });

    it("contains a fork bomb with the pids limit, and reports the refused forks of an attempt it killed; the host is unharmed", async () => {
      // Background processes until the kernel refuses one (the subshell sees its fork fail and
      // exits), then the shell sleeps: the attempt is cancelled once it said so, and the forks
      // its cgroup refused are still reported — the microVM's from its agent, asked before the kill.
      const controller = new AbortController();
      const spawner = await attempt(
        killedJob,
        {
          argv: [
            "sh",
            "-c",
            '(i=0; while [ "$i" -lt 1000 ]; do sleep 600 & i=$((i+1)); echo "spawned $i"; done); echo "spawner exited $?"; exec sleep 600',
          ],
          limits: { ...limits, pids: 64 },
          wallClockSeconds: 20 * (options.bombCeilingFactor ?? 1),
          signal: controller.signal,
        },
        undefined,
        (text) => {
          if (/spawner exited \d+/.test(text)) controller.abort();
        },
      );
      const spawned = [...spawner.stdout.matchAll(/spawned (\d+)/g)].map((m) => Number(m[1]));
      const most = Math.max(0, ...spawned);
      assert.ok(most > 0 && most < 64, `spawned ${most} background processes under pids=64\n${explain(spawner)}`);
      assert.match(spawner.stdout, /spawner exited [1-9]\d*/, `the shell saw fork fail\n${explain(spawner)}`);
      assert.equal(spawner.result.outcome, "cancelled", explain(spawner));
      assert.match(
        spawner.result.detail.join("\n"),
        /pids: the (guest )?kernel refused [1-9]\d* forks at the attempt's limit of 64 processes/,
        explain(spawner),
      );
      await assertNothingSurvives(spawner.attemptId);

      // The bomb's own shell then forks a `sleep 1` at a time until the kernel refuses it one, and
      // exits 3. The attempt is cancelled as soon as a shell reports a refused fork: the bomb met
      // the limit, which is the verdict. (Left to itself, a bomb whose forks fail frees its pids
      // again, and the loop's `sleep 1` may keep getting one: under TCG such an attempt ran to its
      // ceiling, 200 s.) The ceiling only ends a bomb that never meets the limit.
      const bombController = new AbortController();
      const bomb = await attempt(
        killedJob,
        {
          argv: ["sh", "-c", "bomb() { bomb | bomb & }; bomb; while :; do sleep 1 || exit 3; done"],
          limits: { ...limits, pids: 64 },
          wallClockSeconds: 10 * (options.bombCeilingFactor ?? 1),
          signal: bombController.signal,
        },
        undefined,
        (text) => {
          if (/Cannot fork|fork: /.test(text)) bombController.abort();
        },
      );
      // What the kernel did, whatever the load: the shell reports each fork it refused.
      assert.match(bomb.stderr, /Cannot fork|fork: /, `the kernel refused the bomb no fork\n${explain(bomb)}`);
      // Ended by the refusal (cancelled on it, or its shell exiting 3 first), or by the ceiling;
      // `sleep 1` never ends it otherwise.
      const ended = bomb.result.outcome !== "exited" || bomb.result.exitCode !== 0;
      assert.ok(["exited", "cancelled", "wall_clock_ceiling"].includes(bomb.result.outcome) && ended, explain(bomb));
      await assertNothingSurvives(bomb.attemptId);
      assert.equal(spawnSync("true").status, 0, "the host can still start processes");
    });

    it("ends an attempt at the wall-clock ceiling", async () => {
      const a = await attempt(killedJob, { argv: ["sleep", "30"], wallClockSeconds: 2 });
      assert.equal(a.result.outcome, "wall_clock_ceiling", explain(a));
      assert.equal(a.result.exitCode, null);
      // Not before the ceiling; that it was the ceiling (not `sleep 30` ending) the outcome says.
      assert.ok(a.elapsedMs >= 1900, `took ${a.elapsedMs} ms`);
      // A guest that hangs accounts for itself only on its console (its kernel's warnings since
      // boot, a lockup's backtrace): an attempt ended at its ceiling carries it.
      if (name === "microvm") assert.match(a.result.detail.join("\n"), /^console: \S/m, explain(a));
      await assertNothingSurvives(a.attemptId);
    });

    it("cancels mid-build: the whole tree, setsid'd and double-forked children included, is gone once run() returns", async (t) => {
      const marker = `kiln-cancel-${randomBytes(6).toString("hex")}`;
      const controller = new AbortController();
      let abortedAt = 0;
      let seenBeforeAbort: number[] = [];
      // The probe's build script runs again for a new marker (cargo -vv streams what it prints):
      // it starts a setsid'd, a nohup'd and a double-forked child, says so, and sleeps.
      let ready: () => void = () => {};
      const childrenStarted = new Promise<void>((resolve) => {
        ready = resolve;
      });
      const a = await attempt(
        probe,
        {
          argv: ["cargo", "build", "--offline", "-vv"],
          environment: { KILN_MARKER: marker },
          signal: controller.signal,
          wallClockSeconds: 300,
        },
        () => {
          void (async () => {
            // Unreferenced: once the children started, this timer must not keep the file's process alive.
            await Promise.race([childrenStarted, sleep(280_000, undefined, { ref: false })]);
            // A sandbox's processes are the host's: all three children are there to see.
            if (name === "sandbox") {
              const deadline = Date.now() + 30_000;
              while (Date.now() < deadline) {
                seenBeforeAbort = await hostProcessesMatching(marker);
                if (seenBeforeAbort.length >= 3) break;
                await sleep(100);
              }
            }
            abortedAt = Date.now();
            controller.abort();
          })();
        },
        (chunk) => {
          if (chunk.includes(`${marker} children started`)) ready();
        },
      );
      const returnedAfter = Date.now() - abortedAt;
      if (name === "sandbox")
        assert.ok(seenBeforeAbort.length >= 3, `marker processes seen before cancelling: ${seenBeforeAbort.length}`);
      assert.match(a.stderr, new RegExp(`${marker} children started`), "cancelled while the children ran");
      assert.equal(a.result.outcome, "cancelled", explain(a));
      // The verdict is that nothing survives once run() has returned, never how fast it returned:
      // on a loaded machine (and for a microVM, whose QEMU and disks go first) that varies.
      t.diagnostic(`run() returned ${returnedAfter} ms after the abort`);
      if (name === "sandbox") {
        // The sandbox's processes are the host's: none carrying the marker is left.
        assert.deepEqual(await hostProcessesMatching(marker), []);
      }
      // A microVM's were in its guest: QEMU and its cgroup are gone, and with them the guest.
      await assertNothingSurvives(a.attemptId, marker);
    });

    it("reports cancelled without running when the signal is already aborted", async () => {
      const controller = new AbortController();
      controller.abort();
      const a = await attempt(probe, { argv: ["true"], signal: controller.signal });
      assert.equal(a.result.outcome, "cancelled");
      assert.equal(a.result.exitCode, null);
    });
  });
}

/** A crate whose build script prints its environment (and serves the cancellation test) and whose test allocates. */
const PROBE_CRATE: Record<string, string> = {
  "build.rs": `use std::process::{Command, Stdio};

fn main() {
    for (k, v) in std::env::vars() {
        println!("cargo:warning=BUILDENV {k}={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KILN_MARKER");
    // The cancellation test: a setsid'd child, a nohup'd child and a double-forked daemon, then sleep.
    if let Ok(marker) = std::env::var("KILN_MARKER") {
        let forever = "while :; do sleep 1; done";
        Command::new("setsid").args(["sh", "-c", forever, &format!("{marker}-setsid")])
            .stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        Command::new("nohup").args(["sh", "-c", forever, &format!("{marker}-nohup")])
            .stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let daemon = format!("(setsid sh -c '{forever}' {marker}-daemon < /dev/null > /dev/null 2>&1 &) ; exit 0");
        Command::new("sh").args(["-c", &daemon]).status().unwrap();
        eprintln!("{marker} children started");
        std::thread::sleep(std::time::Duration::from_secs(300));
    }
}
`,
  // Nothing of its own: the crate is its build script and its harness-less test.
  "src/lib.rs": "",
  // A test without libtest (harness = false): a plain main, as cheap to build as a binary, that
  // cargo runs as its child.
  "tests/alloc.rs": `use std::io::Write;

/// Allocates (and touches) KILN_ALLOC_MIB MiB when asked to; does nothing otherwise.
fn main() {
    if let Ok(mib) = std::env::var("KILN_ALLOC_MIB") {
        let mib: usize = mib.parse().expect("MiB");
        println!("allocating {mib} MiB");
        std::io::stdout().flush().unwrap();
        let block = vec![1u8; mib << 20];
        std::hint::black_box(&block);
        println!("allocated {}", block.len());
    }
}
`,
  // The library is no test target: `--all-targets` builds it once, not again under libtest.
  "Cargo.toml": `[package]
name = "probe"
version = "0.1.0"
edition = "2021"

[lib]
path = "src/lib.rs"
test = false
doctest = false

[[test]]
name = "alloc"
path = "tests/alloc.rs"
harness = false
${LEAN_PROFILE}`,
};

/**
 * Probes the isolation from inside, several probes in one run separated by `--` (in a microVM each
 * run is a boot): `env` prints the environment, `net ADDR:PORT…` tries a TCP connection to each,
 * `escape SECRET MARKER` tries to read and write where a job must not. Perl (in the guest root and
 * on the host, as the output test's) makes the same system calls a compiled probe would — opendir,
 * open, connect — without a compile.
 */
const PROBE_SCRIPT = `use strict;
use warnings;
use IO::Socket::INET;
$| = 1;
sub report { my ($what, $ok) = @_; print "ESCAPE $what ", ($ok ? "ALLOWED" : "DENIED $!"), "\\n"; }
sub reads { my ($path) = @_; open(my $f, "<", $path) or return 0; my $text; return defined(read($f, $text, 65536)); }
sub writes { my ($path) = @_; open(my $f, ">", $path) or return 0; print $f "x"; return close($f); }
my @probes = ([]);
for (@ARGV) { if ($_ eq "--") { push @probes, [] } else { push @{$probes[-1]}, $_ } }
for my $probe (@probes) {
  my ($kind, @args) = @$probe;
  if ($kind eq "env") {
    print "ENV $_=$ENV{$_}\\n" for sort keys %ENV;
  } elsif ($kind eq "net") {
    for my $target (@args) {
      my ($host, $port) = split /:/, $target;
      my $socket = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => "tcp", Timeout => 3);
      print "NET $target ", ($socket ? "CONNECTED" : "FAILED $@"), "\\n";
    }
  } elsif ($kind eq "escape") {
    my ($secret, $marker) = @args;
    report("read /root", opendir(my $root, "/root"));
    report("read rustup home", opendir(my $rustup, "/root/.rustup/toolchains"));
    report("read secret", reads($secret));
    report("write /usr", writes("/usr/$marker"));
    report("write /etc", writes("/etc/$marker"));
    my ($cargo_dir) = grep { -e "$_/cargo" } split /:/, ($ENV{PATH} // "");
    report("write toolchain", writes(($cargo_dir // "/nonexistent") . "/$marker"));
    report("write /tmp", writes("/tmp/$marker"));
    report("write workspace", writes("$marker.txt"));
  } else {
    die "unknown probe $kind\\n";
  }
}
`;
