import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JobLogStreamFrame } from "@kiln/contract";
import { DIALECTS } from "@kiln/storage/testing";
import { bearer, hostProtocolOf, personWithToken } from "../src/testing/harness.js";
import {
  acceptJob,
  appendLines,
  assertSchema,
  claimJob,
  eventually,
  finishJob,
  type JobsTestApp,
  jobsTestApp,
  listen,
  type ReceivedEvent,
  SseReader,
} from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";

interface LogRecord {
  sequence: number;
  at: string;
  stream: string;
  attempt: number;
  text: string;
}
interface LogPage {
  records: LogRecord[];
  next_cursor: string | null;
  gaps: unknown[];
  pending: unknown[];
  watermarks: { durable: number; received: number };
  settled: boolean;
}

const lines = (from: number, count: number) => Array.from({ length: count }, (_, i) => `line ${from + i}`);

for (const dialect of DIALECTS) {
  describe(`job logs (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: JobsTestApp;
    let owner: { tenant: string; token: string; userId: string };
    let base: string;
    before(async () => {
      t = await jobsTestApp(await dialect.openFresh());
      owner = await personWithToken(t.storage, { role: "viewer" });
      base = await listen(t.app);
    });
    after(() => t.close());

    const page = async (id: string, query = "", token = owner.token) => {
      const res = await t.app.inject({ method: "GET", url: `/api/jobs/${id}/logs${query}`, headers: bearer(token) });
      return { status: res.statusCode, body: res.json() as LogPage & { code?: string } };
    };

    /** Every record from `cursor` on, in pages of `limit`, with the pages read. */
    const readAll = async (id: string, limit: number) => {
      const records: LogRecord[] = [];
      const pages: LogPage[] = [];
      let cursor: string | null = null;
      for (;;) {
        const res = await page(id, `?limit=${limit}${cursor === null ? "" : `&cursor=${cursor}`}`);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        pages.push(res.body);
        records.push(...res.body.records);
        if (res.body.settled) return { records, pages };
        assert.notEqual(res.body.next_cursor, null);
        if (res.body.records.length === 0) return { records, pages };
        cursor = res.body.next_cursor;
      }
    };

    const stream = (id: string, query = "", headers: Record<string, string> = {}) =>
      SseReader.open(`${base}/api/jobs/${id}/logs/stream${query}`, { ...bearer(owner.token), ...headers });

    const framesOf = (events: ReceivedEvent[], jobId: string) =>
      events.map((e) => {
        assert.equal(e.event, "log");
        const frame = JSON.parse(e.data) as { job: string; page: LogPage };
        assertSchema(JobLogStreamFrame, frame);
        assert.equal(frame.job, jobId);
        return { id: e.id, page: frame.page };
      });

    it("pages with cursor and limit; next_cursor continues while running; settled once terminal and complete", async () => {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const before = await page(job.id);
      assert.equal(before.status, 200);
      assert.deepEqual(before.body, {
        records: [],
        next_cursor: "l0",
        gaps: [],
        pending: [],
        watermarks: { durable: 0, received: 0 },
        settled: false,
      });

      const lease = await claimJob(t.storage, job.id, t.clock.now());
      await appendLines(t.storage, lease, lines(1, 12), t.clock.now());
      await appendLines(t.storage, lease, lines(13, 13), t.clock.now());

      const first = await page(job.id, "?limit=10");
      assert.deepEqual(
        first.body.records.map((r) => r.sequence),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      );
      assert.equal(first.body.records[0]?.text, "line 1");
      assert.equal(first.body.records[0]?.attempt, 1);
      assert.equal(first.body.records[4]?.stream, "stderr");
      assert.deepEqual(first.body.watermarks, { durable: 25, received: 25 });
      assert.equal(first.body.settled, false);
      assert.equal(first.body.next_cursor, "l10");

      const last = await page(job.id, "?limit=10&cursor=l20");
      assert.deepEqual(
        last.body.records.map((r) => r.text),
        lines(21, 5),
      );
      // Running: every record delivered, but more may follow.
      assert.equal(last.body.settled, false);
      assert.equal(last.body.next_cursor, "l25");
      const none = await page(job.id, "?cursor=l25");
      assert.deepEqual(none.body.records, []);
      assert.equal(none.body.next_cursor, "l25", "no new record: the request's own cursor");
      assert.equal(none.body.settled, false);

      await appendLines(t.storage, lease, lines(26, 2), t.clock.now());
      await finishJob(t.storage, t.blobs, lease, { now: t.clock.now() });

      const middle = await page(job.id, "?limit=10&cursor=l10");
      assert.equal(middle.body.settled, false, "terminal, but this page does not reach the last record");
      assert.equal(middle.body.next_cursor, "l20");
      const end = await page(job.id, "?limit=10&cursor=l20");
      assert.deepEqual(
        end.body.records.map((r) => r.sequence),
        [21, 22, 23, 24, 25, 26, 27],
      );
      assert.equal(end.body.settled, true);
      assert.equal(end.body.next_cursor, null);
      const after = await page(job.id, "?cursor=l27");
      assert.deepEqual(after.body.records, []);
      assert.equal(after.body.settled, true);
      assert.equal(after.body.next_cursor, null);

      const all = await readAll(job.id, 4);
      assert.deepEqual(
        all.records.map((r) => r.sequence),
        Array.from({ length: 27 }, (_, i) => i + 1),
      );
      assert.equal(all.pages.filter((p) => p.settled).length, 1);
    });

    it("the page size defaults to 100 and is bounded 1 to 1000", async () => {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const lease = await claimJob(t.storage, job.id, t.clock.now());
      await appendLines(t.storage, lease, lines(1, 150), t.clock.now());
      const byDefault = await page(job.id);
      assert.equal(byDefault.body.records.length, 100);
      assert.equal(byDefault.body.next_cursor, "l100");
      assert.equal((await page(job.id, "?limit=1")).body.records.length, 1);
      assert.equal((await page(job.id, "?limit=1000")).body.records.length, 150);
      for (const limit of ["0", "1001", "-1", "ten", "2.5"]) {
        const res = await page(job.id, `?limit=${limit}`);
        assert.equal(res.status, 400, limit);
        assert.equal(res.body.code, "invalid_request");
        assert.match(String((res.body as { detail?: string }).detail), /limit/);
      }
      await finishJob(t.storage, t.blobs, lease, { now: t.clock.now() });
    });

    it("a cursor it did not issue is invalid_request", async () => {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      for (const cursor of ["abc", "l-1", "l1.5", "a3", "l"]) {
        const res = await page(job.id, `?cursor=${encodeURIComponent(cursor)}`);
        assert.equal(res.status, 400, cursor);
        assert.equal(res.body.code, "invalid_request");
        const streamed = await t.app.inject({
          method: "GET",
          url: `/api/jobs/${job.id}/logs/stream?cursor=${encodeURIComponent(cursor)}`,
          headers: bearer(owner.token),
        });
        assert.equal(streamed.statusCode, 400, cursor);
        assert.equal(streamed.json().code, "invalid_request");
      }
      const header = await t.app.inject({
        method: "GET",
        url: `/api/jobs/${job.id}/logs/stream`,
        headers: { ...bearer(owner.token), "last-event-id": "nope" },
      });
      assert.equal(header.statusCode, 400);
      assert.match(header.json().detail, /last-event-id/);
    });

    it("another tenant's job, and an unknown one, is not_found on the page and the stream", async () => {
      const other = await personWithToken(t.storage, { role: "owner" });
      const theirs = await acceptJob(t.storage, { tenant: other.tenant, now: t.clock.now() });
      const lease = await claimJob(t.storage, theirs.id, t.clock.now());
      await appendLines(t.storage, lease, ["secret"], t.clock.now());
      for (const id of [theirs.id, "j_unknown"]) {
        const res = await page(id);
        assert.equal(res.status, 404);
        assert.equal(res.body.code, "not_found");
        const streamed = await t.app.inject({
          method: "GET",
          url: `/api/jobs/${id}/logs/stream`,
          headers: bearer(owner.token),
        });
        assert.equal(streamed.statusCode, 404);
        assert.equal(streamed.json().code, "not_found");
      }
      assert.equal((await page(theirs.id, "", other.token)).body.records[0]?.text, "secret");
      await finishJob(t.storage, t.blobs, lease, { now: t.clock.now() });
    });

    it("a dashboard session reads the log too", async () => {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const email = (
        await t.storage.db
          .selectFrom("persons")
          .select("email")
          .where("id", "=", owner.userId)
          .executeTakeFirstOrThrow()
      ).email;
      const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
      const res = await t.app.inject({
        method: "GET",
        url: `/api/jobs/${job.id}/logs`,
        headers: { cookie: `kiln_session=${cookie}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().settled, false);
    });

    it("the stream follows a live job page by page, equals the paged log, and ends after the settled page", async () => {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const lease = await claimJob(t.storage, job.id, t.clock.now());
      await appendLines(t.storage, lease, lines(1, 30), t.clock.now());

      const reader = await stream(job.id, "?limit=7");
      assert.equal(reader.status, 200);
      assert.match(String(reader.header("content-type")), /^text\/event-stream/);
      assert.equal(reader.header("cache-control"), "no-cache");
      assert.equal(reader.header("connection"), "keep-alive");
      assert.equal(reader.header("x-accel-buffering"), "no");
      const early: ReceivedEvent[] = [];
      // 30 records in pages of 7: five frames at once, then the stream waits for more.
      for (let i = 0; i < 5; i++) early.push((await reader.next()) as ReceivedEvent);
      await reader.quiet(500);
      await appendLines(t.storage, lease, lines(31, 9), t.clock.now());
      early.push((await reader.next()) as ReceivedEvent);
      await appendLines(t.storage, lease, lines(40, 3), t.clock.now());
      await finishJob(t.storage, t.blobs, lease, { now: t.clock.now() });
      const events = [...early, ...(await reader.rest())];

      const frames = framesOf(events, job.id);
      const streamed = frames.flatMap((f) => f.page.records);
      const paged = (await readAll(job.id, 13)).records;
      assert.equal(paged.length, 42);
      assert.deepEqual(streamed, paged);
      // Each frame's id is the cursor after its page; only the last frame settles.
      let position = 0;
      for (const [i, frame] of frames.entries()) {
        position = frame.page.records.at(-1)?.sequence ?? position;
        assert.equal(frame.id, `l${position}`);
        assert.equal(frame.page.settled, i === frames.length - 1);
        assert.equal(frame.page.next_cursor, frame.page.settled ? null : `l${position}`);
      }

      // Resuming from any id sent (the header winning over a stale cursor) continues with
      // exactly the records after it.
      for (const [i, frame] of frames.entries()) {
        const resumed = await stream(job.id, "?limit=5&cursor=l0", { "last-event-id": String(frame.id) });
        const rest = framesOf(await resumed.rest(), job.id);
        const delivered = frames.slice(0, i + 1).flatMap((f) => f.page.records);
        assert.deepEqual([...delivered, ...rest.flatMap((f) => f.page.records)], paged, `resumed after frame ${i}`);
        assert.equal(rest.at(-1)?.page.settled, true);
        if (i === frames.length - 1) {
          assert.equal(rest.length, 1, "from the settled id: one empty settled page");
          assert.deepEqual(rest[0]?.page.records, []);
        }
      }
      // `cursor` alone resumes the same way.
      const byCursor = framesOf(await (await stream(job.id, "?cursor=l20&limit=1000")).rest(), job.id);
      assert.deepEqual(
        byCursor.flatMap((f) => f.page.records),
        paged.slice(20),
      );
    });

    it("with this process's host, the stream sends new lines and the end at once, not at its next poll", async () => {
      // The host service's writes notify the job's streams (storage notifications). The stream's
      // poll runs on the app's clock, its timers manual here and never advanced: no poll ever
      // fires, so the last line and the settled page can reach the reader only through the nudge.
      const protocol = hostProtocolOf({ storage: t.storage, blobs: t.blobs, clock: t.clock });
      for (let i = 0; i < 3; i++) {
        const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
        const lease = await claimJob(t.storage, job.id, t.clock.now());
        const reader = await stream(job.id);
        await reader.next();
        t.clock.timers = "manual";
        try {
          assert.equal(
            await protocol.appendLogs(lease, [
              { stream: "stdout", at: t.clock.now().toISOString(), text: `last line ${i}` },
            ]),
            "accepted",
          );
          const finished = await protocol.finish(lease, {
            outcome: "passed",
            exitCode: 0,
            failure: null,
            report: { phases: [], crates: [], tests: [], unit: null },
            cargoOutput: null,
            lineageSave: null,
            artifacts: [],
          });
          assert.equal(finished, "finished");
          const rest = framesOf(await reader.rest(), job.id);
          assert.equal(rest.at(-1)?.page.settled, true);
          assert.ok(rest.flatMap((f) => f.page.records).some((r) => r.text === `last line ${i}`));
        } finally {
          t.clock.timers = "real";
        }
      }
    });

    it("a stream the client leaves ends on the server", async () => {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const lease = await claimJob(t.storage, job.id, t.clock.now());
      const reader = await stream(job.id);
      const first = framesOf([(await reader.next()) as ReceivedEvent], job.id)[0];
      assert.deepEqual(first?.page.records, [], "the first page is sent at once, even empty");
      assert.equal(first?.id, "l0");
      assert.equal(t.openStreams("jobs.logs_stream"), 1);
      reader.close();
      await eventually(() => t.openStreams("jobs.logs_stream") === 0);
      await finishJob(t.storage, t.blobs, lease, { now: t.clock.now() });
    });
  });
}
