import type { AttemptRef, AttemptReport, FailureReportItem } from "@kiln/contract";
import { type AttemptLogPlace, locateAttemptLogLines, type StorageOrTransaction } from "@kiln/storage";

const ESCAPE = String.fromCharCode(27);
const ANSI = new RegExp(`${ESCAPE}\\[[0-9;?]*[A-Za-z]`, "g");

/** What the host adds to a failure or a test's panic: its line's place in the attempt's log. */
type Placed = { log_line?: unknown; location?: { printed?: string } | null; message?: string };

/**
 * The attempt's report with each failure's and failed test's panic `log_line` (its place in the
 * attempt's log, counted by the host) turned into `log_sequence`, the sequence of its record in
 * the job's log (jobs.logs), so the job page, the CLI and the check run can point at the line.
 * A place is kept only when the record found there is the line the host meant (a panic header
 * naming the failure's location, an error header naming its message): a host that dropped lines
 * shifts every place after the gap, and a wrong link is worse than none.
 */
export async function withFailureLogSequences(
  storage: StorageOrTransaction,
  ref: AttemptRef,
  report: AttemptReport,
): Promise<AttemptReport> {
  const tests = report.tests as Array<AttemptReport["tests"][number] & { panic?: Placed }>;
  const placed: Placed[] = [
    ...(report.failures ?? []),
    ...tests.flatMap((t) => (t.panic === undefined ? [] : [t.panic])),
  ];
  const places: AttemptLogPlace[] = placed.flatMap((p) =>
    typeof p.log_line === "number" && Number.isInteger(p.log_line) ? [{ attempt: ref.attempt, place: p.log_line }] : [],
  );
  if (places.length === 0) return report;
  const found = await locateAttemptLogLines(storage, { jobId: ref.jobId, places });
  const sequenced = <T extends Placed>(item: T): Omit<T, "log_line"> & { log_sequence?: number } => {
    const { log_line: place, ...rest } = item;
    const record = typeof place === "number" ? found.get(`${ref.attempt}:${place}`) : undefined;
    if (record === undefined || !names(record.text, item)) return rest;
    return { ...rest, log_sequence: record.sequence };
  };
  return {
    ...report,
    ...(report.failures === undefined
      ? {}
      : { failures: report.failures.map((f) => sequenced(f) as FailureReportItem) }),
    tests: tests.map((t) => (t.panic === undefined ? t : { ...t, panic: sequenced(t.panic) })),
  };
}

/** Whether a log line is the failure's own: it names the failure's printed location or message. */
function names(text: string, item: Placed): boolean {
  const plain = text.includes(ESCAPE) ? text.replace(ANSI, "") : text;
  const printed = item.location?.printed;
  if (plain.includes("panicked at")) return printed !== undefined && plain.includes(printed);
  const firstLine = item.message?.split("\n")[0];
  return firstLine !== undefined && firstLine !== "" && plain.includes(firstLine);
}
