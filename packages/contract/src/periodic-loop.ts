import type { Clock, Timer } from "./clock.js";
import { type Logger, messageOf } from "./logger.js";

/** What a periodic loop reports: each run that threw, with the loop's name. */
export interface LoopFailure {
  readonly type: "loop:error";
  readonly loop: string;
  readonly error: unknown;
}

export interface PeriodicLoop {
  /** Runs the loop body now (after a nudge), unless a run is in progress. */
  nudge(): void;
  /** Stops scheduling and waits for a run in progress. */
  stop(): Promise<void>;
}

/**
 * Runs `run` every `everyMs` on `clock`, one run at a time (a slow run delays the next
 * instead of overlapping it). A run that throws is logged and emitted as `loop:error` and
 * the loop goes on: background work never fails silently, and never stops for one failure.
 */
export function startPeriodicLoop(options: {
  readonly name: string;
  readonly clock: Clock;
  readonly everyMs: number;
  readonly run: () => Promise<void>;
  readonly log: Logger;
  readonly onFailure?: (failure: LoopFailure) => void;
}): PeriodicLoop {
  let timer: Timer | null = null;
  let current: Promise<void> | null = null;
  let stopped = false;

  const runOnce = (): Promise<void> => {
    if (current !== null) return current;
    current = options
      .run()
      .catch((error: unknown) => {
        options.log.error({ loop: options.name, err: error }, `${options.name}: ${messageOf(error)}`);
        options.onFailure?.({ type: "loop:error", loop: options.name, error });
      })
      .finally(() => {
        current = null;
        schedule();
      });
    return current;
  };
  const schedule = () => {
    if (stopped) return;
    timer?.cancel();
    timer = options.clock.after(options.everyMs, () => void runOnce());
  };

  schedule();
  return {
    nudge: () => {
      if (!stopped) void runOnce();
    },
    stop: async () => {
      stopped = true;
      timer?.cancel();
      await current;
    },
  };
}
