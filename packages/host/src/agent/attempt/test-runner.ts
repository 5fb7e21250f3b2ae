import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { FlakyPolicy } from "@kiln/contract";

/**
 * kiln's test runner (issue 37): cargo runs every test binary through it, as Cargo's
 * `target.<triple>.runner`, so it runs inside the attempt's own isolation, ceiling, metering
 * and cancellation, with exactly the arguments, environment and working directory cargo gave
 * the binary. Around each binary it
 * - measures the binary's wall time (`kiln-test-binary-start`/`-end` markers);
 * - has libtest measure every test (`--report-time`, an unstable libtest option: libtest
 *   accepts it when RUSTC_BOOTSTRAP is set at all, and `-1` is the value with which rustc and
 *   cargo — should a test spawn them — still behave as the stable toolchain they are; only
 *   binaries that carry libtest's option text get it, never a `harness = false` binary);
 * - re-runs each test the binary reported failed (libtest's stable `--logfile` names them; the
 *   binary's output is never piped, so the log keeps the order it wrote in), by its exact name,
 *   up to `retries` times, stopping at its first pass (`kiln-test-try-start`/`-end` markers around each re-run, whose
 *   output goes to the log between them), and under policy `pass` tells cargo the binary passed
 *   when every failed test passed on a re-run — so cargo goes on to the next binary as it would
 *   have, instead of stopping at a test that was flaky.
 * Only cargo's test binaries (`<target>/<profile>/deps/…`) are measured and re-run; anything
 * else run through the runner (cargo hands doctests to rustdoc with the same runner, as
 * `--test-runtool`) is exec'd untouched.
 * The markers are JSON lines starting with `{"reason":` on stdout: kept out of the job's log
 * like cargo's own messages, read by TestRunMarkers. Names and paths are base64 in them.
 */
/**
 * What libtest writes on stderr (without a newline) for the runner's `--logfile`: not the job's
 * output, taken off the line it lands on before the log and the parser see it.
 */
export const LOGFILE_WARNING = "warning: `--logfile` is deprecated";

/** A libtest result line as `--report-time` prints it: `test a::b ... ok <0.012s>`. */
const REPORTED_TIME = /^(test .+ \.\.\. .+) <\d+\.\d+s>$/;

/**
 * A stdout line as libtest prints it without `--report-time`: the time the runner asked for is
 * the evidence's (the parser reads it), never the log's, which reads as local cargo's would.
 */
export function withoutReportedTime(line: string): string {
  if (!line.startsWith("test ") || !line.endsWith("s>")) return line;
  return REPORTED_TIME.exec(line)?.[1] ?? line;
}

/** A binary with more failed tests than this has them all fail: none is re-run. */
export const MAX_RERUN_TESTS = 50;

/** Beside each test binary, what the runner found it to be (libtest or not) and of which build. */
export const HARNESS_SUFFIX = ".kiln-harness";

