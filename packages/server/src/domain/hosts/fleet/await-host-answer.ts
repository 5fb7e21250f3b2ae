import { randomUUID } from "node:crypto";
import type { Clock, HostReadKind } from "@kiln/contract";
import { type HostReadAnswerState, requestHostRead, type Storage, takeHostReadAnswer } from "@kiln/storage";

/**
 * How long an operator's request of a host waits for its answer. A host polls every 5 seconds
 * (FLEET_POLL_EVERY_MS), so 30 seconds is several missed polls: the host is not answering.
 */
export const HOST_ANSWER_WAIT_SECONDS = 30;
/** How often the waiting request looks for the host's answer. */
const LOOK_EVERY_MS = 200;

/**
 * Asks a host through the host protocol and waits for its answer: the request is recorded
 * (`host_reads`), the host answers it on its next fleet poll (host/src/agent/fleet-channel.ts),
 * and this waits until the answer arrives or HOST_ANSWER_WAIT_SECONDS have passed on the clock
 * (then `expired`: the host did not answer). Nothing here runs on the host's behalf.
 */
export async function awaitHostAnswer(
  deps: { readonly storage: Storage; readonly clock: Clock },
  request: {
    hostId: string;
    kind: HostReadKind;
    path: string | null;
    maxBytes: number;
    attempt?: number | null;
    executions?: number | null;
    requestedBy: string;
  },
): Promise<Exclude<HostReadAnswerState, { kind: "pending" }>> {
  const id = `read-${randomUUID()}`;
  // The wait is counted from the request, fixed before it is recorded: the host may answer (and
  // the clock move on) before this continues after the insert, and a deadline read after that
  // would move with it.
  const requestedAt = deps.clock.now();
  const deadline = new Date(requestedAt.getTime() + HOST_ANSWER_WAIT_SECONDS * 1000);
  await requestHostRead(deps.storage, { ...request, id, now: requestedAt });
  for (;;) {
    const state = await takeHostReadAnswer(deps.storage, { id, now: deps.clock.now(), deadline });
    if (state.kind !== "pending") return state;
    await deps.clock.sleep(LOOK_EVERY_MS);
  }
}
