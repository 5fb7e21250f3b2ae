import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { sandboxIsolation } from "@kiln/host";
import { InMemoryExecutor } from "@kiln/host/testing";
import { type JobNotificationEvent, type JobNotifications, type Storage, startJobNotifications } from "@kiln/storage";
import { DIALECTS, type TestDatabase } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { sql } from "kysely";
import { buildApp } from "../src/build-app.js";
import { startLocalHost } from "../src/local-host.js";
import { bearer, hostProtocolOf, personWithToken, testBlobs } from "../src/testing/harness.js";
import { acceptJob, claimJob, listen, SseReader } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";

/**
 * Two kiln-servers on one PostgreSQL, as two apps in this process with storages of their own
 * (separate pools; A's notifications on a LISTEN connection of its own). A write reported
 * through B reaches a stream open on A. A's clock is a ManualClock that is never advanced, so
 * A's streams' fallback polls (timers on that clock) never fire: what reaches A's reader can only
 * have come through the notice B's transaction committed. No verdict depends on timing.
 */
const postgres = DIALECTS.find((d) => d.name === "postgres");

describe("streams woken across server processes (postgres)", { skip: postgres?.skip ?? "no postgres" }, () => {
  let database: TestDatabase;
  let storageA: Storage;
  let storageB: Storage;
  let appA: FastifyInstance;
  let notificationsA: JobNotifications;
  const eventsA: JobNotificationEvent[] = [];
  const clockA = new ManualClock("2026-11-22T08:00:00.000Z");
  const clockB = new ManualClock("2026-11-22T08:00:00.000Z");
  let baseA: string;
  /** B's side of the host protocol: the host service app B's /host/v1 routes run, over B's storage. */
  let protocolB: ReturnType<typeof hostProtocolOf>;

  before(async () => {
    assert.ok(postgres);
    database = await postgres.createDatabase();
    storageA = await database.open();
    storageB = await database.open();
    notificationsA = startJobNotifications(storageA, {
      clock: clockA,
      log: silentLogger,
      onEvent: (event) => eventsA.push(event),
    });
    appA = buildApp({
      storage: storageA,
      clock: clockA,
      version: "test",
      publicOrigin: "http://kiln.test",
      blobs: testBlobs(),
      notifications: notificationsA,
      checkResponses: true,
    });
    baseA = await listen(appA);
    protocolB = hostProtocolOf({ storage: storageB, blobs: testBlobs(), clock: clockB });
  });

  after(async () => {
    await appA?.close();
    await notificationsA?.stop();
    await storageA?.close();
    await storageB?.close();
    await database?.dispose();
  });

  const logStream = (jobId: string, token: string) =>
    SseReader.open(`${baseA}/api/jobs/${jobId}/logs/stream`, bearer(token));

  const textsOf = (event: Awaited<ReturnType<SseReader["next"]>>) => {
    assert.ok(event, "the stream ended");
    assert.equal(event.event, "log");
    return (JSON.parse(event.data) as { page: { records: { text: string }[] } }).page.records.map((r) => r.text);
  };

  it("a log line appended through B reaches a jobs.logs_stream open on A without A polling", async () => {
    const owner = await personWithToken(storageA, { role: "viewer" });
    const job = await acceptJob(storageA, { tenant: owner.tenant, now: clockA.now() });
    const lease = await claimJob(storageA, job.id, clockA.now());
    const reader = await logStream(job.id, owner.token);
    try {
      assert.deepEqual(textsOf(await reader.next()), [], "the first page, empty");
      const answer = await protocolB.appendLogs(lease, [
        { stream: "stdout", at: clockB.now().toISOString(), text: "compiled on B" },
      ]);
      assert.equal(answer, "accepted");
      assert.deepEqual(textsOf(await reader.next()), ["compiled on B"]);
    } finally {
      reader.close();
    }
  });

  it("a job's status moved through B reaches an events.stream open on A without A polling", async () => {
    const owner = await personWithToken(storageA, { role: "viewer" });
    const cookie = await signIn(appA, storageA, owner.email, undefined, clockA);
    const job = await acceptJob(storageA, { tenant: owner.tenant, now: clockA.now() });
    const reader = await SseReader.open(`${baseA}/api/events`, { cookie: `kiln_session=${cookie}` });
    try {
      assert.equal(reader.status, 200);
      // B's host service places the job: queued → running, committed on B's connection.
      const placement = await protocolB.claim("host-b", 64);
      assert.equal(placement?.jobId, job.id);
      const frame = await reader.next();
      assert.ok(frame);
      const event = JSON.parse(frame.data) as { job: string; status: string; previous_status: string };
      assert.deepEqual([event.job, event.previous_status, event.status], [job.id, "queued", "running"]);
    } finally {
      reader.close();
    }
  });

  it("A's listening connection terminated: the drop is reported, listening is re-made, and B's next line reaches A", async () => {
    const owner = await personWithToken(storageA, { role: "viewer" });
    const job = await acceptJob(storageA, { tenant: owner.tenant, now: clockA.now() });
    const lease = await claimJob(storageA, job.id, clockA.now());
    const reader = await logStream(job.id, owner.token);
    try {
      assert.deepEqual(textsOf(await reader.next()), []);
      // B subscribes to nothing, so the one LISTEN connection on the database is A's.
      const listening = await sql<{ pid: number }>`
        select pid from pg_stat_activity
        where datname = current_database() and application_name = 'kiln-listen'`.execute(storageB.db);
      assert.equal(listening.rows.length, 1);
      const before = eventsA.length;
      await sql`select pg_terminate_backend(${listening.rows[0]?.pid})`.execute(storageB.db);
      // Listening is re-made at once after a loss (the clock only spaces retries after a failure).
      await waitFor(() => eventsA.slice(before).some((e) => e.type === "notifications:restored"));
      assert.deepEqual(
        eventsA.slice(before).map((e) => e.type),
        ["notifications:lost", "notifications:restored"],
      );
      assert.equal(notificationsA.listening, true);

      assert.equal(
        await protocolB.appendLogs(lease, [
          { stream: "stdout", at: clockB.now().toISOString(), text: "after the drop" },
        ]),
        "accepted",
      );
      assert.deepEqual(textsOf(await reader.next()), ["after the drop"]);
    } finally {
      reader.close();
    }
  });

  it("a job queued through B wakes A's local host, whose claim poll (on A's clock) never fires", async () => {
    const owner = await personWithToken(storageA, { role: "viewer" });
    const root = mkdtempSync(join(tmpdir(), "kiln-claim-wake-"));
    const host = await startLocalHost(
      { storage: storageA, blobs: testBlobs(), clock: clockA, log: silentLogger, notifications: notificationsA },
      {
        hostId: "a-local",
        workRoot: join(root, "attempts"),
        lineageRoot: null,
        scratchRoot: null,
        isolation: sandboxIsolation({ executor: new InMemoryExecutor(clockA) }),
        crateCache: { root: join(root, "crates"), cratesIoIndex: "file:///nonexistent-index" },
      },
    );
    try {
      // The host's first claim at start found nothing; its next poll is a timer on A's clock.
      await notificationsA.ready();
      const job = await acceptJob(storageB, { tenant: owner.tenant, now: clockB.now() });
      await waitForRow(async () => {
        const attempt = await storageB.db
          .selectFrom("attempts")
          .select("host_id")
          .where("job_id", "=", job.id)
          .executeTakeFirst();
        return attempt?.host_id === "a-local";
      });
    } finally {
      await host.stop();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

/** Waits for what the code under test writes (read every few ms; the test's own timeout bounds it). */
async function waitForRow(read: () => Promise<boolean>): Promise<void> {
  while (!(await read())) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** Waits for what the code under test reports (checked every few ms; the test's own timeout bounds it). */
async function waitFor(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}
