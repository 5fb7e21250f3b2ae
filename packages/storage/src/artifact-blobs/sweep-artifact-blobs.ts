import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { BlobStore } from "../blobs/blob-store.js";
import type { Storage } from "../dialect.js";
import type { Database } from "../schema.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";
import { ARTIFACT_BLOB_GRACE_SECONDS, ARTIFACT_BLOB_MARK_LEASE_SECONDS } from "./artifact-blob-timing.js";

/** What one call of the sweep did. */
export interface ArtifactBlobSweep {
  /** Digests looked at: candidates and stale marks. Fewer than the limit means none are left now. */
  readonly examined: number;
  /** Digests whose bytes this call deleted, and their bytes. */
  readonly deleted: number;
  readonly deletedBytes: number;
  /** Candidates another kind of record names (a job's source, a source part, Cargo output): kept for good. */
  readonly shared: number;
  /** Digests the sweep could not finish, with why; each is left marked for a later sweep. */
  readonly failures: readonly { readonly sha256: string; readonly error: unknown }[];
}

/**
 * Deletes the bytes of artifacts whose retention expired, at most `limit` digests per call.
 * Blobs are content-addressed and one namespace holds every kind (source parts, inline source
 * files, Cargo output, artifacts), so a digest is deleted only when no artifact still serves
 * it, nothing named it within the grace period, and no other kind of record names it.
 *
 * The per-digest row (`artifact_blobs`, migration 0035) is what every party locks:
 * - publication (record-published-blobs.ts) creates or touches it in the transaction that
 *   inserts the artifacts, and finds out there whether the bytes were swept;
 * - every blob put (`SweepFencedBlobStore`: clear-blob-for-put.ts, confirm-blob-put.ts) touches
 *   it before writing, waits while it is `deleting`, and brings a swept digest back to `held`
 *   only after writing its bytes and finding no sweep came in between;
 * - the sweep marks it here.
 *
 * One digest, in order:
 * 1. Candidates are read unlocked: `held` rows touched before now − grace with no artifact
 *    expiring after now − grace. Job source manifests and upload manifests (JSON text, scanned,
 *    too slow to read under a lock) are checked for the digest, still unlocked: a source that
 *    names it makes it `shared`, kept for good. A source whose record commits after this check
 *    put its bytes within the grace period, which touched the row, so step 2 refuses it.
 * 2. The mark: one transaction locks the row (`FOR UPDATE`; SQLite's one writer) and checks
 *    again that it is `held`, untouched within the grace period and served by no live artifact,
 *    and that no Cargo output, source part or chunk of a tenant's index names it (indexed, so
 *    under the lock). Then the row is `deleting` under a token of this mark's own, or `shared`.
 * 3. After the mark commits, the bytes are deleted (a missing blob is fine).
 * 4. The row becomes `deleted` where it still carries the token — a tombstone that stays, with
 *   the token, so a put that saw it can tell whether another sweep came in between.
 *
 * The race a sweep must never lose is a publication of the same bytes: the host's put, finding
 * the blob held, may skip writing, and the artifact would then be served without bytes. With
 * the row lock either the publication comes first (the sweep then sees its touch and its live
 * artifact, and leaves the digest) or the mark does (a put then waits until the row is
 * `deleted` and writes the bytes back; a publication whose put came before the mark is told its
 * bytes were swept, and its attempt is retried). Two sweeps: the row lock lets one mark; the
 * other sees `deleting` and moves on, so each blob is deleted once and a live one never.
 *
 * A mark older than the lease was left by a sweep that died or failed to delete: the next sweep
 * takes it over (a new token) and finishes it, or a put writes the bytes back over it. A sweep
 * whose mark was taken over before its step 4 reports it: it outlived its lease, and its late
 * delete may have taken bytes put back since.
 */
