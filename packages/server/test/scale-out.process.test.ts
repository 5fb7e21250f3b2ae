/**
 * Scale-out end to end (issue 17): two real `kiln-server serve` processes (A and B, no embedded
 * host) on one PostgreSQL database and one S3-compatible bucket (s3rver), and two real
 * `kiln-host` processes (the package's bin: bubblewrap sandbox, real cargo) — builder-1 speaking
 * the host protocol over HTTPS with mutual TLS to A's host listener, builder-2 to B's — every
 * one a separate process talking over loopback (scale-out-cluster.ts).
 *
 * - 20 real jobs of a small real crate (one unit test in a binary; each to a repository of its own), submitted alternately
 *   through A and B, all pass, and both hosts ran some.
 * - kill -9 of the host running a job: the job passes as attempt 2 on the other host, with one
 *   terminal transition, one terminal event, one settlement, and in the usage export one
 *   record per attempt with the killed one credited in full as `infrastructure`.
 * - operator.hosts.drain of builder-1: the next jobs all run on builder-2.
 * - jobs.logs_stream opened on A for a job queued while no host admits work, then placed on
 *   builder-2 (whose lines reach kiln through B): its cargo lines arrive on A's stream, which
 *   ends with the settled page.
 *
 * No verdict rests on timing: every step waits for its condition (bounds are hang guards
 * only). How fast lines cross servers is measured in bench/stream-latency.mjs, jobs per minute
 * in bench/jobs-per-minute.mjs (docs/scale-out.md).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { DIALECTS } from "@kiln/storage/testing";
import { crate, type Doc, explainJob, Jobs, transitionsTo } from "../src/testing/e2e-jobs.js";
import { type ScaleOutCluster, startScaleOutCluster } from "./scale-out-cluster.js";

const postgres = DIALECTS.find((d) => d.name === "postgres");
/** KILN_SCALE_OUT_JOBS: fewer while developing (the issue asks for 20). */
const JOBS = Number(process.env.KILN_SCALE_OUT_JOBS ?? 20);
/** Only so that a hung run fails by name; never a verdict. */
const HANG_GUARD_MS = 40 * 60_000;

/**
 * The small real crate of the spread, drain and stream jobs: one binary with one unit test, so
 * that `cargo test` compiles and links one test binary (what the scale-out claims rest on is
 * that each job passes, where, and how its lines travel, not how much cargo compiles).
 */
const SMALL_CRATE = crate("widget", {
  "src/main.rs": "fn main() {}\n\n#[test]\nfn passes() {\n    assert_eq!(1 + 1, 2);\n}\n",
});

/** A test that sleeps, so a kill finds the attempt still running once cargo has started. */
const SLOW_CRATE = crate("sleeper", {
  "src/lib.rs":
    "pub fn one() -> u32 { 1 }\n\n#[test]\nfn sleeps_then_passes() {\n    std::thread::sleep(std::time::Duration::from_secs(20));\n    assert_eq!(one(), 1);\n}\n",
});

