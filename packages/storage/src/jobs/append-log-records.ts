import type { Storage } from "../dialect.js";
import { JOB_CHANNELS, notifyAtCommit } from "../notifications/job-notices.js";
import { formatTimestamp } from "../timestamps.js";

/** Lines written by one INSERT statement (6 bound values each). */
const LINES_PER_INSERT = 1000;

export interface LogLine {
  readonly stream: "stdout" | "stderr" | "system";
  readonly at: Date;
  readonly text: string;
}

/**
 * Appends log lines for an attempt, fenced by its lease: a stale host's lines are
 * refused (false) and never interleave with a newer attempt's. Sequences are the job's
 * own, assigned here under the same transaction, so they are gap-free and ordered; on
 * PostgreSQL the job's row is locked first so two appends to one job (host lines and a
 * control-plane system line) take turns instead of colliding on the next sequence.
 * SQLite's single writer serializes them already. The job's log streams are notified in the
 * same transaction (delivered at commit, on every server process: notifications/).
 */
export async function appendLogRecords(
  storage: Storage,
  input: { jobId: string; attempt: number; leaseToken: string | null; lines: readonly LogLine[] },
): Promise<boolean> {
  if (input.lines.length === 0) return true;
  return storage.transaction(async (trx) => {
    if (storage.capabilities.rowLocks) {
      await trx.selectFrom("jobs").select("id").where("id", "=", input.jobId).forUpdate().executeTakeFirst();
    }
    if (input.leaseToken !== null) {
      const holder = await trx
        .selectFrom("attempts")
        .select("number")
        .where("job_id", "=", input.jobId)
        .where("number", "=", input.attempt)
        .where("lease_token", "=", input.leaseToken)
        .where("state", "=", "running")
        .executeTakeFirst();
      if (holder === undefined) return false;
    }
    const last = await trx
      .selectFrom("log_records")
      .select((eb) => eb.fn.max("sequence").as("sequence"))
      .where("job_id", "=", input.jobId)
      .executeTakeFirst();
    let sequence = Number(last?.sequence ?? 0);
    // One statement binds six values a line: SQLite refuses more than 32,766 bound values and
    // PostgreSQL 65,535, so a long batch is written in slices within the same transaction.
    for (let from = 0; from < input.lines.length; from += LINES_PER_INSERT) {
      await trx
        .insertInto("log_records")
        .values(
          input.lines.slice(from, from + LINES_PER_INSERT).map((line) => ({
            job_id: input.jobId,
            sequence: ++sequence,
            attempt: input.attempt,
            stream: line.stream,
            at: formatTimestamp(line.at),
            text: withoutNul(line.text),
          })),
        )
        .execute();
    }
    await notifyAtCommit(trx, JOB_CHANNELS.job, input.jobId);
    return true;
  });
}

/**
 * PostgreSQL's text refuses U+0000 where SQLite stores it; a build's output may hold NUL bytes
 * (a test printing a buffer), so each is written as U+2400 (␀, the symbol for null) on both
 * engines: the line is kept and reads the same whichever engine holds it.
 */
function withoutNul(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "\u2400") : text;
}
