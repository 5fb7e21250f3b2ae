import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { reclaimExpiredLeases } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { bearer, personWithToken } from "../src/testing/harness.js";
import {
  acceptJob,
  appendLines,
  claimJob,
  finishJob,
  HOST,
  hostReport,
  type JobsTestApp,
  jobsTestApp,
} from "../src/testing/job-fixtures.js";
import { ATTEMPT_PAGE_SIZE } from "../src/web/handlers/tenant/job-evidence.js";

// biome-ignore lint/suspicious/noExplicitAny: evidence documents are read loosely; checkResponses validates them.
type Doc = any;

const RETENTION_SECONDS = 3600;

for (const dialect of DIALECTS) {
  describe(`job evidence, cargo output and artifacts (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: JobsTestApp;
    let owner: { tenant: string; token: string };
    let other: { tenant: string; token: string };
    /** A job whose attempt 1 was lost and whose attempt 2 passed, published two files. */
    let job: string;
    let publishedAt: Date;
    const output = Buffer.from("   Compiling widget v0.1.0\n\u0000\u00ff raw bytes kept as they were\n", "latin1");
    const files = [
      { path: "release/widget", bytes: Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3, 255]) },
      { path: "doc/widget/index (1).html", bytes: Buffer.from("<html>docs</html>") },
    ];

    before(async () => {
      t = await jobsTestApp(await dialect.openFresh());
      owner = await personWithToken(t.storage, { role: "viewer" });
      other = await personWithToken(t.storage, { role: "owner" });
    });
    after(() => t.close());

    const get = async (url: string, token = owner.token) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(token) });
      return { status: res.statusCode, type: String(res.headers["content-type"]), res };
    };
    const evidence = async (id: string, query = "") => {
      const r = await get(`/api/jobs/${id}/evidence${query}`);
      assert.equal(r.status, 200, r.res.body);
      return r.res.json() as Doc;
    };

    it("before placement: the job and what was admitted; no usage, attempts or settlement", async () => {
      const queued = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const doc = await evidence(queued.id);
      assert.deepEqual(Object.keys(doc).sort(), ["attempts", "job", "report", "settlement", "usage"]);
      assert.equal(doc.job.id, queued.id);
      assert.equal(doc.job.status, "queued");
      assert.deepEqual(doc.report, {
        phases: [],
        crates: [],
        caches: [],
        injections: [],
        tests: [],
        units: [],
        admitted: {
          toolchain: "1.85.0",
          toolchain_origin: "invocation",
          network_policy: "offline",
          configuration_sha256: null,
          settings_version: 0,
          wall_clock_ceiling: { seconds: 3600, origin: "platform default" },
          affected_tests: false,
        },
      });
      assert.equal(doc.usage, null);
      assert.equal(doc.attempts, null);
      assert.equal(doc.settlement, null);
      // Placed: an attempt page with the running attempt.
      const lease = await claimJob(t.storage, queued.id, t.clock.now());
      const running = await evidence(queued.id);
      assert.equal(running.attempts.attempts.length, 1);
      assert.equal(running.attempts.attempts[0].outcome, null);
      assert.equal(running.attempts.next_cursor, null);
      assert.equal(running.report.units.length, 1);
      assert.equal(running.report.units[0].finished_at, null);
      await finishJob(t.storage, t.blobs, lease, { now: t.clock.now() });
    });

    it("after a lost attempt and a passing one: every attempt's report, usage, attempts and settlement", async () => {
      const accepted = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      job = accepted.id;
      const lost = await claimJob(t.storage, job, t.clock.now(), 10);
      await appendLines(t.storage, lost, ["attempt 1 starts"], t.clock.now());
      await t.clock.advance(30_000);
      assert.deepEqual(await reclaimExpiredLeases(t.storage, t.clock.now()), [{ jobId: job, attempt: 1 }]);
      const lease = await claimJob(t.storage, job, t.clock.now());
      assert.equal(lease.attempt, 2);
      await appendLines(t.storage, lease, ["attempt 2 starts"], t.clock.now());
      await t.clock.advance(30_000);
      publishedAt = t.clock.now();
      await finishJob(t.storage, t.blobs, lease, {
        now: publishedAt,
        report: hostReport(lease, publishedAt),
        cargoOutput: output,
        artifacts: files,
        retentionSeconds: RETENTION_SECONDS,
      });

      const doc = await evidence(job);
      assert.equal(doc.job.status, "passed");
      assert.equal(doc.job.units.length, 2);
      const r = doc.report;
      assert.deepEqual(
        r.phases.map((p: Doc) => [p.attempt, p.name]),
        [
          [2, "provision"],
          [2, "test"],
          [2, "publish"],
        ],
      );
      assert.deepEqual(
        r.crates.map((c: Doc) => [c.attempt, c.name, c.outcome]),
        [
          [2, "serde", "fresh"],
          [2, "widget", "compiled"],
        ],
      );
      assert.deepEqual(
        r.tests.map((c: Doc) => [c.attempt, c.name, c.outcome]),
        [
          [2, "tests::adds", "passed"],
          [2, "tests::slow", "ignored"],
        ],
      );
      assert.equal(r.caches[0].attempt, 2);
      assert.equal(r.caches[0].outcome, "cold");
      assert.equal(r.injections[0].status, "applied");
      assert.equal(r.injections[0].attempt, 2);
      assert.equal(r.admitted.network_policy, "offline");
      // The lost attempt ran no reported unit: its unit comes from the attempt row.
      assert.deepEqual(
        r.units.map((u: Doc) => [u.attempt, u.id, u.host, u.vcpus, u.memory_bytes, u.exit_code]),
        [
          [1, `${job}-a1`, HOST, 2, 4 * 2 ** 30, null],
          [2, `${job}-a2`, HOST, 2, 4 * 2 ** 30, 0],
        ],
      );
      assert.equal(r.units[1].size, "kiln2-cpu");
      assert.equal(r.units[1].cpu_seconds, 1.5, "members beyond the contract's are kept");
      assert.deepEqual(doc.usage, {
        size: "kiln2-cpu",
        seconds: 30,
        vcpu_seconds: 60,
        closed_at: publishedAt.toISOString(),
      });
      assert.deepEqual(doc.settlement, {
        settled_at: publishedAt.toISOString(),
        status: "passed",
        attempts: 2,
        usage_recorded: true,
      });
      assert.equal(doc.attempts.next_cursor, null);
      assert.deepEqual(
        doc.attempts.attempts.map((a: Doc) => [a.attempt, a.unit, a.outcome, a.exit_code, a.cargo_output_bytes]),
        [
          [1, `${job}-a1`, "lost", null, null],
          [2, `${job}-a2`, "passed", 0, output.length],
        ],
      );
    });

    it("the attempt page is cursored 50 at a time; an unissued cursor is invalid_request", async () => {
      const many = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now(), maxAttempts: 60 });
      const attempts = ATTEMPT_PAGE_SIZE + 3;
      for (let n = 1; n <= attempts; n++) {
        const lease = await claimJob(t.storage, many.id, t.clock.now(), 1);
        assert.equal(lease.attempt, n);
        await t.clock.advance(2000);
        await reclaimExpiredLeases(t.storage, t.clock.now());
      }
      const first = await evidence(many.id);
      assert.equal(first.attempts.attempts.length, ATTEMPT_PAGE_SIZE);
      assert.equal(first.attempts.attempts[0].attempt, 1);
      assert.equal(first.report.units.length, attempts, "the report covers every attempt");
      assert.equal(typeof first.attempts.next_cursor, "string");
      const second = await evidence(many.id, `?cursor=${first.attempts.next_cursor}`);
      assert.deepEqual(
        second.attempts.attempts.map((a: Doc) => a.attempt),
        [51, 52, 53],
      );
      assert.equal(second.attempts.next_cursor, null);
      for (const cursor of ["x", "a", "l3", "a-1"]) {
        const res = await get(`/api/jobs/${many.id}/evidence?cursor=${cursor}`);
        assert.equal(res.status, 400, cursor);
        assert.equal(res.res.json().code, "invalid_request");
      }
    });

    it("cargo output is the attempt's retained bytes, byte for byte", async () => {
      const res = await get(`/api/jobs/${job}/attempts/2/cargo-output`);
      assert.equal(res.status, 200);
      assert.equal(res.type, "application/octet-stream");
      assert.equal(res.res.headers["content-length"], String(output.length));
      assert.deepEqual(res.res.rawPayload, output);
      for (const attempt of [1, 3]) {
        const missing = await get(`/api/jobs/${job}/attempts/${attempt}/cargo-output`);
        assert.equal(missing.status, 404, `attempt ${attempt}`);
        assert.equal(missing.res.json().code, "not_found");
      }
      const bad = await get(`/api/jobs/${job}/attempts/0/cargo-output`);
      assert.equal(bad.status, 400);
    });

    it("the artifact inventory groups files per attempt; each file's bytes are what was published", async () => {
      const res = await get(`/api/jobs/${job}/artifacts`);
      assert.equal(res.status, 200, res.res.body);
      const inventory = res.res.json() as Doc;
      const expiresAt = new Date(publishedAt.getTime() + RETENTION_SECONDS * 1000).toISOString();
      assert.equal(inventory.expires_at, expiresAt);
      assert.equal(inventory.publications.length, 1);
      const publication = inventory.publications[0];
      assert.equal(publication.attempt, 2);
      assert.equal(publication.published_at, publishedAt.toISOString());
      assert.deepEqual(
        publication.files.map((f: Doc) => [f.index, f.path, f.bytes]),
        files.map((f, i) => [i, f.path, f.bytes.length]),
      );
      for (const file of publication.files) {
        const bytes = await get(`/api/jobs/${job}/artifacts/2/${file.index}`);
        assert.equal(bytes.status, 200);
        assert.equal(bytes.type, "application/octet-stream");
        assert.deepEqual(bytes.res.rawPayload, files[file.index]?.bytes);
        assert.match(String(bytes.res.headers["content-disposition"]), /^attachment; filename\*=UTF-8''/);
      }
      assert.equal(
        (await get(`/api/jobs/${job}/artifacts/2/1`)).res.headers["content-disposition"],
        "attachment; filename*=UTF-8''index%20%281%29.html",
      );
      for (const url of [`/api/jobs/${job}/artifacts/2/2`, `/api/jobs/${job}/artifacts/1/0`]) {
        const missing = await get(url);
        assert.equal(missing.status, 404, url);
        assert.equal(missing.res.json().code, "not_found");
      }
      // A job that published nothing has an empty inventory.
      const none = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      assert.deepEqual((await get(`/api/jobs/${none.id}/artifacts`)).res.json(), {
        expires_at: null,
        publications: [],
      });
    });

    it("another tenant's job, and an unknown one, is not_found everywhere", async () => {
      for (const url of [
        `/api/jobs/j_unknown/evidence`,
        `/api/jobs/j_unknown/attempts/1/cargo-output`,
        `/api/jobs/j_unknown/artifacts`,
        `/api/jobs/j_unknown/artifacts/1/0`,
        `/api/jobs/${job}/evidence`,
        `/api/jobs/${job}/attempts/2/cargo-output`,
        `/api/jobs/${job}/artifacts`,
        `/api/jobs/${job}/artifacts/2/0`,
        `/api/jobs/${job}/logs`,
      ]) {
        const res = await get(url, other.token);
        assert.equal(res.status, 404, url);
        assert.equal(res.res.json().code, "not_found", url);
      }
    });

    it("once retention passes the artifacts are gone, and stay gone", async () => {
      const remaining = RETENTION_SECONDS - Math.round((t.clock.now().getTime() - publishedAt.getTime()) / 1000);
      await t.clock.advance((remaining - 1) * 1000);
      assert.equal((await get(`/api/jobs/${job}/artifacts/2/0`)).status, 200, "served until its expiry");
      await t.clock.advance(1000);
      for (const url of [
        `/api/jobs/${job}/artifacts`,
        `/api/jobs/${job}/artifacts/2/0`,
        `/api/jobs/${job}/artifacts/2/1`,
      ]) {
        const res = await get(url);
        assert.equal(res.status, 410, url);
        assert.equal(res.res.json().code, "gone");
      }
      // An unknown file of an expired publication is still not_found; other tenants still learn nothing.
      assert.equal((await get(`/api/jobs/${job}/artifacts/2/7`)).status, 404);
      assert.equal((await get(`/api/jobs/${job}/artifacts`, other.token)).status, 404);
      // The evidence and the cargo output are not artifacts: still served.
      assert.equal((await get(`/api/jobs/${job}/evidence`)).status, 200);
      assert.equal((await get(`/api/jobs/${job}/attempts/2/cargo-output`)).status, 200);
    });
  });
}
