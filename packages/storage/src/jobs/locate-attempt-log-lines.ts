import { executorOf, type StorageOrTransaction } from "../executor.js";

/** A line of an attempt's log by its place in it (1 for the attempt's first line). */
export interface AttemptLogPlace {
  readonly attempt: number;
  readonly place: number;
}

/**
 * The records at places of attempts' logs. The host numbers its lines in the order it ships
 * them and an attempt's lines are appended one after the other (host-service appendLogs, fenced
 * by the lease), so a place is the attempt's first sequence plus the place minus one; a record
 * found there of another attempt, or none, means lines went missing (the caller checks the
 * text too). One read of the attempts' first sequences, one of the records.
 */
export async function locateAttemptLogLines(
  target: StorageOrTransaction,
  input: { jobId: string; places: readonly AttemptLogPlace[] },
): Promise<Map<string, { sequence: number; text: string }>> {
  const found = new Map<string, { sequence: number; text: string }>();
  if (input.places.length === 0) return found;
  const db = executorOf(target);
  const attempts = [...new Set(input.places.map((p) => p.attempt))];
  const firsts = await db
    .selectFrom("log_records")
    .select(["attempt", (eb) => eb.fn.min("sequence").as("first")])
    .where("job_id", "=", input.jobId)
    .where("attempt", "in", attempts)
    .groupBy("attempt")
    .execute();
  const firstOf = new Map(firsts.map((f) => [Number(f.attempt), Number(f.first)]));
  // Several places may name one sequence (attempt 1's place past its end is attempt 2's first).
  const wanted = new Map<number, AttemptLogPlace[]>();
  for (const p of input.places) {
    const first = firstOf.get(p.attempt);
    if (first === undefined || p.place < 1) continue;
    const sequence = first + p.place - 1;
    wanted.set(sequence, [...(wanted.get(sequence) ?? []), p]);
  }
  if (wanted.size === 0) return found;
  const records = await db
    .selectFrom("log_records")
    .select(["sequence", "attempt", "text"])
    .where("job_id", "=", input.jobId)
    .where("sequence", "in", [...wanted.keys()])
    .execute();
  for (const r of records) {
    for (const p of wanted.get(Number(r.sequence)) ?? []) {
      if (Number(r.attempt) === p.attempt)
        found.set(`${p.attempt}:${p.place}`, { sequence: Number(r.sequence), text: r.text });
    }
  }
  return found;
}
