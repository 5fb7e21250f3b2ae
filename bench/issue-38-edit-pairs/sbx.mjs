// One sandbox-executor attempt on fixed directories (kiln2-cpu limits, the variables kiln injects): node sbx.mjs DIR -- argv…
const host = await import(
  process.env.P38_HOST ?? new URL("../../packages/host/dist/src/index.js", import.meta.url).href
);
const [dir, , ...argv] = process.argv.slice(2);
const executor = host.createSandboxExecutor({ cgroupParentName: process.env.P38_PARENT ?? "p38-sandboxes" });
const toolchain = await host.admitToolchain("stable");
const started = process.hrtime.bigint();
const result = await executor.run({
  attemptId: `p38-${process.pid}`,
  limits: { vcpus: 2, memoryBytes: 4 * 2 ** 30, pids: 1024, diskBytes: 16 * 2 ** 30 },
  workspaceDir: `${dir}/src`,
  targetDir: `${dir}/target`,
  homeDir: `${dir}/home`,
  warmTarget: true,
  toolchain,
  argv,
  workingDirectory: ".",
  environment: { CARGO_BUILD_JOBS: "2", CARGO_PROFILE_DEV_DEBUG: "line-tables-only", CARGO_TERM_COLOR: "never" },
  wallClockSeconds: 900,
  network: "offline",
  // P38_DROP_STDOUT=1: the job's stdout (the tests' 7,847 lines) is dropped here, not written (the
  // run-half pair: what this process's writing of it costs); stderr (cargo's, edit.sh's split line) is kept.
  onOutput: (s, c) =>
    (s === "stdout" ? (process.env.P38_DROP_STDOUT ? null : process.stdout) : process.stderr)?.write(c),
  signal: new AbortController().signal,
});
process.stderr.write(
  `\n[sbx] ${result.outcome} ${result.exitCode} cpu=${result.cpuSeconds} ${(Number(process.hrtime.bigint() - started) / 1e9).toFixed(2)}s\n`,
);
if (process.env.P38_DETAIL) process.stderr.write(`${result.detail.join("\n")}\n`);
process.exit(result.exitCode ?? 1);
