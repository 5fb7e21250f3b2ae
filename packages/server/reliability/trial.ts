/**
 * What every trial shares: it prints exactly one line `T<n> <name>: <figure>` on stdout, each
 * broken promise on stderr, and exits 1 when any promise was broken (2 when the trial itself
 * could not run). Verdicts are counts of wrong answers, never durations, so machine load can
 * slow a trial but not change its verdict.
 */
import { DIALECTS, type DialectUnderTest } from "@kiln/storage/testing";

export interface TrialOutcome {
  /** The figure, as printed after `T<n> <name>: `. */
  readonly figure: string;
  /** One line per broken promise (empty when the trial passed). */
  readonly broken: readonly string[];
}

/** The dialects a trial runs on: both, unless KILN_RELIABILITY_DIALECTS names a subset. */
export function trialDialects(): readonly DialectUnderTest[] {
  const wanted = process.env.KILN_RELIABILITY_DIALECTS?.split(",").map((s) => s.trim());
  return DIALECTS.filter((d) => d.skip === false && (wanted === undefined || wanted.includes(d.name)));
}

/** Runs a trial and exits with its verdict. */
export async function runTrial(id: string, name: string, body: () => Promise<TrialOutcome>): Promise<never> {
  let outcome: TrialOutcome;
  try {
    outcome = await body();
  } catch (error) {
    process.stdout.write(`${id} ${name}: did not run\n`);
    process.stderr.write(`${id} ${name}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(2);
  }
  process.stdout.write(`${id} ${name}: ${outcome.figure}\n`);
  const shown = outcome.broken.slice(0, 40);
  for (const line of shown) process.stderr.write(`${id} broken: ${line}\n`);
  if (outcome.broken.length > shown.length) {
    process.stderr.write(`${id} broken: … and ${outcome.broken.length - shown.length} more\n`);
  }
  process.exit(outcome.broken.length === 0 ? 0 : 1);
}

/** 12345 → "12,345". */
export const count = (n: number) => n.toLocaleString("en-US");
