import type { OPERATING_STATE_REASONS, OperatingStates } from "@kiln/contract";
import type { Static } from "@sinclair/typebox";

export type OperatingStatesDocument = Static<typeof OperatingStates>;
export type StateKey = keyof typeof OPERATING_STATE_REASONS;
export type ReasonCode<K extends StateKey> = (typeof OPERATING_STATE_REASONS)[K][number];

/** A refusing state must recover within this long before it escalates (readiness, capacity). */
export const ESCALATION_SECONDS = 300;

/** One operating state: `ok`, or `refusing` with the deadline it must recover by. */
export function operatingState<K extends StateKey>(
  _key: K,
  input: { now: Date; code: ReasonCode<K>; detail: string; refusingUntil: Date | null },
) {
  return {
    state: input.refusingUntil === null ? ("ok" as const) : ("refusing" as const),
    computed_at: input.now.toISOString(),
    reason: { code: input.code, detail: input.detail },
    deadline: input.refusingUntil?.toISOString() ?? null,
  };
}
