import type { FailureReportItem } from "@kiln/contract";
import type { ReportTestItem } from "../../evidence/report-items.js";
import type { OutputSummary } from "../attempt-evidence.js";

const ESCAPE = String.fromCharCode(27);
const ANSI = new RegExp(`${ESCAPE}\\[[0-9;?]*[A-Za-z]`, "g");
const PANIC_HEADER = /^thread '[^']*'(?: \(\d+\))? panicked at (?:'.*', )?(?<location>.+:\d+:\d+):?$/;
const ERROR_HEADER = /^error(?:\[[A-Z]\d{4}\])?: /;
const LOCATION = /^\s*--> (?<location>.+:\d+:\d+)$/;

/**
 * Where in the attempt's log each failure is: the place (1-based, LogShipper.push) of a panic's
 * `thread '…' panicked at` line and of a compiler error's `error[E…]:` line, so the job page and
 * the check run can link the exact line. Lines are noted as they are shipped; a failure is
 * matched to the lines naming its printed location, the k-th failure at a location to the k-th
 * such line (the output's own order).
 */
export class FailureLines {
  readonly #panics = new Map<string, number[]>();
  readonly #errors = new Map<string, number[]>();
  #errorHeader: number | null = null;

  /** A line as shipped, and its place in the attempt's log. */
  note(text: string, place: number): void {
    const plain = text.includes(ESCAPE) ? text.replace(ANSI, "") : text;
    const panic = PANIC_HEADER.exec(plain)?.groups?.location;
    if (panic !== undefined) {
      add(this.#panics, panic, place);
      return;
    }
    if (ERROR_HEADER.test(plain)) {
      this.#errorHeader = place;
      return;
    }
    const location = LOCATION.exec(plain)?.groups?.location;
    if (location !== undefined && this.#errorHeader !== null) {
      add(this.#errors, location, this.#errorHeader);
      this.#errorHeader = null;
    }
  }

  /** The summary with `log_line` on each failure and failed test's panic whose line was seen. */
  attach(summary: OutputSummary): OutputSummary {
    const taken = new Map<string, number>();
    const placeOf = (kind: "panic" | "error", printed: string | undefined): number | undefined => {
      if (printed === undefined) return undefined;
      const key = `${kind} ${printed}`;
      const k = taken.get(key) ?? 0;
      taken.set(key, k + 1);
      return (kind === "panic" ? this.#panics : this.#errors).get(printed)?.[k];
    };
    const failures: FailureReportItem[] = summary.failures.map((f) => {
      const place = placeOf(f.kind === "test_panic" ? "panic" : "error", f.location?.printed);
      return place === undefined ? f : { ...f, log_line: place };
    });
    taken.clear();
    const tests = summary.tests.map((t) => {
      const panic = (t as ReportTestItem).panic;
      const place = panic === undefined ? undefined : placeOf("panic", panic.location?.printed);
      return panic === undefined || place === undefined ? t : { ...t, panic: { ...panic, log_line: place } };
    });
    return { ...summary, failures, tests };
  }
}

function add(map: Map<string, number[]>, key: string, place: number): void {
  const list = map.get(key) ?? [];
  list.push(place);
  map.set(key, list);
}
