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
 * like cargo's own messages, read by TestRunMarkers. Names and paths are JSON strings in them.
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

/**
 * The variables bash itself acts on when they are in its environment (a warning on the job's
 * stderr for an LC_ALL naming a locale the system lacks, a BASH_ENV file sourced, shell options
 * turned on): the runner's bash starts without them, and the binary gets them back. (`--norc`:
 * Debian's bash reads ~/.bashrc when its stdin is a socket, as it guesses sshd started it.)
 */
const BASH_SENSITIVE = ["LC_ALL", "BASH_ENV", "SHELLOPTS", "BASHOPTS"];

/**
 * What cargo starts for every binary it runs through the runner: sh (dash, which starts in a
 * millisecond) execs anything that is not a test binary untouched, and hands test binaries to
 * bash (TEST_RUNNER_SCRIPT), whose builtins tell the time (`$EPOCHREALTIME`) and do what would
 * otherwise cost a process each (date twice, base64, stat, mktemp).
 */
const TEST_RUNNER_ENTRY = `script=$1 exe=$4
shift
case $exe in */deps/*) ;; *) shift 3; exec "$exe" "$@" ;; esac
${BASH_SENSITIVE.map((v) => `[ -z "\${${v}+x}" ] || { export KILN_TEST_RUNNER_${v}="$${v}"; unset ${v}; }`).join("\n")}
exec /bin/bash --norc -c "$script" kiln-test-runner "$@"
`;

