/**
 * Pairs the test binaries Cargo announced on stderr (runs) with the libtest blocks their
 * processes printed on stdout (blocks).
 *
 * Stdout and stderr are separate pipes, so the order in which a reader sees lines of the two
 * streams is not the order they were written (a busy reader, or a log replayed stream by
 * stream, sees whole stretches of one before the other). The pairing therefore uses only each
 * stream's own order: the k-th block normally belongs to the k-th run. That simple rule is wrong
 * when
 * - a binary prints no libtest block: `harness = false` targets (criterion benches, custom
 *   harnesses) or a binary that crashed before printing `running N tests`;
 * - one run prints several blocks: merged doctests (edition 2024) print one block for the merged
 *   doctests and another for standalone ones (`compile_fail`, …), then `all doctests ran in …`.
 *
 * So the pairing is a monotone alignment of minimum cost, where each run takes zero or more
 * consecutive blocks (more than one only for doctests) and the costs encode what each stream says
 * about itself: doctest names only under `Doc-tests`; a `test result: FAILED` or crashed block only
 * under a run Cargo reported failed; a unittests or doctest run almost always prints a block while
 * an integration test, bench or example may be `harness = false`; stdout text outside any block
 * means a non-libtest binary ran there. Ties go to the earliest pairing (the k-th rule).
 */

export interface AlignRun {
  readonly kind: "doctests" | "unittests" | "other";
  /** true: Cargo reported it failed; false: it finished without failure; null: not known yet. */
  readonly failed: boolean | null;
}

export interface AlignBlock {
  /** true: doctest names; false: other test names; null: cannot tell (no tests). */
  readonly doctestNames: boolean | null;
  readonly status: "ok" | "failed" | "aborted" | "open";
  /** Followed by `all doctests ran in …`: no later block belongs to the same run. */
  readonly endsDoctestRun: boolean;
  /** Stdout text outside any block came right before this block. */
  readonly looseTextBefore: boolean;
}

export interface AlignInput {
  readonly runs: readonly AlignRun[];
  readonly blocks: readonly AlignBlock[];
  /** Stdout text outside any block after the last block. */
  readonly looseTextAfter: boolean;
  /** Stdout is complete: runs without a block so far will never get one. */
  readonly stdoutEnded: boolean;
}

const IMPOSSIBLE = 1_000_000;
const ORPHAN_BLOCK = 1_000;
const GAP_TEXT_UNEXPLAINED = 8;
const CONTINUATION = 1;
const OK_BLOCK_UNDER_FAILED_RUN = 50;

function skipCost(run: AlignRun): number {
  if (run.kind === "doctests") return run.failed ? 20 : 300;
  if (run.kind === "unittests") return run.failed ? 2 : 100;
  return run.failed ? 2 : 5;
}

function matchCost(run: AlignRun, block: AlignBlock): number {
  if (block.doctestNames === true && run.kind !== "doctests") return IMPOSSIBLE;
  if (block.doctestNames === false && run.kind === "doctests") return IMPOSSIBLE;
  return outcomeCost(run, block);
}

function outcomeCost(run: AlignRun, block: AlignBlock): number {
  if ((block.status === "failed" || block.status === "aborted") && run.failed === false) return IMPOSSIBLE;
  if (block.status === "ok" && run.failed === true) return OK_BLOCK_UNDER_FAILED_RUN;
  return 0;
}

/** A further block of the same doctest run: merged doctests first, then standalone ones. */
function continuationCost(run: AlignRun, block: AlignBlock): number {
  if (block.doctestNames === false) return IMPOSSIBLE;
  if ((block.status === "failed" || block.status === "aborted") && run.failed === false) return IMPOSSIBLE;
  return CONTINUATION;
}

/**
 * For each block, the index of the run it belongs to, or null when no run can be found for it
 * (stderr not read that far yet, or lost).
 */
