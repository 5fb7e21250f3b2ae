/**
 * The one clock every process runs on: it tells the time and it owns the timers. Loops
 * (lease reaper, upload sweeper, the host agent's claim poll and heartbeat, log flushes)
 * schedule through it rather than through the global setTimeout, so a test drives lease
 * loss, expiry and retries by advancing a ManualClock (@kiln/contract/testing) instead of sleeping.
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
export function sleepOn(clock: Pick<Clock, "after">, ms: number, signal?: AbortSignal): Promise<void> {
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
