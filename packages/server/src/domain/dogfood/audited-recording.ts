import { appendOperatorAuditEntry, type Db, type Storage } from "@kiln/storage";
import { operatorAuditValue } from "../platform/operator-audit-value.js";
import { refuse } from "../refusal.js";

/** What one recording did: performed it, found the same already recorded, or found different content. */
export type RecordingOutcome<T> =
  | { readonly outcome: "performed" | "replayed"; readonly result: T; readonly value: string }
  | { readonly outcome: "conflict"; readonly value: string };

/**
 * Runs one trial recording and its operator audit entry in one transaction, so no recording
 * exists unaudited. A conflict is audited too (the entry commits), then refused `conflict`: an id
 * re-recorded with different content is refused and the attempt stays on the record.
 */
export async function auditedRecording<T>(input: {
  readonly storage: Storage;
  readonly actor: string;
  readonly operation: string;
  readonly target: string;
  readonly now: Date;
  readonly record: (trx: Db) => Promise<RecordingOutcome<T>>;
}): Promise<{ result: T; outcome: "performed" | "replayed" }> {
  const done = await input.storage.transaction(async (trx) => {
    const r = await input.record(trx);
    await appendOperatorAuditEntry(
      trx,
      { actor: input.actor, target: input.target, value: operatorAuditValue(input.operation, r.outcome, r.value) },
      input.now,
    );
    return r;
  });
  if (done.outcome === "conflict") return refuse("conflict", done.value);
  return { result: done.result, outcome: done.outcome };
}
