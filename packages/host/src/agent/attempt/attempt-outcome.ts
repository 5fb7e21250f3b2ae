import { messageOf } from "@kiln/contract";
import type { ExecutionResult } from "../../executor/executor.js";
import type { OutputSummary } from "../attempt-evidence.js";
import type { AttemptFailure, AttemptResult, Placement } from "../host-protocol.js";
import { cargoStep } from "./run-cargo.js";

/** "16 GiB", "512 MiB". */
function sizeText(bytes: number): string {
  return bytes >= 2 ** 30 ? `${Math.round((bytes / 2 ** 30) * 10) / 10} GiB` : `${Math.round(bytes / 2 ** 20)} MiB`;
}

/** How the attempt ended, from what cargo did (or that it did not run) and whether cancellation arrived. */
export function attemptOutcome(run: ExecutionResult | null, cancelled: boolean): AttemptResult["outcome"] {
  if (run?.outcome === "cancelled" || cancelled) return "cancelled";
  return run === null || (run.outcome === "exited" && run.exitCode === 0) ? "passed" : "failed";
}

/** Why an attempt that did not pass failed: the phase and the cause the Job record names. */
export function failureOf(
  placement: Placement,
  outcome: AttemptResult["outcome"],
  run: ExecutionResult | null,
  summary: OutputSummary,
): AttemptFailure | null {
  const step = cargoStep(placement);
  if (outcome === "passed") return null;
  if (outcome === "cancelled")
    return { phase: step, cause: "cancelled", detail: "cancelled; the process tree was reaped" };
  if (run === null) return { phase: step, cause: "infrastructure", detail: "cancelled before cargo ran" };
  const op = placement.invocation.operation;
  switch (run.outcome) {
    case "wall_clock_ceiling":
      return {
        phase: op,
        cause: "wall_clock_ceiling",
        detail: `the attempt ran past its ${placement.wallClockSeconds} s wall-clock ceiling`,
      };
    case "infrastructure":
      return {
        phase: "provision",
        cause: "infrastructure",
        detail: `the sandbox could not run the attempt${run.detail.length > 0 ? `: ${run.detail.join("; ")}` : ""}`,
      };
    case "cancelled":
      return { phase: op, cause: "cancelled", detail: "cancelled; the process tree was reaped" };
    case "exited": {
      if (run.oomKilled) {
        const inTests = step === "test" && summary.buildSucceeded === true;
        return {
          phase: inTests ? "test" : "build",
          cause: inTests ? "test_failure" : "build_error",
          detail: `a process exceeded the size's memory (${Math.round(placement.limits.memoryBytes / 2 ** 30)} GiB) and was killed`,
        };
      }
      if (run.diskQuotaExceeded && run.exitCode !== 0) {
        const inTests = step === "test" && summary.buildSucceeded === true;
        return {
          phase: inTests ? "test" : "build",
          cause: inTests ? "test_failure" : "build_error",
          detail: `the job's writes filled its disk quota (${sizeText(run.diskBytes ?? placement.limits.diskBytes)} in its target dir) and failed with ENOSPC (No space left on device)`,
        };
      }
      const testsFailed = step === "test" && summary.buildSucceeded !== false && summary.failedTests > 0;
      return testsFailed
        ? {
            phase: "test",
            cause: "test_failure",
            detail: `${summary.failedTests} test(s) failed${flakyNote(summary)}${firstFailure(summary, "test_panic")}`,
          }
        : {
            phase: "build",
            cause: "build_error",
            detail: `cargo ${op} exited with ${run.exitCode ?? run.signal}${firstFailure(summary, "compiler_error")}`,
          };
    }
  }
}

/**
 * The first failure of a kind, said in one line for the job's failure detail: `; first:
 * error[E0277]: … at src/lib.rs:3:18 (and 2 more errors)` or `; first: tests::x panicked at
 * src/lib.rs:9:5: assertion failed`.
 */
function firstFailure(summary: OutputSummary, kind: "compiler_error" | "test_panic"): string {
  const all = summary.failures.filter((f) => f.kind === kind);
  const first = all[0];
  if (first === undefined) return "";
  const where =
    first.location === null ? "" : ` at ${first.location.file}:${first.location.line}:${first.location.column}`;
  const message = (first.message.split("\n")[0] ?? "").slice(0, 300);
  if (kind === "compiler_error") {
    const more = all.length > 1 ? ` (and ${all.length - 1} more error${all.length > 2 ? "s" : ""})` : "";
    return `; first: error${first.code === null ? "" : `[${first.code}]`}: ${message}${where}${more}`;
  }
  return `; first: ${first.test ?? first.target ?? "a test"} ${first.location === null ? "failed" : `panicked${where}`}${message === "" ? "" : `: ${message}`}`;
}

/** Under flaky_policy `fail`, the failed tests that passed on a re-run are still failures: said so. */
function flakyNote(summary: OutputSummary): string {
  const flaky = summary.tests.filter((t) => t.flaky === true).length;
  return flaky === 0
    ? ""
    : ` (${flaky} of them flaky: failed, then passed on a re-run; flaky_policy fail keeps the failure)`;
}

/** A phase of the host that threw: the job fails with that cause, said in the host's words. */
export function hostFailure(phase: string, error: unknown): AttemptFailure {
  return { phase, cause: "infrastructure", detail: `the host failed in ${phase}: ${messageOf(error)}` };
}
