import { executorOf, type StorageOrTransaction } from "../executor.js";

/** A recorded host transition, or a host's enrollment (its row's `enrolled_at`). */
export interface HostTransitionRecord {
  host: string;
  from: string;
  to: string;
  action: string;
  actor: string;
  at: string;
  reason: string | null;
  revision: number | null;
}

/**
 * Every host transition, newest first, at most `limit`. A host's enrollment is not a separate
 * record: its row keeps `enrolled_at` (registerHost), so it is read from there as the host's
 * first transition, `unenrolled` → `serving`, by the host itself.
 */
export async function listHostTransitions(
  target: StorageOrTransaction,
  input: { limit: number },
): Promise<HostTransitionRecord[]> {
  const db = executorOf(target);
  const recorded = await db
    .selectFrom("host_transitions")
    .selectAll()
    .orderBy("at", "desc")
    .orderBy("sequence", "desc")
    .limit(input.limit)
    .execute();
  const enrollments = await db
    .selectFrom("hosts")
    .select(["id", "enrolled_at"])
    .orderBy("enrolled_at", "desc")
    .limit(input.limit)
    .execute();
  const entries: (HostTransitionRecord & { order: number })[] = [
    ...recorded.map((r) => ({
      host: r.host_id,
      from: r.from_state,
      to: r.to_state,
      action: r.action,
      actor: r.actor,
      at: r.at,
      reason: r.reason,
      revision: r.revision === null ? null : Number(r.revision),
      order: Number(r.sequence),
    })),
    ...enrollments.map((h) => ({
      host: h.id,
      from: "unenrolled",
      to: "serving",
      action: "host.enroll",
      actor: `host:${h.id}`,
      at: h.enrolled_at,
      reason: null,
      revision: 0,
      // An enrollment precedes every recorded change of its instant.
      order: -1,
    })),
  ];
  entries.sort((a, b) => (a.at === b.at ? b.order - a.order : a.at < b.at ? 1 : -1));
  return entries.slice(0, input.limit).map(({ order: _, ...entry }) => entry);
}
