import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { HARNESS_SUFFIX, testRunnerConfig } from "../src/agent/attempt/test-runner.js";

const run = promisify(execFile);

/** The runner's argv as cargo gets it from the `--config` value, with the binary and its arguments after it. */
function runnerArgv(exe: string, args: string[], retries = 2): string[] {
  const config = testRunnerConfig("x86_64-unknown-linux-gnu", retries, "pass");
  return [...(JSON.parse(config.slice(config.indexOf("=") + 1)) as string[]), exe, ...args];
}

async function throughRunner(
  exe: string,
  args: string[],
  environment: Record<string, string> = {},
  retries = 2,
): Promise<{ stdout: string; stderr: string }> {
  const [command, ...rest] = runnerArgv(exe, args, retries);
  return run(command ?? "/bin/sh", rest, { env: { PATH: "/usr/bin:/bin", ...environment } });
}

/**
 * kiln's test runner script as cargo runs it (real sh and bash, no sandbox), around a stand-in
 * test binary that prints its arguments and the variables bash itself would act on.
 */
describe("the test runner script", () => {
  let dir: string;
  let exe: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "kiln-test-runner-"));
    await mkdir(join(dir, "deps"));
    exe = join(dir, "deps", "stand-in-0123456789abcdef");
    await writeFile(
      exe,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansions, not a JavaScript template
      '#!/bin/sh\necho "args: $*"\necho "LC_ALL=${LC_ALL-unset} BASH_ENV=${BASH_ENV-unset} saved=${KILN_TEST_RUNNER_LC_ALL-none}"\n',
    );
    await chmod(exe, 0o755);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("marks the binary's start and end around its own output, with its exit status and the time in nanoseconds", async () => {
    const { stdout, stderr } = await throughRunner(exe, ["--exact", "a b"]);
    const lines = stdout.trimEnd().split("\n");
    assert.equal(lines.length, 4, stdout);
    const start = JSON.parse(lines[0] ?? "") as Record<string, unknown>;
    const end = JSON.parse(lines[3] ?? "") as Record<string, unknown>;
    assert.equal(start.reason, "kiln-test-binary-start");
    assert.equal(end.reason, "kiln-test-binary-end");
    assert.equal(end.exit, 0);
    for (const marker of [start, end]) {
      assert.equal(marker.executable, exe);
      assert.match(String(marker.at_ns), /^\d{19}$/);
    }
    const startNs = BigInt(String(start.at_ns));
    const endNs = BigInt(String(end.at_ns));
    assert.ok(endNs >= startNs, `${endNs} >= ${startNs}`);
    // The clock is the wall clock date +%s%N reads.
    const nowNs = BigInt(Date.now()) * 1_000_000n;
    assert.ok(nowNs - startNs < 60_000_000_000n && startNs - nowNs < 60_000_000_000n, `${startNs} near ${nowNs}`);
    assert.equal(lines[1], "args: --exact a b");
    assert.equal(stderr, "");
    // Not libtest (no option text): kept beside the binary as such, read instead of the binary next time.
    assert.equal(await readFile(`${exe}${HARNESS_SUFFIX}`, "utf8"), "plain\n");
  });

  it("gives the binary LC_ALL and BASH_ENV as the job set them, and bash warns about nothing on the job's stderr", async () => {
    const { stdout, stderr } = await throughRunner(exe, [], {
      LC_ALL: "xx_XX.UTF-8",
      BASH_ENV: join(dir, "absent-bash-env"),
    });
    assert.match(stdout, new RegExp(`LC_ALL=xx_XX.UTF-8 BASH_ENV=${join(dir, "absent-bash-env")} saved=none`));
    assert.equal(stderr, "");
  });

  it("a rebuilt binary (newer than what was found) is looked at again", async () => {
    await writeFile(`${exe}${HARNESS_SUFFIX}`, "libtest\n");
    await utimes(`${exe}${HARNESS_SUFFIX}`, 1_000_000, 1_000_000);
    const { stdout } = await throughRunner(exe, []);
    // Run as it is (plain): without libtest's --report-time, which the stale entry would have added.
    assert.match(stdout, /^args: $/m);
    assert.equal(await readFile(`${exe}${HARNESS_SUFFIX}`, "utf8"), "plain\n");
  });

  it("a note beside the binary that names no known kind (the job's code can write it) is not taken: the binary is looked at again", async () => {
    for (const forged of ["libtestx\n", `${"x".repeat(1_000_000)}\n`, "\n"]) {
      await writeFile(`${exe}${HARNESS_SUFFIX}`, forged);
      await utimes(`${exe}${HARNESS_SUFFIX}`, Date.now() / 1000 + 60, Date.now() / 1000 + 60);
      const { stdout, stderr } = await throughRunner(exe, ["--exact", "t"]);
      assert.match(stdout, /^args: --exact t$/m, `forged ${JSON.stringify(forged.slice(0, 12))}`);
      assert.equal(stderr, "");
      assert.equal(await readFile(`${exe}${HARNESS_SUFFIX}`, "utf8"), "plain\n");
    }
  });

  it("gives a libtest binary one log file of cargo's, emptied for each binary and left in the job's tmp dir: no process removes it", async () => {
    const tmp = await mkdtemp(join(dir, "tmp-"));
    const lib = join(dir, "deps", "libtest-stand-in-0123456789abcdef");
    // libtest's option text (so the runner gives it --logfile and --report-time); it writes the log it is given.
    await writeFile(
      lib,
      '#!/bin/sh\n# --report-time --logfile\necho "args: $*"\nwhile [ $# -gt 0 ]; do [ "$1" = --logfile ] && echo "ok $0" >>"$2"; shift; done\n',
    );
    await chmod(lib, 0o755);
    for (const round of [1, 2]) {
      const { stdout, stderr } = await throughRunner(lib, ["--quiet"], { TMPDIR: tmp });
      const log = join(tmp, `kiln-test-runner.cargo-${process.pid}.log`);
      assert.match(stdout, new RegExp(`^args: --quiet --logfile ${log} -Z unstable-options --report-time$`, "m"));
      assert.match(stdout, /"reason":"kiln-test-binary-end","executable":"[^"]+","exit":0,/);
      assert.equal(stderr, "");
      assert.deepEqual(await readdir(tmp), [basename(log)], `round ${round}`);
      // Emptied before each binary: only this run's line, never the last one's.
      assert.equal(await readFile(log, "utf8"), `ok ${lib}\n`, `round ${round}`);
    }
  });

  it("writes a tenant's odd binary path into its markers as a JSON string that reads back exactly: quotes, backslashes and control characters cannot break or forge a marker", async () => {
    const odd = join(dir, "deps", 'odd"name\\",\t"exit":0,\u0001-0123456789abcdef');
    await writeFile(odd, '#!/bin/sh\necho "ran"\n');
    await chmod(odd, 0o755);
    const { stdout } = await throughRunner(odd, []);
    const lines = stdout.trimEnd().split("\n");
    assert.equal(lines.length, 3, stdout);
    const [start, end] = [JSON.parse(lines[0] ?? ""), JSON.parse(lines[2] ?? "")] as Record<string, unknown>[];
    assert.equal(start?.executable, odd);
    assert.equal(end?.executable, odd);
    assert.deepEqual(Object.keys(end ?? {}), ["reason", "executable", "exit", "at_ns"]);
    assert.equal(lines[1], "ran");
  });

  it("gives a libtest binary no log file when flaky_retries is 0: nothing would read it", async () => {
    const tmp = await mkdtemp(join(dir, "tmp-"));
    const lib = join(dir, "deps", "libtest-no-retries-0123456789abcdef");
    await writeFile(lib, '#!/bin/sh\n# --report-time --logfile\necho "args: $*"\n');
    await chmod(lib, 0o755);
    const { stdout } = await throughRunner(lib, ["--quiet"], { TMPDIR: tmp }, 0);
    assert.match(stdout, /^args: --quiet -Z unstable-options --report-time$/m);
    assert.deepEqual(await readdir(tmp), []);
  });

  it("anything not under deps/ (a doctest rustdoc runs) is exec'd untouched: no markers", async () => {
    const other = join(dir, "doctest-stand-in");
    await writeFile(other, '#!/bin/sh\necho "args: $*"\n');
    await chmod(other, 0o755);
    const { stdout } = await throughRunner(other, ["x"]);
    assert.equal(stdout, "args: x\n");
  });
});