export const TEST_RUNNER_SCRIPT = `retries=$1 policy=$2 exe=$3
shift 3
case $exe in */deps/*) ;; *) exec "$exe" "$@" ;; esac
now() { date +%s%N; }
b64() { printf %s "$1" | base64 -w0; }
exe64=$(b64 "$exe")
mark() { printf '{"reason":"kiln-test-%s","executable":"%s",%s"at_ns":%s}\\n' "$1" "$exe64" "$2" "$(now)"; }
# What the binary is (libtest knows --report-time; --logfile while libtest still has it) is read
# once per build of it, kept beside it ($exe${HARNESS_SUFFIX}) with its size and mtime: a warm run
# reads no binary (regex's are ~37 MB each).
id=$(stat -c '%s %y' "$exe" 2>/dev/null) kind=
if [ -r "$exe${HARNESS_SUFFIX}" ]; then { read -r kind; read -r was; } <"$exe${HARNESS_SUFFIX}"; [ -n "$id" ] && [ "$was" = "$id" ] || kind=; fi
if [ -z "$kind" ]; then
  kind=plain
  if grep -qaF -e 'report-time' "$exe" 2>/dev/null; then
    kind=libtest
    if grep -qaF -e 'logfile' "$exe" 2>/dev/null; then kind=logfile; fi
  fi
  [ -z "$id" ] || printf '%s\n%s\n' "$kind" "$id" >"$exe${HARNESS_SUFFIX}" 2>/dev/null
fi
libtest=false
case $kind in libtest|logfile) libtest=true ;; esac
run() { if $libtest; then RUSTC_BOOTSTRAP=-1 "$exe" "$@" -Z unstable-options --report-time; else "$exe" "$@"; fi; }
dir=$(mktemp -d) || exit 101
log=
# --logfile is deprecated in libtest: used only while the binary still knows it.
if [ "$kind" = logfile ]; then
  log="$dir/log"
  for a in "$@"; do case $a in --logfile|--logfile=*) log= ;; esac; done
fi
mark binary-start ''
if [ -n "$log" ]; then run "$@" --logfile "$log"; else run "$@"; fi
rc=$?
mark binary-end "\\"exit\\":$rc,"
if [ "$rc" -gt 128 ]; then rm -rf "$dir"; kill -"$((rc - 128))" $$; exit "$rc"; fi
if [ "$rc" -eq 101 ] && [ "$retries" -gt 0 ] && [ -n "$log" ]; then
  keep=
  for a in "$@"; do case $a in --ignored|--include-ignored|--nocapture|--show-output) keep="$keep $a";; esac; done
  sed -n 's/^failed \\(.*\\)$/\\1/p' "$log" | sed 's/ <[0-9.]*s>$//' >"$dir/failed"
  all=true
  # Nothing to re-run, or a mass failure (more than ${MAX_RERUN_TESTS} tests) that is not flakiness.
  if [ ! -s "$dir/failed" ] || [ "$(wc -l <"$dir/failed")" -gt ${MAX_RERUN_TESTS} ]; then all=false; : >"$dir/failed"; fi
  while IFS= read -r name; do
    t=1 passed=false
    while [ "$t" -le "$retries" ] && ! $passed; do
      t=$((t + 1))
      mark try-start "\\"test\\":\\"$(b64 "$name")\\",\\"try\\":$t,"
      rm -f "$dir/try"
      run --exact "$name" $keep --logfile "$dir/try" </dev/null
      r=$?
      if [ "$r" -eq 0 ] && sed 's/ <[0-9.]*s>$//' "$dir/try" 2>/dev/null | grep -qxF -e "ok $name"; then passed=true; fi
      mark try-end "\\"test\\":\\"$(b64 "$name")\\",\\"try\\":$t,\\"exit\\":$r,\\"passed\\":$passed,"
    done
    $passed || all=false
  done <"$dir/failed"
  if $all && [ "$policy" = pass ]; then rc=0; fi
fi
rm -rf "$dir"
exit "$rc"
`;

const HOST_TRIPLES: Readonly<Record<string, string>> = {
  x64: "x86_64-unknown-linux-gnu",
  arm64: "aarch64-unknown-linux-gnu",
};

/** The `--config` argument that makes cargo run test binaries through kiln's test runner. */
export function testRunnerConfig(triple: string, retries: number, policy: FlakyPolicy): string {
  const runner = ["/bin/sh", "-c", TEST_RUNNER_SCRIPT, "kiln-test-runner", String(retries), policy];
  return `target.${triple}.runner=${JSON.stringify(runner)}`;
}

/** How the runner config is shown in the job's log: the script itself is this file's. */
export function shownTestRunnerConfig(triple: string, retries: number, policy: FlakyPolicy): string {
  return `target.${triple}.runner=<kiln test runner: flaky_retries ${retries}, flaky_policy ${policy}>`;
}

/**
 * Whether kiln may run the job's test binaries through its runner, and for which target: not
 * when the job cross-compiles (`--target`), and never over a runner the repository or the job
 * configures itself (ours would replace it). Null with the reason when it may not.
 */
export function testRunnerTarget(input: {
  readonly arguments: readonly string[];
  readonly environment: Readonly<Record<string, string>>;
  readonly workspace: string;
  readonly workingDirectory: string;
}): { triple: string } | { skipped: string } {
  const triple = HOST_TRIPLES[process.arch];
  if (triple === undefined) return { skipped: `no test runner for a ${process.arch} host` };
  const separator = input.arguments.indexOf("--");
  const cargoArgs = separator < 0 ? input.arguments : input.arguments.slice(0, separator);
  if (cargoArgs.some((a) => a === "--target" || a.startsWith("--target="))) {
    return { skipped: "the job names its own --target" };
  }
  if (Object.keys(input.environment).some((name) => /^CARGO_TARGET_.+_RUNNER$/.test(name))) {
    return { skipped: "the job's environment sets its own target runner" };
  }
  // Cargo reads .cargo/config(.toml) from the working directory up to the workspace root.
  const parts = input.workingDirectory.split("/").filter((p) => p !== "" && p !== ".");
  for (let depth = parts.length; depth >= 0; depth--) {
    for (const name of ["config.toml", "config"]) {
      const file = join(input.workspace, ...parts.slice(0, depth), ".cargo", name);
      if (existsSync(file) && /\brunner\b/.test(readFileSync(file, "utf8"))) {
        return { skipped: "the repository's Cargo configuration sets a runner" };
      }
    }
  }
  return { triple };
}
