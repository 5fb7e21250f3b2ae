/**
 * The one clock every process runs on: it tells the time and it owns the timers. Loops
 * (lease reaper, upload sweeper, the host agent's claim poll and heartbeat, log flushes)
 * schedule through it rather than through the global setTimeout, so a test drives lease
 * loss, expiry and retries by advancing a ManualClock instead of sleeping.
 *
 * It lives in the contract because both sides of the host protocol need it and neither
 * may import the other; it uses no Node module.
 */
export interface Clock {
  now(): Date;
  /** Runs `fn` once after `ms`; never keeps the process alive on its own. */
  after(ms: number, fn: () => void): Timer;
  /** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export interface Timer {
  cancel(): void;
}

export const systemClock: Clock = {
  now: () => new Date(),
  after(ms, fn) {
    const handle = setTimeout(fn, ms);
    // Timers are background work: a process ends when its real work does.
    (handle as { unref?: () => void }).unref?.();
    return { cancel: () => clearTimeout(handle) };
  },
  sleep: (ms, signal) => sleepOn(systemClock, ms, signal),
};

/** `clock.sleep` from `clock.after`: resolves after `ms` on that clock, rejects once `signal` aborts. */
function sleepOn(clock: Pick<Clock, "after">, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason);
      return;
    }
    const timer = clock.after(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    const onAbort = () => {
      timer.cancel();
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

interface Scheduled {
  readonly id: number;
  readonly at: number;
  readonly fn: () => void;
}

/**
 * A clock that moves only when told: `advance(ms)` runs every timer falling due in order,
 * letting the promise jobs each one starts settle before the next, so code that awaits
 * storage between timers behaves as it would in real time, without the wait.
 */
export class ManualClock implements Clock {
  #now: number;
  #timers: Scheduled[] = [];
  #next = 0;

  constructor(start: Date | string = "2026-11-24T12:00:00.000Z") {
    this.#now = new Date(start).getTime();
  }

  now(): Date {
    return new Date(this.#now);
  }

  after(ms: number, fn: () => void): Timer {
    const entry = { id: this.#next++, at: this.#now + Math.max(0, ms), fn };
    this.#timers.push(entry);
    return { cancel: () => this.#remove(entry.id) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Timers not yet run. */
  get pending(): number {
    return this.#timers.length;
  }

  /**
   * Moves time forward by `ms`, running each timer that falls due at its own instant, in
   * order (ties in scheduling order); timers they schedule run too if due within the span.
   */
  async advance(ms: number): Promise<void> {
    const until = this.#now + ms;
    for (;;) {
      await settle();
      const due = this.#timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (due === undefined) break;
      this.#remove(due.id);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = until;
    await settle();
  }

  #remove(id: number): void {
    this.#timers = this.#timers.filter((t) => t.id !== id);
  }
}

/**
 * Lets pending promise jobs and I/O callbacks that are already complete run: a few
 * macrotask turns, so work started by a timer (which may await a database) progresses.
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
