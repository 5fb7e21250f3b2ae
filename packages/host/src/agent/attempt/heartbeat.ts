import type { Clock, Timer } from "@kiln/contract";
import type { HostReporting } from "../host-events.js";
import type { AttemptRef, HeartbeatAnswer, HostProtocol } from "../host-protocol.js";

/**
 * Renews an attempt's lease every `everyMs` (one beat at a time: the next is scheduled when
 * the last is answered). Any answer but `continue` is handed to `onStop` once; a beat that
 * fails is reported and the next one tries again (the lease outlives several beats).
 */
export function startHeartbeat(options: {
  readonly protocol: HostProtocol;
  readonly ref: AttemptRef;
  readonly clock: Clock;
  readonly everyMs: number;
  readonly reporting: HostReporting;
  readonly onStop: (answer: Exclude<HeartbeatAnswer, "continue">) => void;
}): { stop(): void } {
  let timer: Timer | null = null;
  let stopped = false;
  const beat = async () => {
    try {
      const answer = await options.protocol.heartbeat(options.ref);
      if (answer !== "continue" && !stopped) {
        stopped = true;
        options.onStop(answer);
      }
    } catch (error) {
      options.reporting.emit({
        type: "heartbeat:error",
        jobId: options.ref.jobId,
        attempt: options.ref.attempt,
        error,
      });
      options.reporting.log.warn(
        { jobId: options.ref.jobId, attempt: options.ref.attempt, err: error },
        "heartbeat failed; the next one tries again",
      );
    }
    schedule();
  };
  const schedule = () => {
    if (!stopped) timer = options.clock.after(options.everyMs, () => void beat());
  };
  schedule();
  return {
    stop: () => {
      stopped = true;
      timer?.cancel();
    },
  };
}
