import type { Clock, Timer } from "@kiln/contract";
import type { HostReporting } from "../host-events.js";
import type { AttemptRef, HostProtocol, LogLine } from "../host-protocol.js";

const FLUSH_MS = 200;
const BATCH_LINES = 500;
/** Lines kept for a later try while the control plane does not answer; older ones are dropped (and said so). */
const MAX_HELD_LINES = 50_000;

/**
 * Ships an attempt's log lines in small batches, one shipment at a time so they arrive in
 * order. A `stale` answer means this attempt lost its lease: nothing more is shipped and the
 * attempt must not report. A shipment that fails is reported and its lines are kept for the
 * next flush, so a control plane that blinks loses no line.
 */
export class LogShipper {
  #buffer: LogLine[] = [];
  #timer: Timer | null = null;
  #chain: Promise<void> = Promise.resolve();
  #dropped = 0;
  #pushed = 0;
  /** A flush is queued for a full batch (not yet shipping): more lines wait for it. */
  #queued = false;
  stale = false;

  constructor(
    private readonly protocol: HostProtocol,
    private readonly ref: AttemptRef,
    private readonly clock: Clock,
    private readonly reporting: HostReporting,
  ) {}

  /**
   * Appends a line; returns its place in the attempt's log (1 for the attempt's first line). The
   * control plane numbers an attempt's lines in this order, one after the other, so a line's
   * sequence is the attempt's first sequence plus its place minus one — unless lines were
   * dropped (`dropped`).
   */
  push(stream: LogLine["stream"], text: string): number {
    this.#buffer.push({ stream, at: this.clock.now().toISOString(), text });
    this.#pushed += 1;
    if (this.#buffer.length < BATCH_LINES) this.#timer ??= this.clock.after(FLUSH_MS, () => void this.flush());
    else if (!this.#queued) {
      // One shipment queued behind the one in flight takes what piles up meanwhile, a batch at a time.
      this.#queued = true;
      void this.flush();
    }
    return this.#pushed;
  }

  /** Ships what is buffered; resolves once every shipment so far has been answered (or failed). */
  flush(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = null;
    this.#chain = this.#chain.then(() => this.#ship());
    return this.#chain;
  }

  /**
   * Ships the buffer in batches of at most BATCH_LINES, oldest first, until it is empty, the
   * attempt is stale or a shipment fails (its lines are kept for the next flush). A batch is
   * bounded: lines pile up fast while a shipment is in flight (a test printing thousands of
   * lines), and one unbounded shipment of them was refused whole, and kept, and refused again.
   */
  async #ship(): Promise<void> {
    this.#queued = false;
    while (!this.stale && this.#buffer.length > 0) {
      if (!(await this.#shipBatch())) return;
    }
  }

  /** Ships the oldest batch; false when it failed (and was put back). */
  async #shipBatch(): Promise<boolean> {
    const lines = this.#buffer.slice(0, BATCH_LINES);
    this.#buffer = this.#buffer.slice(lines.length);
    try {
      if ((await this.protocol.appendLogs(this.ref, lines)) === "stale") this.stale = true;
      return true;
    } catch (error) {
      this.reporting.emit({ type: "logs:error", jobId: this.ref.jobId, attempt: this.ref.attempt, error });
      this.reporting.log.warn(
        { jobId: this.ref.jobId, attempt: this.ref.attempt, err: error, lines: lines.length },
        "log lines were not accepted; they are kept for the next shipment",
      );
      this.#buffer = [...lines, ...this.#buffer];
      const over = this.#buffer.length - MAX_HELD_LINES;
      if (over > 0) {
        this.#buffer.splice(0, over);
        this.#dropped += over;
      }
      return false;
    }
  }

  /** Lines dropped because the control plane did not take them for too long. */
  get dropped(): number {
    return this.#dropped;
  }
}
