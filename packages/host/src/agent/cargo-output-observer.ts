import { CargoOutputParser } from "../evidence/parse-cargo-output.js";
import { toReportItems } from "../evidence/report-items.js";
import type { OutputObserver, OutputSummary } from "./attempt-evidence.js";

/** The runner's observer, backed by the streaming cargo/libtest parser. */
export function cargoOutputObserver(attempt: number): OutputObserver {
  const parser = new CargoOutputParser();
  return {
    pushLine: (stream, line) => parser.pushLine(stream, line, Date.now()),
    summary(): OutputSummary {
      const parsed = parser.result();
      const items = toReportItems(parsed, { attempt });
      return {
        crates: items.crates as unknown as Record<string, unknown>[],
        tests: items.tests as unknown as Record<string, unknown>[],
        buildSucceeded: parsed.build.success,
        failedTests: Math.max(parsed.testTotals.failed, parsed.failedTargets.length > 0 ? 1 : 0),
      };
    },
  };
}
