import type { Kysely } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * A host's fleet poll: records the attempts it says it runs sandboxes for (what
 * operator.placements.list compares with the live attempts to flag orphans) and answers the
 * host's open initialization, the oldest first, if any, and the operator reads waiting for it. A host with no row yet (it polled
 * before enrolling) has nothing recorded but still gets its initialization.
 */
export async function recordHostFleetPoll(
  db: Kysely<Database>,
  input: { hostId: string; sandboxes: readonly string[]; now: Date },
): Promise<{
  initialization: { operation: string; toolchains: string[] } | null;
  reads: {
    id: string;
    kind: string;
    path: string | null;
    maxBytes: number;
    attempt: number | null;
    executions: number | null;
  }[];
}> {
  await db
    .updateTable("hosts")
    .set({ reported_attempts: JSON.stringify([...input.sandboxes].sort()), reported_at: formatTimestamp(input.now) })
    .where("id", "=", input.hostId)
    .execute();
  const open = await db
    .selectFrom("host_initializations")
    .select(["operation", "toolchains"])
    .where("host_id", "=", input.hostId)
    .where("state", "in", ["pending", "running"])
    .orderBy("ordinal")
    .executeTakeFirst();
  const reads = await db
    .selectFrom("host_reads")
    .select(["id", "kind", "path", "max_bytes", "attempt", "executions"])
    .where("host_id", "=", input.hostId)
    .where("state", "=", "pending")
    .orderBy("requested_at")
    .orderBy("id")
    .execute();
  return {
    initialization:
      open === undefined ? null : { operation: open.operation, toolchains: JSON.parse(open.toolchains) as string[] },
    reads: reads.map((r) => ({
      id: r.id,
      kind: r.kind,
      path: r.path,
      maxBytes: Number(r.max_bytes),
      attempt: r.attempt === null ? null : Number(r.attempt),
      executions: r.executions === null ? null : Number(r.executions),
    })),
  };
}
