import { CargoOutputParser } from "../evidence/parse-cargo-output.js";
import { toReportFailures, toReportItems } from "../evidence/report-items.js";
import type { OutputObserver, OutputSummary } from "./attempt-evidence.js";

/** The runner's observer, backed by the streaming cargo/libtest parser. */
export function cargoOutputObserver(attempt: number): OutputObserver {
  const parser = new CargoOutputParser();
  return {
    pushLine: (stream, line) => parser.pushLine(stream, line, Date.now()),
    testBinaryExited: (executable, exitCode) => parser.testBinaryExited(executable, exitCode),
    end: (stoppedFromOutside = false) => {
      if (stoppedFromOutside) parser.stoppedFromOutside();
      parser.end(undefined, Date.now());
    },
    summary(): OutputSummary {
      const parsed = parser.result();
      const items = toReportItems(parsed, { attempt });
      // A test binary killed mid-run (signal, OOM) never printed which test was running: the
      // binary itself is reported as one failed item, so the evidence names what failed.
      const crashed = parsed.testBinaries
        .filter((b) => b.crashed && !items.tests.some((t) => t.target === b.label && t.outcome === "failed"))
        .map((b) => ({
          target: b.label,
          name: "(test binary crashed before reporting its tests)",
          outcome: "failed" as const,
          attempt,
          duration_ms: null,
          crashed: true,
          ...(b.exitDetail === null ? {} : { detail: b.exitDetail }),
        }));
      return {
        crates: items.crates,
        tests: [...items.tests, ...crashed],
        failures: [
          ...toReportFailures(parsed),
          ...crashed.map((c) => ({
            kind: "test_panic" as const,
            message: c.detail === undefined ? c.name : `the test binary crashed (${c.detail})`,
            code: null,
            target: c.target,
            test: null,
            location: null,
          })),
        ],
        buildSucceeded: parsed.build.success,
        testBinaries: parsed.testBinaries.map((b) => ({ label: b.label, executable: b.executable })),
        failedTests: Math.max(parsed.testTotals.failed + crashed.length, parsed.failedTargets.length > 0 ? 1 : 0),
      };
    },
  };
}
