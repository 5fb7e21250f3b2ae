import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { HostActivationRecord, HostActivationStepRecord } from "./host-activation-records.js";

/**
 * At most this many activations are listed: a host operator restarts once per boot or
 * deployment, so this covers months; a crash-looping one cannot make the read unbounded.
 */
export const HOST_ACTIVATIONS_LISTED = 100;

/**
 * A host's activations, most recently written first (ties by operation, so the order is
 * total); with `operation`, only that one (empty when the host has no such activation).
 * Mutates nothing.
 */
export async function listHostActivations(
  target: StorageOrTransaction,
  input: { hostId: string; operation?: string },
): Promise<HostActivationRecord[]> {
  const db = executorOf(target);
  let query = db.selectFrom("host_activations").selectAll().where("host_id", "=", input.hostId);
  if (input.operation !== undefined) query = query.where("operation", "=", input.operation);
  const rows = await query
    .orderBy("written_at", "desc")
    .orderBy("operation", "desc")
    .limit(HOST_ACTIVATIONS_LISTED)
    .execute();
  return rows.map((row) => ({
    operation: row.operation,
    hostId: row.host_id,
    boot: row.boot,
    instance: row.instance,
    startedAt: row.started_at,
    plan: JSON.parse(row.plan) as string[],
    steps: JSON.parse(row.ledger) as HostActivationStepRecord[],
    receipt:
      row.outcome === null || row.finished_at === null
        ? null
        : {
            outcome: row.outcome === "succeeded" ? "succeeded" : "failed",
            finishedAt: row.finished_at,
            detail: row.receipt_detail,
          },
    writtenAt: row.written_at,
  }));
}
