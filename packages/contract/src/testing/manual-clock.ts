import { type Clock, sleepOn, systemClock, type Timer } from "../clock.js";

interface Scheduled {
  readonly id: number;
  readonly at: number;
  readonly fn: () => void;
}

/**
 * Whose timers a ManualClock runs. `manual`: only `advance` runs them, each at its own instant,
 * so a test drives loops (lease loss, retries, polls) without waiting; until it advances, no
 * timer fires at all, which proves that something happened without a poll. `real`: the
 * system clock's, while the time itself still moves only by `advance`; for the app's tests,
 * whose requests wait on timers (long polls, stream heartbeats) no test means to drive.
 */
export type ManualClockTimers = "manual" | "real";

/**
 * The one test clock: its time moves only when told. `advance(ms)` runs every manual timer
 * falling due in order, letting the promise jobs each one starts settle before the next, so
 * code that awaits storage between timers behaves as it would in real time, without the wait.
 */
export class ManualClock implements Clock {
  /** Applies to timers scheduled from now on; those already scheduled keep theirs. */
  timers: ManualClockTimers;
  #now: number;
  #scheduled: Scheduled[] = [];
  #next = 0;

  constructor(start: Date | string = "2026-11-22T08:00:00.000Z", timers: ManualClockTimers = "manual") {
    this.#now = new Date(start).getTime();
    this.timers = timers;
  }

  /** A clock whose time moves by `advance` but whose timers are the system clock's (see ManualClockTimers). */
  static withRealTimers(start?: Date | string): ManualClock {
    return new ManualClock(start, "real");
  }

  now(): Date {
    return new Date(this.#now);
  }

  after(ms: number, fn: () => void): Timer {
    if (this.timers === "real") return systemClock.after(ms, fn);
    const entry = { id: this.#next++, at: this.#now + Math.max(0, ms), fn };
    this.#scheduled.push(entry);
    return { cancel: () => this.#remove(entry.id) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Manual timers not yet run. */
  get pending(): number {
    return this.#scheduled.length;
  }

  /**
   * Moves time forward by `ms` (back, where negative: no timer runs then), running each
   * manual timer that falls due at its own instant, in order (ties in scheduling order);
   * timers they schedule run too if due within the span.
   */
  async advance(ms: number): Promise<void> {
    const until = this.#now + ms;
    for (;;) {
      await settle();
      const due = this.#scheduled.filter((t) => t.at <= until).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (due === undefined) break;
      this.#remove(due.id);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = until;
    await settle();
  }

  #remove(id: number): void {
    this.#scheduled = this.#scheduled.filter((t) => t.id !== id);
  }
}

/**
 * Lets pending promise jobs and I/O callbacks that are already complete run: a few
 * macrotask turns, so work started by a timer (which may await a database) progresses.
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
