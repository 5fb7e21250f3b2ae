import { type Db, readJobStatus, readLogRecords } from "@kiln/storage";
import { refuse } from "../refusal.js";

/** Records read per query while searching: few round trips, bounded memory. */
const SEARCH_BATCH = 5000;
/**
 * Lines one search answer looks at, at most: a log of a million lines is searched in answers of
 * this many (each continues with its next_cursor), so no one request holds the process long.
 */
export const SEARCH_LINES_PER_ANSWER = 100_000;

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC
const ANSI_SEQUENCE = /\u001b\[[0-9;?]*[A-Za-z]/g;

export interface LogSearchMatch {
  readonly sequence: number;
  readonly at: string;
  readonly stream: "stdout" | "stderr" | "system";
  readonly attempt: number;
  readonly text: string;
}

export interface LogSearchAnswer {
  readonly matches: LogSearchMatch[];
  /** The highest sequence looked at. */
  readonly searchedTo: number;
  /** Whether lines after searchedTo remain (the answer stopped at its match limit or line budget). */
  readonly more: boolean;
}

/**
 * The job's log lines after `afterSequence` whose text, without its ANSI escapes (what a reader
 * sees: cargo colours `error` apart from its `[E0308]: …`), contains `query` in either case.
 * Stops at `limit` matches or after SEARCH_LINES_PER_ANSWER lines, saying where it stopped.
 */
export async function searchJobLog(
  db: Db,
  job: { tenantId: string; jobId: string },
  input: { query: string; afterSequence: number; limit: number; linesPerAnswer?: number },
): Promise<LogSearchAnswer> {
  if ((await readJobStatus(db, job)) === undefined) return refuse("not_found", `no job ${job.jobId}`);
  const needle = input.query.toLowerCase();
  const budget = input.linesPerAnswer ?? SEARCH_LINES_PER_ANSWER;
  const matches: LogSearchMatch[] = [];
  let position = input.afterSequence;
  let looked = 0;
  for (;;) {
    const { records, highest } = await readLogRecords(db, {
      jobId: job.jobId,
      afterSequence: position,
      limit: Math.min(SEARCH_BATCH, budget - looked),
    });
    for (const r of records) {
      position = r.sequence;
      looked += 1;
      const plain = r.text.includes("\u001b") ? r.text.replace(ANSI_SEQUENCE, "") : r.text;
      if (plain.toLowerCase().includes(needle)) {
        matches.push({ sequence: r.sequence, at: r.at, stream: r.stream, attempt: r.attempt, text: r.text });
        if (matches.length >= input.limit) return { matches, searchedTo: position, more: position < highest };
      }
    }
    if (position >= highest || records.length === 0) return { matches, searchedTo: position, more: false };
    if (looked >= budget) return { matches, searchedTo: position, more: true };
  }
}
