import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodGateOpeningRow, dogfoodDb, type Recorded } from "./dogfood-tables.js";

/** The single key of the gate's opening row: the entry gate opens once. */
const ENTRY_GATE = "entry";

/**
 * Records that the entry gate opened at `openedAt`, unless it already had: the primary key
 * keeps the first opening when two recordings race, and both read it back.
 */
export async function openDogfoodGate(
  target: StorageOrTransaction,
  input: { openedAt: string; openedBy: string },
): Promise<Recorded<DogfoodGateOpeningRow>> {
  const db = dogfoodDb(target);
  const inserted = await db
    .insertInto("dogfood_gate_openings")
    .values({ gate: ENTRY_GATE, opened_at: input.openedAt, opened_by: input.openedBy })
    .onConflict((c) => c.column("gate").doNothing())
    .executeTakeFirst();
  const row = await db
    .selectFrom("dogfood_gate_openings")
    .selectAll()
    .where("gate", "=", ENTRY_GATE)
    .executeTakeFirstOrThrow();
  return { row, inserted: (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n };
}
