import type { Clock, CrateItem, FailureReportItem, PhaseItem, TestItem } from "@kiln/contract";

/**
 * What the host learns from cargo's output while an attempt runs. The concrete parser
 * (`../evidence/`) implements it; the runner only feeds lines and reads the summary.
 */
export interface OutputObserver {
  pushLine(stream: "stdout" | "stderr", line: string): void;
  /**
   * Both streams have ended: unfinished blocks (a binary killed mid-run) are closed as crashed —
   * unless cargo was `stoppedFromOutside` (cancelled, the wall-clock ceiling): the binary running
   * then was stopped, not crashed, and its remaining tests did not run.
   */
  end(stoppedFromOutside?: boolean): void;
  summary(): OutputSummary;
  /** kiln's test runner says how a test binary's own run exited (before any retry). */
  testBinaryExited?(executable: string, exitCode: number): void;
}

export interface OutputSummary {
  /** The contract's report items for crates and tests (attempt is added by the control plane). */
  readonly crates: readonly CrateItem[];
  readonly tests: readonly TestItem[];
  /** What failed, first: the first compiler errors and the failed tests' panics (locations as printed). */
  readonly failures: readonly FailureReportItem[];
  /** Whether cargo reported the build finished successfully (null when it never said). */
  readonly buildSucceeded: boolean | null;
  readonly failedTests: number;
  /** The test binaries cargo announced: each one's label and executable as printed (issue 37's runner matches them by file name). */
  readonly testBinaries?: readonly { readonly label: string; readonly executable: string | null }[];
}

export type Phase = PhaseItem & { status: "passed" | "failed" | "skipped" | "cancelled" };

/** Times a named phase of the attempt for the evidence. */
export class PhaseClock {
  readonly phases: Phase[] = [];

  constructor(private readonly clock: Clock) {}

  async run<T>(
    name: string,
    fn: () => Promise<T>,
    statusOf: (value: T) => Phase["status"] = () => "passed",
  ): Promise<T> {
    const started = this.clock.now();
    try {
      const value = await fn();
      this.record(name, started, statusOf(value));
      return value;
    } catch (error) {
      this.record(name, started, "failed");
      throw error;
    }
  }

  record(name: string, started: Date, status: Phase["status"]): void {
    const finished = this.clock.now();
    this.phases.push({
      name,
      status,
      started_at: started.toISOString(),
      finished_at: finished.toISOString(),
      duration_ms: finished.getTime() - started.getTime(),
    });
  }
}
