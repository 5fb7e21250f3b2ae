// A tenant with many settled jobs, quickly: one job settled through the real storage verbs
// (accepted, claimed, finished with its metering), then copies of its rows inserted in batches,
// each copy a distinct job started one second after the one before.
import { join } from "node:path";
import { dist } from "./built-packages.mjs";

const { LocalBlobStore } = await import("@kiln/storage");
const { personWithToken } = await import(dist("src/testing/harness.js"));
const { acceptJob, claimJob, finishJob } = await import(dist("src/testing/job-fixtures.js"));

/** A viewer's new tenant and one job of `repository` settled there at `start` (30 s long); its rows to copy. */
export async function settleOneJob(storage, dataDir, { start, repository }) {
  const person = await personWithToken(storage, { role: "viewer", now: start });
  const seed = await acceptJob(storage, { tenant: person.tenant, now: start, repository });
  const lease = await claimJob(storage, seed.id, start);
  await finishJob(storage, new LocalBlobStore(join(dataDir, "blobs")), lease, {
    now: new Date(start.getTime() + 30_000),
    cargoOutput: null,
  });
  const job = await storage.db.selectFrom("jobs").selectAll().where("id", "=", seed.id).executeTakeFirstOrThrow();
  const attempt = await storage.db
    .selectFrom("attempts")
    .selectAll()
    .where("job_id", "=", seed.id)
    .executeTakeFirstOrThrow();
  const transitions = await storage.db
    .selectFrom("job_transitions")
    .selectAll()
    .where("job_id", "=", seed.id)
    .execute();
  return { person, job, attempt, transitions };
}

/**
 * Inserts copies `from` to `to - 1` of the settled job, `batch` jobs to a transaction; copy i
 * (id `<job>-<i, six digits>`) is accepted and started at `start` + i seconds and finishes 30 s
 * later. `finishAttempts` also moves the attempt's finish there (else it keeps the seed's);
 * `withTransitions` copies the job's transitions too. Resolves with the copies' ids.
 */
export async function insertCopies(
  storage,
  { job, attempt, transitions },
  { from, to, batch, start, finishAttempts = false, withTransitions = false },
) {
  const ids = [];
  for (let first = from; first < to; first += batch) {
    const jobs = [];
    const attempts = [];
    const moves = [];
    for (let i = first; i < Math.min(first + batch, to); i++) {
      const id = `${job.id}-${String(i).padStart(6, "0")}`;
      const at = (offset) => new Date(start.getTime() + i * 1000 + offset).toISOString();
      jobs.push({
        ...job,
        id,
        submission_key: null,
        accepted_at: at(0),
        queued_at: at(0),
        started_at: at(0),
        finished_at: at(30_000),
      });
      attempts.push({
        ...attempt,
        job_id: id,
        lease_token: `${attempt.lease_token}-${i}`,
        started_at: at(0),
        ...(finishAttempts ? { finished_at: at(30_000) } : {}),
      });
      if (withTransitions) for (const t of transitions) moves.push({ ...t, job_id: id });
    }
    await storage.db.transaction().execute(async (trx) => {
      await trx.insertInto("jobs").values(jobs).execute();
      await trx.insertInto("attempts").values(attempts).execute();
      if (withTransitions) await trx.insertInto("job_transitions").values(moves).execute();
    });
    for (const j of jobs) ids.push(j.id);
  }
  return ids;
}
