import type { Selectable } from "kysely";
import { InvalidCursorError } from "../errors.js";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { LogRecordsTable } from "../schema.js";

/**
 * Log records after a sequence, in order. The cursor of a log page is the last
 * sequence delivered, so pages resume with no gap and no duplicate even while the job
 * is still appending.
 */
export async function readLogRecords(
  target: StorageOrTransaction,
  input: { jobId: string; afterSequence: number; limit: number },
): Promise<{ records: Selectable<LogRecordsTable>[]; highest: number }> {
  const db = executorOf(target);
  const records = await db
    .selectFrom("log_records")
    .selectAll()
    .where("job_id", "=", input.jobId)
    .where("sequence", ">", input.afterSequence)
    .orderBy("sequence")
    .limit(input.limit)
    .execute();
  const top = await db
    .selectFrom("log_records")
    .select((eb) => eb.fn.max("sequence").as("sequence"))
    .where("job_id", "=", input.jobId)
    .executeTakeFirst();
  return { records, highest: Number(top?.sequence ?? 0) };
}

/** `l<sequence>` — the log cursor; anything else is refused as invalid. */
export function encodeLogCursor(sequence: number): string {
  return `l${sequence}`;
}

export function decodeLogCursor(cursor: string | null | undefined): number {
  if (cursor === null || cursor === undefined || cursor === "") return 0;
  const m = /^l(\d{1,15})$/.exec(cursor);
  if (m?.[1] === undefined) throw new InvalidCursorError("cursor");
  return Number(m[1]);
}