export const TEST_RUNNER_SCRIPT = `retries=$1 policy=$2 exe=$3
shift 3
saved=()
for v in ${BASH_SENSITIVE.join(" ")}; do s=KILN_TEST_RUNNER_$v; if [ -n "\${!s+x}" ]; then saved+=("$v=\${!s}"); unset "$s"; fi; done
# $1 as the body of a JSON string, into $js (no process; a control character only costs a loop).
jstr() {
  local LC_ALL=C
  local s=$1 out= i c
  s=\${s//\\\\/\\\\\\\\} s=\${s//\\"/\\\\\\"}
  if [[ $s == *[[:cntrl:]]* ]]; then
    for ((i = 0; i < \${#s}; i++)); do
      c=\${s:i:1}
      if [[ $c == [[:cntrl:]] ]]; then printf -v c '\\\\u%04x' "'$c"; fi
      out+=$c
    done
    s=$out
  fi
  js=$s
}
jstr "$exe"; exejs=$js
# Nanoseconds since the epoch (the clock date +%s%N reads, to the microsecond; any locale's radix).
mark() { printf '{"reason":"kiln-test-%s","executable":"%s",%s"at_ns":%s000}\\n' "$1" "$exejs" "$2" "\${EPOCHREALTIME//[!0-9]/}"; }
# What the binary is (libtest knows --report-time; --logfile while libtest still has it) is read
# once per build of it, kept beside it ($exe${HARNESS_SUFFIX}), valid while newer than the
# binary (a rebuilt binary is newer): a warm run reads no binary (regex's are ~37 MB each).
harness=$exe${HARNESS_SUFFIX} kind=
# The note is in the job's target dir, which the job's own code can write: only a known kind, from
# its first 16 bytes, is taken; anything else is looked at again.
if [ -r "$harness" ] && [ "$harness" -nt "$exe" ]; then read -r -N 16 kind <"$harness"; kind=\${kind%%$'\n'*}; fi
case $kind in plain|libtest|logfile) ;; *) kind= ;; esac
if [ -z "$kind" ]; then
  kind=plain
  if grep -qaF -e 'report-time' "$exe" 2>/dev/null; then
    kind=libtest
    if grep -qaF -e 'logfile' "$exe" 2>/dev/null; then kind=logfile; fi
  fi
  [ ! -e "$exe" ] || printf '%s\\n' "$kind" >"$harness" 2>/dev/null
fi
libtest=false
case $kind in libtest|logfile) libtest=true ;; esac
# libtest's timer (--report-time) is unstable: RUSTC_BOOTSTRAP=-1 lets a stable binary take it. Only
# the binary (and what it starts) runs with this environment after here.
if $libtest; then export RUSTC_BOOTSTRAP=-1; fi
run() {
  if $libtest; then set -- "$@" -Z unstable-options --report-time; fi
  if [ \${#saved[@]} -gt 0 ]; then /usr/bin/env "\${saved[@]}" "$exe" "$@"; else "$exe" "$@"; fi
}
# The runner's own files. The binary's log is named by cargo's pid ($PPID): cargo runs its test
# binaries one at a time, so each run empties and reuses that one file instead of leaving one per
# binary or paying a process (rm) to remove it; it stays in the job's /tmp, which ends with the
# job. A re-run's files are named by this runner's pid and removed.
tmp="\${TMPDIR:-/tmp}/kiln-test-runner.$$"
log=
# --logfile is deprecated in libtest: used only while the binary still knows it, and only when a
# failed test may be re-run (libtest writes every result to it: 2.4 % of regex's run).
if [ "$kind" = logfile ] && [ "$retries" -gt 0 ]; then
  log="\${TMPDIR:-/tmp}/kiln-test-runner.cargo-$PPID.log"
  for a in "$@"; do case $a in --logfile|--logfile=*) log= ;; esac; done
  # Made empty first: the last binary's log is never read as this one's.
  if [ -n "$log" ] && ! { : >"$log"; } 2>/dev/null; then exit 101; fi
fi
cleanup() { if [ -e "$tmp.failed" ]; then rm -f -- "$tmp.failed" "$tmp.try"; fi; }
mark binary-start ''
if [ -n "$log" ]; then run "$@" --logfile "$log"; else run "$@"; fi
rc=$?
mark binary-end "\\"exit\\":$rc,"
if [ "$rc" -gt 128 ]; then cleanup; kill -"$((rc - 128))" $$; exit "$rc"; fi
if [ "$rc" -eq 101 ] && [ "$retries" -gt 0 ] && [ -n "$log" ]; then
  keep=
  for a in "$@"; do case $a in --ignored|--include-ignored|--nocapture|--show-output) keep="$keep $a";; esac; done
  sed -n 's/^failed \\(.*\\)$/\\1/p' "$log" | sed 's/ <[0-9.]*s>$//' >"$tmp.failed"
  all=true
  # Nothing to re-run, or a mass failure (more than ${MAX_RERUN_TESTS} tests) that is not flakiness.
  if [ ! -s "$tmp.failed" ] || [ "$(wc -l <"$tmp.failed")" -gt ${MAX_RERUN_TESTS} ]; then all=false; : >"$tmp.failed"; fi
  while IFS= read -r name; do
    t=1 passed=false
    jstr "$name"; namejs=$js
    while [ "$t" -le "$retries" ] && ! $passed; do
      t=$((t + 1))
      mark try-start "\\"test\\":\\"$namejs\\",\\"try\\":$t,"
      rm -f -- "$tmp.try"
      run --exact "$name" $keep --logfile "$tmp.try" </dev/null
      r=$?
      if [ "$r" -eq 0 ] && sed 's/ <[0-9.]*s>$//' "$tmp.try" 2>/dev/null | grep -qxF -e "ok $name"; then passed=true; fi
      mark try-end "\\"test\\":\\"$namejs\\",\\"try\\":$t,\\"exit\\":$r,\\"passed\\":$passed,"
    done
    $passed || all=false
  done <"$tmp.failed"
  if $all && [ "$policy" = pass ]; then rc=0; fi
fi
cleanup
exit "$rc"
`;

const HOST_TRIPLES: Readonly<Record<string, string>> = {
  x64: "x86_64-unknown-linux-gnu",
  arm64: "aarch64-unknown-linux-gnu",
};

/** The `--config` argument that makes cargo run test binaries through kiln's test runner. */
export function testRunnerConfig(triple: string, retries: number, policy: FlakyPolicy): string {
  const runner = ["/bin/sh", "-c", TEST_RUNNER_ENTRY, "kiln-test-runner", TEST_RUNNER_SCRIPT, String(retries), policy];
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