/** Waits for `condition` (polled), failing with `explain()` after the hang guard. */
async function until<T>(
  condition: () => Promise<T | undefined | null | false>,
  explain: () => Promise<string> | string,
): Promise<T> {
  const deadline = Date.now() + HANG_GUARD_MS;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${await explain()}`);
    await sleep(250);
  }
}

/** jobs.logs_stream over HTTP: the `log` frames as they arrive. */
function openLogStream(baseUrl: string, token: string, jobId: string) {
  const aborted = new AbortController();
  const response = fetch(`${baseUrl}/api/jobs/${jobId}/logs/stream`, {
    headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
    signal: aborted.signal,
  });
  const decoder = new TextDecoder();
  let buffered = "";
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  return {
    /** The next frame's data, or null once the stream ended. */
    async next(): Promise<Doc | null> {
      if (reader === undefined) {
        const res = await response;
        if (res.status !== 200) assert.fail(`jobs.logs_stream answered ${res.status}: ${await res.text()}`);
        assert.ok(res.body !== null);
        reader = res.body.getReader();
      }
      for (;;) {
        const end = buffered.indexOf("\n\n");
        if (end >= 0) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const lines = block.split("\n");
          if (!lines.includes("event: log")) continue;
          const data = lines
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).trimStart())
            .join("\n");
          return JSON.parse(data) as Doc;
        }
        const { done, value } = await reader.read();
        if (done) return null;
        buffered += decoder.decode(value, { stream: true });
      }
    },
    close: () => aborted.abort(),
  };
}

describe("two kiln-servers and two kiln-hosts on PostgreSQL and S3 (separate processes, mutual TLS)", {
  skip: postgres?.skip ?? false,
}, () => {
  let cluster: ScaleOutCluster;
  let token: string;
  let tenant: string;
  /** Through A (index 0) and B (index 1). */
  let through: [Jobs, Jobs];
  let submitted = 0;

  /** Submits `files` to `repository` through server `server` (default: alternately A and B). */
  const submit = async (files = SMALL_CRATE, repository = "acme/widget", server = submitted % 2) => {
    submitted += 1;
    const jobs = new Jobs(cluster.api(server, token), repository);
    return jobs.submit(files, `scale-out-${submitted}`);
  };
  const attemptsOf = (jobIds: readonly string[]) =>
    cluster.storage.db
      .selectFrom("attempts")
      .select(["job_id", "number", "host_id", "state", "outcome"])
      .where("job_id", "in", jobIds)
      .orderBy("job_id")
      .orderBy("number")
      .execute();
  const statusOf = async (jobId: string) =>
    (await cluster.storage.db.selectFrom("jobs").select("status").where("id", "=", jobId).executeTakeFirstOrThrow())
      .status;
  /** What to show when something does not come: the job, and the tail of every process's output. */
  const explain = async (jobId?: string) =>
    [
      jobId === undefined ? "" : await explainJob(through[0], jobId),
      ...cluster.servers.map((s) => `--- server ${s.name}\n${s.output().slice(-3000)}`),
      ...cluster.hosts.map((h) => `--- ${h.id}\n${h.output().slice(-3000)}`),
    ].join("\n");
  const settled = (jobId: string) =>
    until(
      async () => {
        const status = await statusOf(jobId);
        return TERMINAL_JOB_STATUSES.has(status) ? status : undefined;
      },
      () => explain(jobId),
    );
  /** Terminal transitions and terminal job events of `jobId`, and its settlement's status. */
  const endings = async (jobId: string) => {
    const db = cluster.storage.db;
    const transitions = await db
      .selectFrom("job_transitions")
      .select("to_status")
      .where("job_id", "=", jobId)
      .execute();
    const events = await db.selectFrom("job_events").select("status").where("job_id", "=", jobId).execute();
    const job = await db.selectFrom("jobs").select(["settlement"]).where("id", "=", jobId).executeTakeFirstOrThrow();
    return {
      transitions: transitions.filter((t) => TERMINAL_JOB_STATUSES.has(t.to_status)).map((t) => t.to_status),
      events: events.filter((e) => TERMINAL_JOB_STATUSES.has(e.status)).map((e) => e.status),
      settlement: job.settlement === null ? null : (JSON.parse(job.settlement) as { status?: string }).status,
    };
  };

  before(async () => {
    cluster = await startScaleOutCluster({ servers: 2, hosts: 2 });
    ({ tenant, token } = await cluster.tenant());
    await cluster.onboard(tenant, "acme/widget");
    await cluster.onboard(tenant, "acme/sleeper");
    through = [new Jobs(cluster.api(0, token)), new Jobs(cluster.api(1, token))];
  });
  after(async () => {
    await cluster?.close();
  });

  it("the cluster: builder-1 speaks to A's host listener, builder-2 to B's; both serve", async () => {
    assert.deepEqual(
      cluster.hosts.map((h) => [h.id, h.server.name]),
      [
        ["builder-1", "A"],
        ["builder-2", "B"],
      ],
    );
    const op = await cluster.operator(0);
    const listed = await op.get("/operator/api/hosts");
    assert.equal(listed.status, 200, listed.body);
    const hosts = (listed.json() as Doc[]).filter((h) => String(h.host).startsWith("builder-"));
    assert.deepEqual(hosts.map((h) => [h.host, h.state]).sort(), [
      ["builder-1", "serving"],
      ["builder-2", "serving"],
    ]);
  });

  it(`${JOBS} real jobs submitted through both servers all pass, spread over both hosts`, async (t) => {
    // A repository each: no job has a lineage another host holds (placement by lineage would
    // leave it to that host for KILN_LINEAGE_AFFINITY_SECONDS), so every job goes to whichever
    // host asks first, and both ask while jobs wait.
    const repositories = Array.from({ length: JOBS }, (_, i) => `acme/spread-${i + 1}`);
    for (const repository of repositories) await cluster.onboard(tenant, repository);
    const ids: string[] = [];
    for (const repository of repositories) ids.push(await submit(SMALL_CRATE, repository));
    const statuses: string[] = [];
    for (const id of ids) statuses.push(await settled(id));
    const failed = ids.filter((_, i) => statuses[i] !== "passed");
    assert.deepEqual(failed, [], await explain(failed[0]));
    const attempts = await attemptsOf(ids);
    const passedOn = new Map<string, number>();
    for (const a of attempts) {
      if (a.outcome === "passed") passedOn.set(a.host_id, (passedOn.get(a.host_id) ?? 0) + 1);
    }
    t.diagnostic(`passed attempts per host: ${JSON.stringify(Object.fromEntries(passedOn))}`);
    assert.deepEqual([...passedOn.keys()].sort(), ["builder-1", "builder-2"], JSON.stringify([...passedOn]));
    for (const id of ids) {
      assert.deepEqual(await endings(id), { transitions: ["passed"], events: ["passed"], settlement: "passed" }, id);
    }
  });

  it("kill -9 of the host running a job: the job passes as attempt 2 on the other host, ends and settles once, the killed attempt credited", async () => {
    // The kill must land while attempt 1 runs. Its test sleeps 20 s after cargo starts, so
    // it nearly always does; should attempt 1 have finished first anyway (a stalled test
    // process), the host is restarted and another job tried — the verdict never rests on it.
    let jobId: string | undefined;
    let killed: string | undefined;
    for (let tries = 0; tries < 3 && jobId === undefined; tries++) {
      const id = await submit(SLOW_CRATE, "acme/sleeper", tries % 2);
      const running = await until(
        async () => {
          const [attempt] = (await attemptsOf([id])).filter((a) => a.number === 1 && a.state === "running");
          if (attempt === undefined) return undefined;
          const log = await through[1].api("GET", `/api/jobs/${id}/logs?limit=1000`);
          assert.equal(log.status, 200, log.body);
          const cargoStarted = (log.json().records as Doc[]).some(
            (r) => r.attempt === 1 && r.stream === "system" && String(r.text).startsWith("kiln: cargo test"),
          );
          return cargoStarted ? attempt : undefined;
        },
        () => explain(id),
      );
      const host = cluster.hosts.find((h) => h.id === running.host_id);
      assert.ok(host !== undefined, running.host_id);
      await host.kill();
      const first = await until(
        async () => (await attemptsOf([id])).find((a) => a.number === 1 && a.state !== "running"),
        () => explain(id),
      );
      if (first.state === "lost") {
        jobId = id;
        killed = host.id;
      } else {
        await settled(id);
        await host.start();
      }
    }
    assert.ok(jobId !== undefined && killed !== undefined, "a kill landed while attempt 1 ran (3 tries)");
    const survivor = cluster.hosts.find((h) => h.id !== killed);
    assert.ok(survivor !== undefined);

    assert.equal(await settled(jobId), "passed", await explain(jobId));
    const attempts = await attemptsOf([jobId]);
    assert.deepEqual(
      attempts.map((a) => [a.number, a.host_id, a.state, a.outcome]),
      [
        [1, killed, "lost", "lost"],
        [2, survivor.id, "finished", "passed"],
      ],
    );
    const job = await through[0].get(jobId);
    assert.deepEqual(transitionsTo(job), ["queued", "running", "queued", "running", "passed"]);
    assert.match((job.transitions as Doc[])[2].reason, /attempt 1 lost/);
    assert.deepEqual(await endings(jobId), { transitions: ["passed"], events: ["passed"], settlement: "passed" });
    const evidence = await through[1].evidence(jobId);
    assert.equal(evidence.settlement?.status, "passed", JSON.stringify(evidence.settlement));
    assert.equal(evidence.settlement.attempts, 2);

    // Usage (docs/usage-and-billing.md): one metering record per attempt; the attempt lost with
    // its host credited in full as `infrastructure`; attempt 2 charged, not credited.
    const period = new Date(Date.parse(job.accepted_at)).toISOString().slice(0, 7);
    const records: Doc[] = [];
    const adjustments: Doc[] = [];
    let url = `/api/usage/export?period=${period}`;
    for (;;) {
      const page = await through[0].api("GET", url);
      assert.equal(page.status, 200, page.body);
      records.push(...(page.json().records as Doc[]).filter((r) => r.job === jobId));
      adjustments.push(...(page.json().adjustments as Doc[]).filter((a) => a.job === jobId));
      const next = page.json().next_cursor as string | null;
      if (next === null) break;
      url = `/api/usage/export?cursor=${encodeURIComponent(next)}`;
    }
    assert.deepEqual(
      records.map((r) => [r.attempt, r.outcome]),
      [
        [1, "lost"],
        [2, "passed"],
      ],
    );
    const [lost, charged] = records;
    assert.ok(lost.vcpu_seconds > 0 && charged.vcpu_seconds > 0, JSON.stringify(records));
    assert.deepEqual(
      adjustments.map((a) => [a.kind, a.attempt, a.vcpu_seconds]),
      [["infrastructure", 1, -lost.vcpu_seconds]],
    );
    assert.equal(charged.vcpu_seconds, evidence.usage.vcpu_seconds);

    // The killed host comes back (its certificate kept in its data dir) for what follows.
    await cluster.hosts.find((h) => h.id === killed)?.start();
  });

  it("operator.hosts.drain of builder-1: the next jobs all run on builder-2", async () => {
    const op = await cluster.operator(1);
    const drained = await op.post("/operator/api/hosts/builder-1/drain");
    assert.equal(drained.status, 200, drained.body);
    assert.ok(["draining", "drained"].includes((drained.json() as Doc).state), drained.body);
    // Once builder-1 runs nothing, its drain is complete.
    await until(
      async () =>
        (await cluster.storage.db
          .selectFrom("attempts")
          .select("job_id")
          .where("host_id", "=", "builder-1")
          .where("state", "=", "running")
          .executeTakeFirst()) === undefined,
      () => explain(),
    );
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await submit());
    for (const id of ids) assert.equal(await settled(id), "passed", await explain(id));
    assert.deepEqual(
      (await attemptsOf(ids)).map((a) => [a.host_id, a.outcome]),
      ids.map(() => ["builder-2", "passed"]),
    );
  });

  it("a log stream on server A delivers the lines builder-2 reports through server B, and ends settled", async () => {
    const op = await cluster.operator(0);
    // No host admits work, so the job waits, queued, while the stream opens.
    const closed = await op.post("/operator/api/hosts/builder-2/drain");
    assert.equal(closed.status, 200, closed.body);
    const jobId = await submit(SMALL_CRATE, "acme/widget", 1);
    const stream = openLogStream(cluster.servers[0]?.url ?? "", token, jobId);
    try {
      const opening = await stream.next();
      assert.ok(opening !== null, "the stream's first frame");
      assert.equal(opening.job, jobId);
      assert.equal(await statusOf(jobId), "queued", "the stream opened before the job was placed");
      assert.ok(
        !(opening.page.records as Doc[]).some((r) => String(r.text).startsWith("kiln: cargo")),
        JSON.stringify(opening.page.records),
      );

      const reopened = await op.post("/operator/api/hosts/builder-2/undrain", {
        policy_revision: (closed.json() as Doc).revision,
        note: "the stream is open",
      });
      assert.equal(reopened.status, 200, reopened.body);
      const frames: Doc[] = [];
      for (;;) {
        const frame = await stream.next();
        if (frame === null) break;
        frames.push(frame);
      }
      const records = frames.flatMap((f) => f.page.records as Doc[]);
      assert.ok(frames.at(-1)?.page.settled === true, "the stream ends with the settled page");
      assert.ok(
        records.some((r) => r.attempt === 1 && String(r.text).startsWith("kiln: cargo test")),
        JSON.stringify(records.slice(0, 20)),
      );
      assert.ok(
        records.some((r) => r.stream !== "system" && /test result: ok/.test(String(r.text))),
        "cargo's own output arrived on A",
      );
      const sequences = records.map((r) => r.sequence as number);
      assert.deepEqual(
        sequences,
        [...sequences].sort((a, b) => a - b),
        "in order",
      );
      assert.equal(new Set(sequences).size, sequences.length, "each line once");
    } finally {
      stream.close();
    }
    assert.equal(await statusOf(jobId), "passed", await explain(jobId));
    assert.deepEqual(
      (await attemptsOf([jobId])).map((a) => a.host_id),
      ["builder-2"],
      "placed by the host connected to server B",
    );
  });
});
