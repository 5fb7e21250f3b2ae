import { whenOutputCloses } from "./output.js";

/**
 * What ends a following `kiln cargo` from outside, and the exit code each means (128 + the
 * signal's number, as a shell reports a process the signal killed): Ctrl-C (SIGINT), SIGTERM —
 * what GitHub Actions, Buildkite, `timeout` and `kill` send to cancel — a closed terminal
 * (SIGHUP), and a reader that went away (EPIPE on stdout or stderr, as SIGPIPE would).
 */
export const STOP_EXIT_CODES = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129, SIGPIPE: 141 } as const;
export type StopSignal = keyof typeof STOP_EXIT_CODES;

const DELIVERED = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/**
 * Calls `onStop` for each stop until `release()`; while installed, none of these signals ends
 * the process by itself (the caller decides: cancel the remote job first, or exit at once).
 */
export function watchStopSignals(onStop: (signal: StopSignal) => void): { release(): void } {
  const handlers = DELIVERED.map((signal) => {
    const handler = () => onStop(signal);
    process.on(signal, handler);
    return [signal, handler] as const;
  });
  const restoreOutput = whenOutputCloses(() => onStop("SIGPIPE"));
  return {
    release() {
      for (const [signal, handler] of handlers) process.off(signal, handler);
      restoreOutput();
    },
  };
}
