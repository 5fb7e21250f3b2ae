import type { Kysely } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Publication's side of the retention sweep, in the transaction that finishes the attempt
 * (finish-attempt.ts), before anything of it is written: each artifact digest gets its
 * `artifact_blobs` row (created `held` if new) and the attempt's Cargo output digest, where it
 * has one, is touched too. Answers the digests among them whose bytes the sweep deleted, or is
 * deleting, after the host stored them: those cannot be published (the caller hands the job to
 * a new attempt, which stores them again).
 *
 * Locking: each row is created if missing (an insert that does nothing on conflict) and then
 * locked (`FOR UPDATE`; SQLite's one writer), in digest order so two publications sharing
 * digests never wait on each other in a cycle. The sweep marks a digest under the same lock,
 * after checking for live artifacts and a recent touch, so exactly one of two things happens:
 * the publication locks first, and the sweep then sees its fresh touch (and the artifact rows
 * committed with it) and leaves the digest alone; or the sweep's mark commits first, and the
 * publication sees `deleting`. A `deleted` row is a tombstone that stays, so a publication never
 * mistakes swept bytes for a digest that was never tracked; a put of the bytes after the sweep
 * made the row `held` again (clear-blob-for-put.ts), so `deleted` here means deleted after the put.
 */
export async function recordPublishedBlobs(
  trx: Kysely<Database>,
  input: {
    artifacts: readonly { sha256: string; bytes: number }[];
    /** Digests the attempt retains that are not artifacts (its Cargo output): touched if tracked. */
    retained: readonly string[];
    now: Date;
    rowLocks: boolean;
  },
): Promise<string[]> {
  const now = formatTimestamp(input.now);
  const artifactBytes = new Map(input.artifacts.map((a) => [a.sha256, a.bytes]));
  const digests = [...new Set([...artifactBytes.keys(), ...input.retained])].sort();
  const swept: string[] = [];
  for (const sha256 of digests) {
    const bytes = artifactBytes.get(sha256);
    if (bytes !== undefined) {
      await trx
        .insertInto("artifact_blobs")
        .values({ sha256, state: "held", bytes, touched_at: now })
        .onConflict((conflict) => conflict.column("sha256").doNothing())
        .execute();
    }
    let query = trx.selectFrom("artifact_blobs").select(["state", "touched_at"]).where("sha256", "=", sha256);
    if (input.rowLocks) query = query.forUpdate();
    const row = await query.executeTakeFirst();
    if (row === undefined) continue;
    if (row.state === "deleting" || row.state === "deleted") {
      swept.push(sha256);
    } else if (row.touched_at < now) {
      await trx.updateTable("artifact_blobs").set({ touched_at: now }).where("sha256", "=", sha256).execute();
    }
  }
  return swept;
}