export async function sweepArtifactBlobs(
  storage: Storage,
  blobs: BlobStore,
  input: { now: Date; graceSeconds?: number; leaseSeconds?: number; limit?: number },
): Promise<ArtifactBlobSweep> {
  const limit = input.limit ?? 200;
  const now = formatTimestamp(input.now);
  const cutoff = formatTimestamp(addSeconds(input.now, -(input.graceSeconds ?? ARTIFACT_BLOB_GRACE_SECONDS)));
  const staleBefore = formatTimestamp(addSeconds(input.now, -(input.leaseSeconds ?? ARTIFACT_BLOB_MARK_LEASE_SECONDS)));
  const rowLocks = storage.capabilities.rowLocks;
  const stale = await storage.db
    .selectFrom("artifact_blobs")
    .select(["sha256", "bytes"])
    .where("state", "=", "deleting")
    .where("marked_at", "<", staleBefore)
    .orderBy("marked_at")
    .limit(limit)
    .execute();
  const candidates = await storage.db
    .selectFrom("artifact_blobs as b")
    .select(["b.sha256", "b.bytes"])
    .where("b.state", "=", "held")
    .where("b.touched_at", "<", cutoff)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom("artifacts as a")
            .select("a.sha256")
            .whereRef("a.sha256", "=", "b.sha256")
            .where("a.expires_at", ">", cutoff),
        ),
      ),
    )
    .orderBy("b.touched_at")
    .limit(limit - stale.length)
    .execute();

  let deleted = 0;
  let deletedBytes = 0;
  let shared = 0;
  const failures: { sha256: string; error: unknown }[] = [];
  /** Steps 3 and 4 for a digest this call holds the mark `token` of (kept on the tombstone: a put's ticket names it). */
  const deleteMarked = async (sha256: string, bytes: number, token: string) => {
    await blobs.delete(sha256);
    const finished = await storage.db
      .updateTable("artifact_blobs")
      .set({ state: "deleted", deleted_at: now, marked_at: null })
      .where("sha256", "=", sha256)
      .where("state", "=", "deleting")
      .where("mark_token", "=", token)
      .executeTakeFirst();
    if (finished.numUpdatedRows === 0n) {
      throw new Error(
        `the sweep's mark on ${sha256} was taken over before its delete finished (it outlived the ${input.leaseSeconds ?? ARTIFACT_BLOB_MARK_LEASE_SECONDS} s lease); bytes put since the takeover may have been deleted`,
      );
    }
    deleted += 1;
    deletedBytes += bytes;
  };

  for (const { sha256, bytes } of stale) {
    try {
      const token = randomUUID();
      const taken = await storage.transaction(async (trx) => {
        const row = await lockedRow(trx, sha256, rowLocks);
        if (row?.state !== "deleting" || row.marked_at === null || row.marked_at >= staleBefore) return false;
        await trx
          .updateTable("artifact_blobs")
          .set({ marked_at: now, mark_token: token })
          .where("sha256", "=", sha256)
          .execute();
        return true;
      });
      if (taken) await deleteMarked(sha256, bytes, token);
    } catch (error) {
      failures.push({ sha256, error });
    }
  }

  for (const { sha256, bytes } of candidates) {
    try {
      const token = randomUUID();
      const verdict = (await namedBySource(storage.db, sha256))
        ? await markShared(storage, sha256, rowLocks)
        : await storage.transaction(async (trx): Promise<"marked" | "shared" | "kept"> => {
            const row = await lockedRow(trx, sha256, rowLocks);
            if (row?.state !== "held" || row.touched_at >= cutoff) return "kept";
            const live = await trx
              .selectFrom("artifacts")
              .select("sha256")
              .where("sha256", "=", sha256)
              .where("expires_at", ">", cutoff)
              .limit(1)
              .executeTakeFirst();
            if (live !== undefined) return "kept";
            if (await namedByIndexedKind(trx, sha256)) {
              await trx.updateTable("artifact_blobs").set({ state: "shared" }).where("sha256", "=", sha256).execute();
              return "shared";
            }
            await trx
              .updateTable("artifact_blobs")
              .set({ state: "deleting", marked_at: now, mark_token: token })
              .where("sha256", "=", sha256)
              .execute();
            return "marked";
          });
      if (verdict === "shared") shared += 1;
      if (verdict === "marked") await deleteMarked(sha256, bytes, token);
    } catch (error) {
      failures.push({ sha256, error });
    }
  }
  return { examined: stale.length + candidates.length, deleted, deletedBytes, shared, failures };
}

async function lockedRow(trx: Kysely<Database>, sha256: string, rowLocks: boolean) {
  let query = trx
    .selectFrom("artifact_blobs")
    .select(["state", "touched_at", "marked_at"])
    .where("sha256", "=", sha256);
  if (rowLocks) query = query.forUpdate();
  return query.executeTakeFirst();
}

/** A `held` row a source names becomes `shared` (a conditional write: a mark that won stays). */
async function markShared(storage: Storage, sha256: string, rowLocks: boolean): Promise<"shared" | "kept"> {
  return storage.transaction(async (trx) => {
    const row = await lockedRow(trx, sha256, rowLocks);
    if (row?.state !== "held") return "kept";
    await trx.updateTable("artifact_blobs").set({ state: "shared" }).where("sha256", "=", sha256).execute();
    return "shared";
  });
}

/**
 * Whether a job's source manifest (`job_manifests`) or a source upload's manifest names the digest: JSON text,
 * so a substring scan (a digest is 64 hex digits, so a match is the digest; an archive entry's
 * own digest, which is not a blob, may match too, which only keeps bytes that could have gone).
 * Uploads reserved since migration 0040 keep their manifest compressed (`manifest` empty), which
 * no scan reads: a part such a manifest names is either held (its part row and the tenant's chunk
 * index name it: namedByIndexedKind) or not sent yet, and its put is fenced against the sweep
 * (blobs/sweep-fenced-blob-store.ts).
 */
async function namedBySource(db: Kysely<Database>, sha256: string): Promise<boolean> {
  const pattern = `%${sha256}%`;
  const job = await db
    .selectFrom("job_manifests")
    .select("job_id")
    .where("manifest", "like", pattern)
    .limit(1)
    .executeTakeFirst();
  if (job !== undefined) return true;
  const upload = await db
    .selectFrom("source_uploads")
    .select("upload")
    .where("manifest", "like", pattern)
    .limit(1)
    .executeTakeFirst();
  return upload !== undefined;
}

/** Whether Cargo output, a source part or the tenant chunk index names the digest (indexed by migration 0035). */
async function namedByIndexedKind(trx: Kysely<Database>, sha256: string): Promise<boolean> {
  const output = await trx
    .selectFrom("attempts")
    .select("job_id")
    .where("cargo_output_sha256", "=", sha256)
    .limit(1)
    .executeTakeFirst();
  if (output !== undefined) return true;
  const part = await trx
    .selectFrom("source_upload_parts")
    .select("upload")
    .where("sha256", "=", sha256)
    .limit(1)
    .executeTakeFirst();
  if (part !== undefined) return true;
  const chunk = await trx
    .selectFrom("source_chunks")
    .select("tenant_id")
    .where("sha256", "=", sha256)
    .limit(1)
    .executeTakeFirst();
  return chunk !== undefined;
}
