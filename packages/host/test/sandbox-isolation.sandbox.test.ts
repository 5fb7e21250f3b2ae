import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, stat, statfs, writeFile } from "node:fs/promises";
import { release, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { AdmittedToolchain, ExecutionRequest, ExecutionResult } from "../src/executor/executor.js";
import { createSandboxExecutor } from "../src/executor/sandbox/sandbox-executor.js";
import { DENIED_SYSCALLS_X86_64 } from "../src/executor/sandbox/seccomp-filter.js";
import { admitToolchain } from "../src/executor/shared/admit-toolchains.js";
import { findKeptMount, KEPT_DISK_ROOT, releaseKeptDisksUnder } from "../src/executor/shared/kept-target-disk.js";
import { removeJobDirectories } from "../src/executor/shared/remove-job-directories.js";
import { TARGET_DISK_FILE, waitUntilDetached, withTargetTree } from "../src/executor/shared/target-disk.js";
import { assertNothingSurvives, type Job, makeJob } from "./executor-suite.js";

const MiB = 2 ** 20;
/** statfs(2)'s f_type of tmpfs. */
const TMPFS_MAGIC = 0x01021994;

/**
 * The sandbox's disk quota (target-disk.ts), its seccomp filter (seccomp-filter.ts) and what it
 * shows of the host through /proc (docs/isolation.md), checked from inside a real sandbox.
 */
describe("sandbox isolation: disk quota, seccomp, what /proc shows", () => {
  const executor = createSandboxExecutor();
  let root: string;
  let toolchain: AdmittedToolchain;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "kiln-isolation-"));
    toolchain = await admitToolchain("stable");
  });
  after(() => removeJobDirectories([root]));

  const run = async (
    job: Job,
    request: Partial<ExecutionRequest> & { argv: readonly string[] },
  ): Promise<{ result: ExecutionResult; stdout: string; stderr: string; attemptId: string; explain: string }> => {
    const attemptId = `isolation-${randomBytes(4).toString("hex")}`;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const result = await executor.run({
      attemptId,
      limits: { vcpus: 1, memoryBytes: 512 * MiB, pids: 64, diskBytes: 64 * MiB },
      ...job,
      toolchain,
      workingDirectory: ".",
      environment: {},
      wallClockSeconds: 60,
      network: "offline",
      signal: new AbortController().signal,
      onOutput: (stream, chunk) => (stream === "stdout" ? out : err).push(chunk),
      ...request,
    });
    const stdout = Buffer.concat(out).toString("utf8");
    const stderr = Buffer.concat(err).toString("utf8");
    return {
      result,
      stdout,
      stderr,
      attemptId,
      explain: `${result.outcome} ${result.exitCode}\n--- stdout\n${stdout}\n--- stderr\n${stderr}\n--- detail\n${result.detail.join("\n")}`,
    };
  };

  it("stops a job at its disk quota: the write fails with ENOSPC, the result says so, the host received at most the quota", async () => {
    const job = await makeJob(root, "fill");
    const a = await run(job, {
      argv: ["sh", "-c", 'dd if=/dev/zero of="$CARGO_TARGET_DIR/fill" bs=1M count=200; echo "dd exited $?"'],
    });
    assert.equal(a.result.outcome, "exited", a.explain);
    assert.match(a.stderr, /No space left on device/, a.explain);
    assert.match(a.stdout, /dd exited 1/);
    assert.equal(a.result.diskQuotaExceeded, true, a.explain);
    assert.equal(a.result.diskBytes, 64 * MiB);
    assert.ok(a.result.detail.some((d) => d.includes("the job filled the 64 MiB disk quota of its target dir")));
    const written = await withTargetTree(job.targetDir, async (tree) => (await stat(join(tree, "fill"))).size);
    assert.ok(written > 60 * MiB && written <= 64 * MiB, `the job wrote ${written} bytes under a 64 MiB quota`);
    // What the host's disk holds for it: the sparse image's allocated blocks, the quota plus the file system's own.
    const allocated = (await stat(join(job.targetDir, TARGET_DISK_FILE))).blocks * 512;
    assert.ok(allocated < 64 * MiB + 16 * MiB, `the image takes ${allocated} bytes on the host`);
    await assertNothingSurvives(a.attemptId);
  });

  it("counts the lineage's restored bytes against the quota, and starts a target larger than a smaller size's quota afresh", async () => {
    const job = await makeJob(root, "warm-quota");
    const first = await run(job, {
      argv: ["sh", "-c", 'dd if=/dev/zero of="$CARGO_TARGET_DIR/kept" bs=1M count=40 status=none'],
    });
    assert.equal(first.result.exitCode, 0, first.explain);
    assert.equal(first.result.diskQuotaExceeded, false);
    // 40 MiB kept: a second attempt of the same 64 MiB quota has about 24 MiB left.
    const second = await run(job, {
      warmTarget: true,
      argv: ["sh", "-c", 'dd if=/dev/zero of="$CARGO_TARGET_DIR/more" bs=1M count=40 status=none; echo "dd exited $?"'],
    });
    assert.match(second.stdout, /dd exited 1/, second.explain);
    assert.equal(second.result.diskQuotaExceeded, true, second.explain);
    const sizes = await withTargetTree(job.targetDir, async (tree) => ({
      kept: (await stat(join(tree, "kept"))).size,
      more: (await stat(join(tree, "more"))).size,
    }));
    assert.equal(sizes.kept, 40 * MiB);
    assert.ok(sizes.more < 25 * MiB, `the second attempt added ${sizes.more} bytes`);
    // A size whose quota is below what the target holds starts it empty (and says so) rather than fail.
    const smaller = await run(job, {
      warmTarget: true,
      limits: { vcpus: 1, memoryBytes: 512 * MiB, pids: 64, diskBytes: 32 * MiB },
      argv: ["sh", "-c", 'ls "$CARGO_TARGET_DIR"; echo listed'],
    });
    assert.equal(smaller.result.exitCode, 0, smaller.explain);
    assert.doesNotMatch(smaller.stdout, /kept/);
    assert.ok(
      smaller.result.detail.some((d) => /more than this size's .* quota; it starts empty/.test(d)),
      smaller.explain,
    );
  });

  it("empties a target dir laid out before the disk quota (a tree, no image), saying so", async () => {
    const job = await makeJob(root, "legacy");
    await writeFile(join(job.targetDir, "old-fingerprint"), "x");
    const a = await run(job, { warmTarget: true, argv: ["sh", "-c", 'ls -A "$CARGO_TARGET_DIR"; echo listed'] });
    assert.equal(a.result.exitCode, 0, a.explain);
    assert.doesNotMatch(a.stdout, /old-fingerprint/);
    assert.deepEqual(await readdir(job.targetDir), [TARGET_DISK_FILE]);
    assert.ok(a.result.detail.some((d) => d.includes("a layout from before the disk quota")));
  });

  it("loads the seccomp filter: every denied system call answers EPERM, ordinary ones work, namespaces stay shut", async () => {
    const job = await makeJob(root, "seccomp");
    // perl's syscall() makes any system call by number; arguments are zero (or a namespace flag).
    const calls = Object.entries(DENIED_SYSCALLS_X86_64)
      .map(([name, { nr }]) => `$! = 0; $r = syscall(${nr}, 0, 0, 0, 0, 0); print "SYSCALL ${name} $r ", $!+0, "\\n";`)
      .join(" ");
    const a = await run(job, {
      argv: [
        "sh",
        "-c",
        [
          "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status",
          `perl -e '${calls}'`,
          // clone(CLONE_NEWUSER | SIGCHLD): refused; a plain fork: works; getpid: works.
          `perl -e '$r = syscall(56, 0x10000000 | 17, 0, 0, 0, 0); print "SYSCALL clone-newuser $r ", $!+0, "\\n"'`,
          `perl -e '$r = syscall(435, 0, 0); print "SYSCALL clone3 $r ", $!+0, "\\n"'`,
          `perl -e '$r = syscall(135, 0x0040000); print "SYSCALL personality-no-randomize $r ", $!+0, "\\n"'`,
          `perl -e '$p = fork(); if ($p == 0) { exit 0 } waitpid($p, 0); print "FORK ", ($p > 0 ? "ok" : "failed"), "\\n"'`,
          "unshare --user true && echo UNSHARE ALLOWED || echo unshare refused",
        ].join("; "),
      ],
    });
    assert.equal(a.result.exitCode, 0, a.explain);
    assert.match(a.stdout, /^Seccomp:\s+2$/m, "a filter is loaded (mode 2)");
    assert.match(a.stdout, /^NoNewPrivs:\s+1$/m);
    for (const name of Object.keys(DENIED_SYSCALLS_X86_64))
      assert.match(a.stdout, new RegExp(`^SYSCALL ${name} -1 1$`, "m"), `${name} answered EPERM\n${a.explain}`);
    assert.match(a.stdout, /^SYSCALL clone-newuser -1 1$/m);
    assert.match(a.stdout, /^SYSCALL clone3 -1 38$/m, "clone3 answers ENOSYS");
    assert.match(a.stdout, /^SYSCALL personality-no-randomize -1 1$/m);
    assert.match(a.stdout, /^FORK ok$/m);
    assert.match(a.stdout, /unshare refused/);
    assert.ok(a.result.detail.some((d) => d.startsWith("seccomp: bubblewrap loads a ")));
  });

  it("names nothing of the host in mountinfo, /proc/mounts, the working directory or the environment; masks the host's /proc entries", async () => {
    const job = await makeJob(root, "mountinfo");
    await writeFile(join(job.workspaceDir, "Cargo.toml"), '[package]\nname = "x"\n');
    const a = await run(job, {
      argv: [
        "sh",
        "-c",
        [
          "echo MOUNTINFO; cat /proc/self/mountinfo",
          "echo MOUNTS; cat /proc/mounts",
          'echo "CWD $(pwd) $(readlink /proc/self/cwd)"',
          "echo ENVIRON; env",
          'for f in cmdline partitions diskstats swaps; do echo "PROC $f $(wc -c < /proc/$f)"; done',
          'echo "PROCFS $(ls /proc/fs | wc -l)"',
        ].join("; "),
      ],
    });
    assert.equal(a.result.exitCode, 0, a.explain);
    const hostNames = [root, job.workspaceDir, job.homeDir, job.targetDir, toolchain.path, "/root", process.cwd()];
    for (const name of hostNames) assert.ok(!a.stdout.includes(name), `${name} is visible inside\n${a.stdout}`);
    // The host's own block devices (its root file system's source) appear nowhere.
    const rootDevice = (await readFile("/proc/self/mountinfo", "utf8"))
      .split("\n")
      .map((l) => l.split(" "))
      .find((f) => f[4] === "/")
      ?.at(-2);
    if (rootDevice?.startsWith("/dev/")) assert.ok(!a.stdout.includes(rootDevice), `${rootDevice} is visible inside`);
    assert.match(a.stdout, /^CWD \/kiln\/src \/kiln\/src$/m);
    for (const f of ["cmdline", "partitions", "diskstats", "swaps"])
      assert.match(a.stdout, new RegExp(`^PROC ${f} 0$`, "m"), `/proc/${f} is masked`);
    assert.match(a.stdout, /^PROCFS 0$/m);
    // What does show: the overlays and the target disk's loop device (docs/isolation.md).
    assert.match(a.stdout, / \/kiln\/src .* - overlay kiln /);
    assert.match(a.stdout, / \/usr .* - overlay kiln ro,lowerdir=lower\/system-usr:empty/);
    assert.match(a.stdout, / \/kiln\/target .* - ext4 \/dev\/loop\d+ /);
  });

  it("mounts the workspace and home overlays volatile (their end syncs nothing of the host), and the next attempt on the same directories mounts them again", async (t) => {
    const [major = 0, minor = 0] = release().split(".").map(Number);
    if (major < 5 || (major === 5 && minor < 10)) return t.skip("overlayfs has no volatile before Linux 5.10");
    const job = await makeJob(root, "volatile");
    const overlays = async () => {
      const a = await run(job, {
        argv: ["sh", "-c", "touch /kiln/src/written /kiln/home/written; cat /proc/self/mountinfo"],
      });
      assert.equal(a.result.exitCode, 0, a.explain);
      return a.stdout;
    };
    await overlays();
    // A volatile mount leaves its work directory unusable for the next one: the executor makes it afresh.
    const second = await overlays();
    for (const mountPoint of ["/kiln/src", "/kiln/home"])
      assert.match(
        second,
        new RegExp(` ${mountPoint} .* - overlay kiln [^ ]*,(fsync=)?volatile`),
        `${mountPoint}\n${second}`,
      );
    assert.doesNotMatch(second, / \/usr .* - overlay kiln [^ ]*volatile/, "read-only overlays have nothing to sync");
    await stat(join(job.workspaceDir, "written"));
    await stat(join(job.homeDir, "written"));
  });

  it("keeps the lineage's target disk mounted between attempts: the next attempt adopts it with its quota set anew, it is released while another lineage's attempt runs, removal unmounts it", async () => {
    const job = await makeJob(root, "kept");
    const image = join(job.targetDir, TARGET_DISK_FILE);
    const first = await run(job, {
      argv: ["sh", "-c", 'dd if=/dev/zero of="$CARGO_TARGET_DIR/one" bs=1M count=40 status=none'],
    });
    assert.equal(first.result.exitCode, 0, first.explain);
    const kept = await findKeptMount(image);
    assert.ok(kept !== null, `the disk is still mounted after the attempt\n${first.explain}`);
    assert.ok(first.result.detail.includes("disk: the target disk stays mounted for the lineage's next attempt"));

    // Another lineage's attempt runs while this disk is released: a copy of the mount held in its
    // namespace would keep the loop device (release waits until it is gone and throws after a
    // minute). Its launcher drops such copies; on this project's kernel (6.18) the host's unmount
    // took the copy with it even without that (checked), so this guards the outcome, not the line.
    const other = await makeJob(root, "kept-other");
    const stop = new AbortController();
    let started: () => void = () => undefined;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const otherAttempt = executor.run({
      attemptId: `isolation-${randomBytes(4).toString("hex")}`,
      limits: { vcpus: 1, memoryBytes: 512 * MiB, pids: 64, diskBytes: 64 * MiB },
      ...other,
      toolchain,
      workingDirectory: ".",
      environment: {},
      wallClockSeconds: 300,
      network: "offline",
      signal: stop.signal,
      onOutput: (stream, chunk) => {
        if (stream === "stdout" && chunk.toString("utf8").includes("running")) started();
      },
      argv: ["sh", "-c", "echo running; exec sleep 300"],
    });
    await running;

    // The lineage's next attempt adopts the mount; its 64 MiB quota counts the 40 MiB held.
    const second = await run(job, {
      warmTarget: true,
      argv: ["sh", "-c", 'dd if=/dev/zero of="$CARGO_TARGET_DIR/more" bs=1M count=40 status=none; echo "dd exited $?"'],
    });
    assert.match(second.stdout, /dd exited 1/, second.explain);
    assert.equal(second.result.diskQuotaExceeded, true, second.explain);
    assert.ok(
      second.result.detail.some((d) => d.includes("kept mounted since its last attempt, holding 40.")),
      second.explain,
    );
    assert.deepEqual(await findKeptMount(image), kept);

    await releaseKeptDisksUnder([job.targetDir]);
    assert.equal(await findKeptMount(image), null);
    assert.ok(await waitUntilDetached(image, 0), "no loop device holds the image once released");
    stop.abort();
    assert.equal((await otherAttempt).outcome, "cancelled");

    // Removing a lineage's directory unmounts its kept disk first.
    const otherKept = await findKeptMount(join(other.targetDir, TARGET_DISK_FILE));
    assert.ok(otherKept !== null);
    await removeJobDirectories([join(root, "kept-other")]);
    const mounted = (await readFile("/proc/self/mountinfo", "utf8")).split("\n").map((l) => l.split(" ")[4]);
    assert.ok(!mounted.includes(otherKept.mountPoint), "the removed lineage's disk is unmounted");
    assert.ok(!(await readdir(KEPT_DISK_ROOT)).includes(basename(otherKept.mountPoint)));
  });

  it("switches the target disk's loop device to direct I/O where the host's file system allows it, and says which", async () => {
    const job = await makeJob(root, "target-io");
    const a = await run(job, { argv: ["sh", "-c", "echo x > /kiln/target/written; cat /kiln/target/written"] });
    assert.equal(a.result.exitCode, 0, a.explain);
    assert.match(a.stdout, /^x$/m);
    const said = a.result.detail.filter((d) => d.startsWith("disk: the target disk's loop device "));
    assert.equal(said.length, 1, a.explain);
    // ext4, xfs and btrfs take O_DIRECT on a file; tmpfs only since Linux 6.6.
    if ((await statfs(job.targetDir)).type !== TMPFS_MAGIC)
      assert.equal(said[0], "disk: the target disk's loop device does direct I/O", a.explain);
  });

  it("shows no host environment in the sandbox's init and no host software under /usr/local", async () => {
    const job = await makeJob(root, "init-environment");
    const a = await run(job, {
      argv: [
        "sh",
        "-c",
        [
          // bubblewrap's pid 1 keeps the environment bwrap was started with.
          'echo "INIT_ENVIRON $(tr "\\0" " " < /proc/1/environ)"',
          'echo "USR_LOCAL $(ls -A /usr/local | wc -l)"',
          'echo "LOADER_CACHE_USR_LOCAL $(grep -ac /usr/local /etc/ld.so.cache)"',
          'echo "LOADER_CACHE_LIBC $(grep -ac libc.so.6 /etc/ld.so.cache)"',
          // The system and the toolchain still work: a dynamically linked program and rustc.
          'echo "RUSTC $(rustc --version)"',
        ].join("; "),
      ],
    });
    assert.equal(a.result.exitCode, 0, a.explain);
    assert.match(a.stdout, /^INIT_ENVIRON $/m, "bubblewrap's pid 1 has an empty environment");
    assert.ok(!a.stdout.includes(process.cwd()), `the agent's working directory is visible\n${a.stdout}`);
    assert.match(a.stdout, /^USR_LOCAL 0$/m, "/usr/local shows empty");
    assert.match(a.stdout, /^LOADER_CACHE_USR_LOCAL 0$/m, "the loader cache names nothing under /usr/local");
    assert.match(a.stdout, /^LOADER_CACHE_LIBC [1-9]\d*$/m, "the loader cache still names the system's libraries");
    assert.match(a.stdout, /^RUSTC rustc \d+\.\d+\.\d+/m);
  });
});
