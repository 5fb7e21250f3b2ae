import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { admitToolchain } from "../src/executor/admit-toolchains.js";
import type { AdmittedToolchain, ExecutionRequest, ExecutionResult, MountPoints } from "../src/executor/executor.js";
import { removeJobDirectories } from "../src/executor/remove-job-directories.js";
import { createSandboxExecutor } from "../src/executor/sandbox-executor.js";
import { TARGET_DISK_FILE, withTargetTree } from "../src/executor/target-disk.js";
import { assertNothingSurvives, type Job, makeJob } from "./executor-suite.js";

/**
 * The sandbox executor's mount points: the job directories appear at fixed paths inside
 * (what keeps cargo's fingerprints valid across attempts of a lineage), the host paths behind
 * them stay invisible, the isolation rules hold for the mount points too, and a warm target
 * dir is handed over without walking it.
 */
const MOUNTS: MountPoints = { workspace: "/kiln/src", target: "/kiln/target", home: "/kiln/home" };

describe("sandbox executor mount points", () => {
  const executor = createSandboxExecutor();
  let root: string;
  let toolchain: AdmittedToolchain;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "kiln-mount-points-"));
    toolchain = await admitToolchain("stable");
  });
  after(() => removeJobDirectories([root]));

  const run = async (
    job: Job,
    request: Partial<ExecutionRequest> & { argv: readonly string[] },
  ): Promise<{ result: ExecutionResult; stdout: string; attemptId: string }> => {
    const attemptId = `mount-points-${randomBytes(4).toString("hex")}`;
    const chunks: Buffer[] = [];
    const result = await executor.run({
      attemptId,
      limits: { vcpus: 1, memoryBytes: 512 * 2 ** 20, pids: 64, diskBytes: 2 ** 30 },
      ...job,
      mounts: MOUNTS,
      toolchain,
      workingDirectory: ".",
      environment: {},
      wallClockSeconds: 30,
      network: "offline",
      signal: new AbortController().signal,
      onOutput: (_stream, chunk) => chunks.push(chunk),
      ...request,
    });
    return { result, stdout: Buffer.concat(chunks).toString("utf8"), attemptId };
  };

  it("shows the job directories at the mount points, never at their host paths", async () => {
    const job = await makeJob(root, "fixed");
    await writeFile(join(job.workspaceDir, "source.txt"), "from the host\n");
    const a = await run(job, {
      argv: [
        "sh",
        "-c",
        [
          'echo "PWD=$(pwd) TARGET=$CARGO_TARGET_DIR HOME=$HOME CARGO_HOME=$CARGO_HOME"',
          "cat source.txt",
          'echo built > "$CARGO_TARGET_DIR/out.txt"',
          'echo cached > "$CARGO_HOME/cache.txt"',
          `test -e ${job.workspaceDir} && echo HOST PATH VISIBLE || echo host path hidden`,
          `test -e ${root} && echo HOST ROOT VISIBLE || echo host root hidden`,
          "grep -c /kiln/home /etc/passwd",
        ].join("; "),
      ],
    });
    assert.equal(a.result.exitCode, 0, `${a.stdout}\n${a.result.detail.join("\n")}`);
    assert.match(a.stdout, /PWD=\/kiln\/src TARGET=\/kiln\/target HOME=\/kiln\/home CARGO_HOME=\/kiln\/home/);
    assert.match(a.stdout, /from the host/);
    assert.match(a.stdout, /host path hidden/);
    assert.match(a.stdout, /host root hidden/);
    assert.match(a.stdout, /^1$/m, "the sandbox user's passwd home is the home mount point");
    assert.equal(await withTargetTree(job.targetDir, (tree) => readFile(join(tree, "out.txt"), "utf8")), "built\n");
    assert.equal(await readFile(join(job.homeDir, "cache.txt"), "utf8"), "cached\n");
    await assertNothingSurvives(a.attemptId);
  });

  it("refuses mount points that would cover the sandbox's structure, overlap, or are not absolute", async () => {
    const job = await makeJob(root, "refused");
    for (const [mounts, problem] of [
      [{ ...MOUNTS, target: "/usr/lib/kiln" }, /mounts\.target may not be \/usr\/lib\/kiln/],
      [{ ...MOUNTS, workspace: "/" }, /mounts\.workspace may not be \//],
      [{ ...MOUNTS, home: "/tmp" }, /mounts\.home may not be \/tmp/],
      [{ ...MOUNTS, target: "/kiln/src/target" }, /overlaps/],
      [{ ...MOUNTS, home: "kiln/home" }, /must be an absolute, normalized path/],
      [{ ...MOUNTS, home: "/kiln/../etc" }, /must be an absolute, normalized path/],
      [{ ...MOUNTS, target: "/opt/kiln/toolchain/x" }, /may not be/],
    ] as const) {
      const a = await run(job, { argv: ["true"], mounts });
      assert.equal(a.result.outcome, "infrastructure", JSON.stringify(mounts));
      assert.ok(
        a.result.detail.some((d) => problem.test(d)),
        `${JSON.stringify(mounts)}: ${a.result.detail.join("; ")}`,
      );
    }
    const leaving = await run(job, { argv: ["true"], workingDirectory: "../target" });
    assert.equal(leaving.result.outcome, "infrastructure");
    assert.ok(leaving.result.detail.some((d) => d.includes("leaves the workspace")));
  });

  it("runs a job whose workspace and home are on /dev/shm (the scratch root), but refuses /dev/shm itself and the rest of /dev", async (t) => {
    const job = await makeJob(root, "scratch");
    let scratch: string;
    try {
      scratch = await mkdtemp("/dev/shm/kiln-test-scratch-");
    } catch {
      return t.skip("no writable /dev/shm here");
    }
    try {
      const workspaceDir = join(scratch, "src");
      const homeDir = join(scratch, "home");
      await mkdir(workspaceDir);
      await mkdir(homeDir);
      await writeFile(join(workspaceDir, "source.txt"), "from the scratch root\n");
      const a = await run(
        { ...job, workspaceDir, homeDir },
        { argv: ["sh", "-c", 'cat source.txt; echo cached > "$CARGO_HOME/cache.txt"'] },
      );
      assert.equal(a.result.exitCode, 0, a.result.detail.join("\n"));
      assert.match(a.stdout, /from the scratch root/);
      assert.equal(await readFile(join(homeDir, "cache.txt"), "utf8"), "cached\n");
      for (const refused of ["/dev/shm", "/dev/pts"]) {
        const b = await run({ ...job, workspaceDir: refused, homeDir }, { argv: ["true"] });
        assert.equal(b.result.outcome, "infrastructure", refused);
        assert.ok(
          b.result.detail.some((d) => d.includes(`workspaceDir may not be ${refused}`)),
          `${refused}: ${b.result.detail.join("; ")}`,
        );
      }
    } finally {
      await removeJobDirectories([scratch]);
    }
  });

  it("keeps a warm target dir on its target disk: the next attempt finds what the last one wrote; the host dir holds only the image", async () => {
    const job = await makeJob(root, "warm");
    const first = await run(job, {
      argv: ["sh", "-c", 'mkdir -p "$CARGO_TARGET_DIR/debug" && echo 1 > "$CARGO_TARGET_DIR/debug/unit"'],
    });
    assert.equal(first.result.exitCode, 0, first.result.detail.join("\n"));
    assert.deepEqual(await readdir(job.targetDir), [TARGET_DISK_FILE]);
    assert.equal((await stat(join(job.targetDir, TARGET_DISK_FILE))).uid, 0, "the image is root's, never the job's");
    const warm = await run(job, {
      argv: ["sh", "-c", 'echo 2 >> "$CARGO_TARGET_DIR/debug/unit" && touch "$CARGO_TARGET_DIR/new-top-level-file"'],
      warmTarget: true,
    });
    assert.equal(warm.result.exitCode, 0, `${warm.stdout}\n${warm.result.detail.join("\n")}`);
    assert.equal(
      await withTargetTree(job.targetDir, (tree) => readFile(join(tree, "debug", "unit"), "utf8")),
      "1\n2\n",
    );
  });

  it("shows a read-only bind at its own target path, unwritable, its host path hidden; refuses a target overlapping a job directory", async () => {
    const job = await makeJob(root, "read-only-bind");
    const packages = join(root, "packages-on-host");
    await mkdir(join(packages, "itoa-1.0.9"), { recursive: true });
    await writeFile(join(packages, "itoa-1.0.9", "Cargo.toml"), '[package]\nname = "itoa"\n');
    const a = await run(job, {
      readOnlyBinds: [{ source: packages, target: "/kiln/deps" }],
      argv: [
        "sh",
        "-c",
        [
          "cat /kiln/deps/itoa-1.0.9/Cargo.toml",
          "touch /kiln/deps/new 2>/dev/null && echo WROTE || echo read-only",
          `test -e ${packages} && echo HOST PATH VISIBLE || echo host path hidden`,
        ].join("; "),
      ],
    });
    assert.equal(a.result.exitCode, 0, `${a.stdout}\n${a.result.detail.join("\n")}`);
    assert.match(a.stdout, /name = "itoa"/);
    assert.match(a.stdout, /^read-only$/m);
    assert.match(a.stdout, /host path hidden/);
    const overlapping = await run(job, {
      readOnlyBinds: [{ source: packages, target: "/kiln/src/vendor" }],
      argv: ["true"],
    });
    assert.equal(overlapping.result.outcome, "infrastructure");
    assert.match(
      overlapping.result.detail.join("\n"),
      /readOnlyBinds\[0\]\.target \(\/kiln\/src\/vendor\) overlaps mounts\.workspace|mounts\.workspace \(\/kiln\/src\) overlaps readOnlyBinds\[0\]\.target/,
    );
  });
});
