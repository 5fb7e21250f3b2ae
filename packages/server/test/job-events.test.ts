import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JobEvent, operationById, systemClock } from "@kiln/contract";
import { latestJobEventSequence, recordTransition } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import Fastify from "fastify";
import { bearer, personWithToken } from "../src/testing/harness.js";
import {
  acceptJob,
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
import type { HandlerContext } from "../src/web/http/handler.js";
import { serveEventStream } from "../src/web/http/sse-stream.js";

interface Event {
  sequence: number;
  job: string;
  repository: string;
  status: string;
  previous_status: string | null;
  at: string;
}

/** The JobEvents of received frames, each checked against the contract and its id. */
function jobEvents(frames: readonly (ReceivedEvent | null)[]): Event[] {
  return frames.map((frame) => {
    assert.ok(frame, "the stream ended");
    assert.equal(frame.event, "job");
    const event = JSON.parse(frame.data) as Event;
    assertSchema(JobEvent, event);
    assert.equal(frame.id, String(event.sequence));
    return event;
  });
}

const take = async (reader: SseReader, n: number) => {
  const frames = [];
  for (let i = 0; i < n; i++) frames.push(await reader.next());
  return jobEvents(frames);
};

for (const dialect of DIALECTS) {
  describe(`job event streams (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: JobsTestApp;
    let base: string;
    before(async () => {
      t = await jobsTestApp(await dialect.openFresh());
      base = await listen(t.app);
    });
    after(() => t.close());

    const open = (token: string, query = "", headers: Record<string, string> = {}) =>
      SseReader.open(`${base}/api/cli/events${query}`, { ...bearer(token), ...headers });

    /** A job accepted, placed and passed: three events queued → running → passed. */
    const runJob = async (tenant: string, repository = "acme/widget") => {
      const job = await acceptJob(t.storage, { tenant, now: t.clock.now(), repository });
      const lease = await claimJob(t.storage, job.id, t.clock.now());
      await finishJob(t.storage, t.blobs, lease, { now: t.clock.now() });
      return job.id;
    };

    it("cli.events sends the tenant's job events from when it opens, in sequence order, and only the tenant's", async () => {
      const owner = await personWithToken(t.storage, { role: "viewer" });
      const other = await personWithToken(t.storage, { role: "owner" });
      await runJob(owner.tenant); // before the stream opens: not sent
      const reader = await open(owner.token);
      assert.equal(reader.status, 200);
      assert.match(String(reader.header("content-type")), /^text\/event-stream/);
      assert.equal(reader.header("cache-control"), "no-cache");
      await reader.quiet(400);
      await runJob(other.tenant);
      const job = await runJob(owner.tenant, "acme/gadget");
      await runJob(other.tenant);
      const events = await take(reader, 3);
      assert.deepEqual(
        events.map((e) => [e.job, e.repository, e.previous_status, e.status]),
        [
          [job, "acme/gadget", null, "queued"],
          [job, "acme/gadget", "queued", "running"],
          [job, "acme/gadget", "running", "passed"],
        ],
      );
      // The tenant's own numbers: its first job took 1–3, and the other tenant's moves none.
      assert.deepEqual(
        events.map((e) => e.sequence),
        [4, 5, 6],
      );
      await reader.quiet(400); // the other tenant's events never arrive
      assert.equal(t.openStreams("cli.events"), 1);
      reader.close();
      await eventually(() => t.openStreams("cli.events") === 0);
    });

    it("resumes after `after`, or after Last-Event-ID (which wins), with no gap and no duplicate", async () => {
      const owner = await personWithToken(t.storage, { role: "viewer" });
      const first = await runJob(owner.tenant);
      const second = await runJob(owner.tenant);
      const everything = await open(owner.token, "?after=0");
      const all = await take(everything, 6);
      everything.close();
      assert.deepEqual(
        all.map((e) => [e.job, e.status]),
        [
          [first, "queued"],
          [first, "running"],
          [first, "passed"],
          [second, "queued"],
          [second, "running"],
          [second, "passed"],
        ],
      );
      for (const [i, seen] of all.entries()) {
        const byAfter = await open(owner.token, `?after=${seen.sequence}`);
        const byHeader = await open(owner.token, "?after=0", { "last-event-id": String(seen.sequence) });
        for (const reader of [byAfter, byHeader]) {
          const rest = await take(reader, all.length - i - 1);
          assert.deepEqual([...all.slice(0, i + 1), ...rest], all, `resumed after event ${i}`);
          await reader.quiet(300);
          reader.close();
        }
      }
      // Later events reach a resumed stream as they happen.
      const resumed = await open(owner.token, `?after=${all.at(-1)?.sequence}`);
      const third = await runJob(owner.tenant);
      assert.deepEqual(
        (await take(resumed, 3)).map((e) => [e.job, e.status]),
        [
          [third, "queued"],
          [third, "running"],
          [third, "passed"],
        ],
      );
      resumed.close();
      await eventually(() => t.openStreams("cli.events") === 0);
    });

    it("an invalid `after` or Last-Event-ID is invalid_request", async () => {
      const owner = await personWithToken(t.storage, { role: "viewer" });
      for (const [query, headers] of [
        ["?after=-1", {}],
        ["?after=next", {}],
        ["?after=1.5", {}],
        ["", { "last-event-id": "l3" }],
        ["?after=2", { "last-event-id": "-4" }],
      ] as const) {
        const res = await t.app.inject({
          method: "GET",
          url: `/api/cli/events${query}`,
          headers: { ...bearer(owner.token), ...headers },
        });
        assert.equal(res.statusCode, 400, `${query} ${JSON.stringify(headers)}`);
        assert.equal(res.json().code, "invalid_request");
      }
    });

    it("events.stream sends the session's tenant's job events from when it opens; bearer credentials are refused", async () => {
      const owner = await personWithToken(t.storage, { role: "viewer" });
      const email = (
        await t.storage.db
          .selectFrom("persons")
          .select("email")
          .where("id", "=", owner.userId)
          .executeTakeFirstOrThrow()
      ).email;
      const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
      await runJob(owner.tenant);
      const reader = await SseReader.open(`${base}/api/events`, { cookie: `kiln_session=${cookie}` });
      assert.equal(reader.status, 200);
      await reader.quiet(300);
      const job = await runJob(owner.tenant);
      assert.deepEqual(
        (await take(reader, 3)).map((e) => [e.job, e.status]),
        [
          [job, "queued"],
          [job, "running"],
          [job, "passed"],
        ],
      );
      reader.close();
      await eventually(() => t.openStreams("events.stream") === 0);
      const bearerOnly = await t.app.inject({ method: "GET", url: "/api/events", headers: bearer(owner.token) });
      assert.equal(bearerOnly.statusCode, 403);
      assert.equal(bearerOnly.json().code, "session_required");
    });

    it("a move that commits after a later-recorded one is still delivered, in sequence order", {
      skip: dialect.name === "sqlite" ? "one writer at a time: commit order is sequence order" : false,
    }, async () => {
      const owner = await personWithToken(t.storage, { role: "viewer" });
      const slow = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const fast = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const after = await latestJobEventSequence(t.storage, owner.tenant);
      const transition = (jobId: string) => ({
        jobId,
        tenantId: owner.tenant,
        repository: "acme/widget",
        from: "queued",
        to: "queued",
        at: t.clock.now(),
        reason: "annotated",
      });
      // The slow transaction records its move first and is held open; the fast one commits
      // meanwhile and, numbered at its commit, takes the tenant's next sequence.
      let release = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let recorded = () => {};
      const slowRecorded = new Promise<void>((resolve) => {
        recorded = resolve;
      });
      const slowCommit = t.storage.transaction(async (trx) => {
        await recordTransition(trx, transition(slow.id));
        recorded();
        await released;
      });
      await slowRecorded;
      await t.storage.transaction((trx) => recordTransition(trx, transition(fast.id)));

      const reader = await open(owner.token, `?after=${after}`);
      const first = await take(reader, 1);
      release();
      await slowCommit;
      const events = [...first, ...(await take(reader, 1))];
      assert.deepEqual(
        events.map((e) => [e.job, e.sequence]),
        [
          [fast.id, after + 1],
          [slow.id, after + 2],
        ],
      );
      reader.close();
    });

    it("open streams end when the server shuts down", async () => {
      const own = await jobsTestApp(await dialect.openFresh());
      const url = await listen(own.app);
      const owner = await personWithToken(own.storage, { role: "viewer" });
      const reader = await SseReader.open(`${url}/api/cli/events`, bearer(owner.token));
      assert.equal(own.openStreams("cli.events"), 1);
      // Closing is not held up by the open stream: with the app's timers held, a close that
      // waited for the stream's next poll would never end.
      own.clock.timers = "manual";
      await own.close();
      assert.equal(own.openStreams("cli.events"), 0);
      assert.equal(await reader.next(), null, "the stream ended");
    });
  });
}

describe("event stream framing", () => {
  it("sends a comment line as heartbeat while idle, and frames events as event/id/data", async () => {
    const app = Fastify();
    app.get("/stream", (request, reply) =>
      serveEventStream(
        { op: operationById("cli.events"), request, reply, deps: { clock: systemClock } } as unknown as HandlerContext,
        async (stream) => {
          await stream.wait(130);
          await stream.send({ event: "job", id: "7", data: { text: "two\nlines" } });
          while (!stream.closed) await stream.wait(50);
        },
        { heartbeatMs: 50 },
      ),
    );
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    const res = await fetch(`${url}/stream`);
    const reader = res.body?.getReader();
    assert.ok(reader);
    let text = "";
    while (!/event: job[\s\S]*?\n\n/.test(text)) {
      const chunk = await reader.read();
      assert.equal(chunk.done, false);
      text += Buffer.from(chunk.value ?? []).toString();
    }
    await reader.cancel();
    await app.close();
    // The heartbeat (due at 50 ms) always fires before the event's wait (due at 130 ms) ends,
    // however late the loop runs both; how many fire depends on load, so at least one.
    assert.match(text, /^(: keep-alive\n\n)+event: job\nid: 7\ndata: \{"text":"two\\nlines"\}\n\n/);
  });
});