export function alignTestRuns(input: AlignInput): (number | null)[] {
  const { runs, blocks } = input;
  const n = runs.length;
  const m = blocks.length;
  // State (i, j, c, s): runs[0..i) and blocks[0..j) are decided; c = block j-1 went to run i-1,
  // a doctest run that may take more blocks; s = a run was skipped since block j-1.
  const width = m + 1;
  const states = (n + 1) * width * 4;
  const cost = new Float64Array(states);
  const at = (i: number, j: number, c: number, s: number) => ((i * width + j) * 2 + c) * 2 + s;

  // Suffix sums of skip costs, for the runs left over once every block is placed.
  const trailing = new Float64Array(n + 1);
  for (let i = n - 1; i >= 0; i--) trailing[i] = (trailing[i + 1] ?? 0) + skipCost(runAt(runs, i));

  const options = (i: number, j: number, c: number, s: number): Option[] => {
    const result: Option[] = [];
    const block = blocks[j];
    if (!block) return result;
    const gap = block.looseTextBefore ? GAP_TEXT_UNEXPLAINED : 0;
    if (i < n) {
      const run = runAt(runs, i);
      const next = run.kind === "doctests" && !block.endsDoctestRun ? 1 : 0;
      result.push({ kind: "match", cost: matchCost(run, block) + (s ? 0 : gap), to: [i + 1, j + 1, next, 0] });
    }
    if (c === 1 && i > 0) {
      const run = runAt(runs, i - 1);
      const next = block.endsDoctestRun ? 0 : 1;
      result.push({ kind: "continue", cost: continuationCost(run, block) + gap, to: [i, j + 1, next, 0] });
    }
    if (i < n) result.push({ kind: "skip", cost: skipCost(runAt(runs, i)), to: [i + 1, j, 0, 1] });
    result.push({ kind: "orphan", cost: ORPHAN_BLOCK, to: [i, j + 1, 0, 0] });
    return result;
  };

  const finalCost = (i: number, s: number): number => {
    if (!input.stdoutEnded) return 0;
    const leftover = trailing[i] ?? 0;
    const unexplained = input.looseTextAfter && s === 0 && i === n ? GAP_TEXT_UNEXPLAINED : 0;
    return leftover + unexplained;
  };

  for (let i = n; i >= 0; i--) {
    for (let j = m; j >= 0; j--) {
      for (let c = 0; c < 2; c++) {
        for (let s = 0; s < 2; s++) {
          if (j === m) {
            cost[at(i, j, c, s)] = finalCost(i, s);
            continue;
          }
          let best = Number.POSITIVE_INFINITY;
          for (const option of options(i, j, c, s)) {
            const [ti, tj, tc, ts] = option.to;
            best = Math.min(best, option.cost + (cost[at(ti, tj, tc, ts)] ?? 0));
          }
          cost[at(i, j, c, s)] = best;
        }
      }
    }
  }

  // Walk forward taking the first optimal option: match before continue before skip, so ties
  // give each block the earliest run still available.
  const assignment: (number | null)[] = new Array<number | null>(m).fill(null);
  let i = 0;
  let j = 0;
  let c = 0;
  let s = 0;
  while (j < m) {
    const here = cost[at(i, j, c, s)] ?? 0;
    const chosen = options(i, j, c, s).find((option) => {
      const [ti, tj, tc, ts] = option.to;
      return option.cost + (cost[at(ti, tj, tc, ts)] ?? 0) <= here + 1e-9;
    });
    if (!chosen) break;
    if (chosen.kind === "match") assignment[j] = i;
    else if (chosen.kind === "continue") assignment[j] = i - 1;
    [i, j, c, s] = chosen.to;
  }
  return assignment;
}

interface Option {
  readonly kind: "match" | "continue" | "skip" | "orphan";
  readonly cost: number;
  readonly to: readonly [number, number, number, number];
}

function runAt(runs: readonly AlignRun[], index: number): AlignRun {
  const run = runs[index];
  if (!run) throw new RangeError(`no run ${index}`);
  return run;
}
