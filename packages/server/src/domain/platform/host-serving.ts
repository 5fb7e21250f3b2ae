import type { HostCapacityObservation } from "@kiln/storage";
import { HOST_SEEN_EVERY_SECONDS } from "@kiln/storage";

/**
 * A host that has not been seen for this long is not serving: an idle host claims every half
 * second and records itself seen every HOST_SEEN_EVERY_SECONDS, and a busy one renews its
 * attempts' leases every two seconds, so six missed records is a host that stopped.
 */
export const HOST_FRESH_SECONDS = 6 * HOST_SEEN_EVERY_SECONDS;

/** Whether the host takes placements now, and why not when it does not. */
export function servingOf(host: HostCapacityObservation, now: Date): { serving: boolean; reason: string | null } {
  if (host.state === "draining") return { serving: false, reason: "drained by an operator: placement stopped" };
  if (host.admissionClosure !== null) {
    return { serving: false, reason: `admission closed on an impairment: ${host.admissionClosure}` };
  }
  if (host.liveLease) return { serving: true, reason: null };
  const seen = host.lastHeartbeatAt === null ? null : Date.parse(host.lastHeartbeatAt);
  if (seen === null || now.getTime() - seen > HOST_FRESH_SECONDS * 1000) {
    return {
      serving: false,
      reason: `not seen for over ${HOST_FRESH_SECONDS} s (last ${host.lastHeartbeatAt ?? "never"}): it neither claimed work nor renewed a lease`,
    };
  }
  return { serving: true, reason: null };
}
