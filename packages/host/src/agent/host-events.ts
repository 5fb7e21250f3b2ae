import type { Logger, LoopFailure } from "@kiln/contract";

/**
 * What the host agent reports about itself, besides what it tells the control plane: every
 * failure it meets (a claim the control plane did not answer, a phase of an attempt that
 * threw, a heartbeat or log shipment that failed, a directory it could not remove) and each
 * attempt's end. Each is logged for the operator and emitted for whoever listens (tests
 * assert them); none is swallowed.
 */
export type HostEvent =
  | { readonly type: "claim:error"; readonly error: unknown }
  | { readonly type: "attempt:start"; readonly jobId: string; readonly attempt: number }
  | {
      readonly type: "attempt:error";
      readonly jobId: string;
      readonly attempt: number;
      readonly phase: string;
      readonly error: unknown;
    }
  | {
      readonly type: "attempt:end";
      readonly jobId: string;
      readonly attempt: number;
      /** finished: the control plane accepted the result; stale: the attempt had lost its lease. */
      readonly answer: "finished" | "stale";
      readonly outcome: "passed" | "failed" | "cancelled";
    }
  | { readonly type: "heartbeat:error"; readonly jobId: string; readonly attempt: number; readonly error: unknown }
  | { readonly type: "logs:error"; readonly jobId: string; readonly attempt: number; readonly error: unknown }
  | { readonly type: "cleanup:error"; readonly what: string; readonly error: unknown }
  /** A background loop of the host (the credential acknowledgement) failed a pass. */
  | LoopFailure;

export interface HostReporting {
  readonly log: Logger;
  readonly emit: (event: HostEvent) => void;
}
