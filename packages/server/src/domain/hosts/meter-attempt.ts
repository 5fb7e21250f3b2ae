import type { AttemptUsage, MeteredAttempt } from "@kiln/storage";

/**
 * Metering of one attempt: whole wall-clock seconds from its start to its end — or to the
 * cancellation request, when one came first (nothing after a cancel is billed) — times the
 * vCPUs it held.
 */
export function meterAttempt(attempt: MeteredAttempt, endedAt: Date): AttemptUsage {
  const cancelledAt = attempt.cancelRequestedAt === null ? null : new Date(attempt.cancelRequestedAt);
  const end = cancelledAt !== null && cancelledAt < endedAt ? cancelledAt : endedAt;
  const seconds = Math.max(0, Math.ceil((end.getTime() - new Date(attempt.startedAt).getTime()) / 1000));
  return { size: attempt.size, seconds, vcpuSeconds: seconds * attempt.vcpus };
}
