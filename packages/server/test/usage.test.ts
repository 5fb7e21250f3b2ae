import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  claimNextJob,
  createAgentCredential,
  finishAttempt,
  reclaimExpiredLeases,
  recordUploadPart,
  registerHost,
  requestCancellation,
  reserveUpload,
  type Storage,
  writeTenantControls,
} from "@kiln/storage";
import { attemptCompletion, DIALECTS } from "@kiln/storage/testing";
import { meterAttempt } from "../src/domain/hosts/meter-attempt.js";
import { hashToken, mintToken } from "../src/domain/identity/token-format.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { deflateManifestJson } from "../src/domain/sources/manifest-codec.js";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { acceptJob, HOST } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";

const at = (text: string) => new Date(`2026-11-${text}Z`);

/** Places `jobId` (the only queued job) at `now`; its lease runs `leaseSeconds`. */
async function place(storage: Storage, jobId: string, now: Date, leaseSeconds = 600) {
  await registerHost(storage, { id: HOST, vcpus: 64, memoryBytes: 128 * 2 ** 30, isolation: "sandbox", now });
  const placed = await claimNextJob(storage, {
    hostId: HOST,
    freeVcpus: 64,
    vcpusOfSize: VCPUS_OF_SIZE,
    leaseSeconds,
    now,
  });
  assert.equal(placed?.job.id, jobId);
  return { jobId, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token };
}

/** Finishes the attempt as the host service does: metered by the control plane's rule (meterAttempt). */
async function finish(
  storage: Storage,
  lease: { jobId: string; attempt: number; leaseToken: string },
  now: Date,
  outcome: "passed" | "failed" | "cancelled",
  cause = "test_failure",
) {
  const result = await finishAttempt(storage, {
    ...lease,
    now,
    result: attemptCompletion(outcome, {
      failure: outcome === "passed" ? null : { phase: "test", cause, detail: `${cause} detail` },
    }),
    meter: (attempt) => meterAttempt(attempt, now),
  });
  assert.equal(result, "finished");
}

/**
 * usage.report and usage.export on every dialect, after jobs settled through the real storage
 * verbs: totals agree to the vCPU-second and cent, a job cancelled before placement has no
 * record, what the platform ended is credited, and the refusals the spec lists.
 */
for (const dialect of DIALECTS) {
  describe(`usage report and export (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; userId: string; token: string };
    let viewer: { token: string };
    const jobs: Record<string, string> = {};

    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
      viewer = await personWithToken(t.storage, { tenant: owner.tenant, role: "viewer" });
      const s = t.storage;
      const tenant = owner.tenant;
      // 1. passed: 100 s on kiln2-cpu (2 vCPUs) → 200 vCPU-s.
      let job = await acceptJob(s, { tenant, now: at("03T09:59:00.000"), repository: "acme/widget" });
      jobs.passed = job.id;
      await finish(s, await place(s, job.id, at("03T10:00:00.000")), at("03T10:01:40.000"), "passed");
      // 2. failed (a test): 30.5 s → 31 whole seconds → 62 vCPU-s.
      job = await acceptJob(s, { tenant, now: at("03T10:59:00.000"), repository: "acme/widget" });
      jobs.failed = job.id;
      await finish(s, await place(s, job.id, at("03T11:00:00.000")), at("03T11:00:30.500"), "failed");
      // 3. cancelled before placement: no attempt, no usage record.
      job = await acceptJob(s, { tenant, now: at("04T08:00:00.000"), repository: "acme/widget" });
      jobs.unplaced = job.id;
      const cancelled = await requestCancellation(s, {
        tenantId: tenant,
        jobId: job.id,
        by: owner.userId,
        now: at("04T08:00:05.000"),
      });
      assert.deepEqual(cancelled, { kind: "requested", status: "cancelled" });
      // 4. cancelled while running: metered to the request (45 s), not to the reap → 90 vCPU-s.
      job = await acceptJob(s, { tenant, now: at("04T08:59:00.000"), repository: "acme/gadget" });
      jobs.cancelledRunning = job.id;
      const lease = await place(s, job.id, at("04T09:00:00.000"));
      await requestCancellation(s, { tenantId: tenant, jobId: job.id, by: owner.userId, now: at("04T09:00:45.000") });
      await finish(s, lease, at("04T09:01:10.000"), "cancelled");
      // 5. lost with its host, no attempt left: failed with cause infrastructure (120 s until the reaper saw it).
      job = await acceptJob(s, { tenant, now: at("04T11:59:00.000"), repository: "acme/widget", maxAttempts: 1 });
      jobs.lost = job.id;
      await place(s, job.id, at("04T12:00:00.000"), 60);
      assert.equal((await reclaimExpiredLeases(s, at("04T12:02:00.000"))).length, 1);
      // 6. a phase failed with cause infrastructure, reported by the host: 20 s → 40 vCPU-s, credited.
      job = await acceptJob(s, { tenant, now: at("05T07:59:00.000"), repository: "acme/widget" });
      jobs.infrastructure = job.id;
      await finish(s, await place(s, job.id, at("05T08:00:00.000")), at("05T08:00:20.000"), "failed", "infrastructure");
      // 7. a job of October, outside the default period.
      job = await acceptJob(s, { tenant, now: new Date("2026-10-31T23:00:00.000Z"), repository: "acme/widget" });
      jobs.october = job.id;
      await finish(
        s,
        await place(s, job.id, new Date("2026-10-31T23:59:50.000Z")),
        new Date("2026-11-01T00:00:10.000Z"),
        "passed",
      );
      // Uploaded source bytes: 6 MiB on the 5th (one reused part is not counted).
      const reserved = await reserveUpload(s, {
        tenantId: tenant,
        upload: "upload-usage-1",
        repository: "acme/widget",
        reservedBy: owner.userId,
        requestHash: "h",
        formatVersion: 1,
        manifestDeflated: deflateManifestJson(JSON.stringify({ entries: [], parts: [] })),
        manifestSha256: "0".repeat(64),
        totals: "{}",
        partCount: 3,
        partBytes: 7 * 2 ** 20,
        now: at("05T09:00:00.000"),
        expiresAt: at("05T10:00:00.000"),
        maxBytes: 16 * 2 ** 30,
        maxUnclaimedUploads: 32,
      });
      assert.equal(reserved.kind, "created");
      for (const [part, bytes, origin] of [
        [1, 4 * 2 ** 20, "uploaded"],
        [2, 2 * 2 ** 20, "uploaded"],
        [3, 2 ** 20, "reused"],
      ] as const) {
        const recorded = await recordUploadPart(s, {
          tenantId: tenant,
          upload: "upload-usage-1",
          part,
          sha256: String(part).repeat(64),
          bytes,
          origin,
          now: at("05T09:00:10.000"),
        });
        assert.equal(recorded.kind, "recorded");
      }
    });
    after(() => t.close());

    const get = async (url: string, token = owner.token) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(token) });
      return { status: res.statusCode, body: res.json() };
    };

    /** Every page of the export, following next_cursor. */
    const exportAll = async (query: string, limit: number) => {
      const pages = [];
      let url = `/api/usage/export?${query}&limit=${limit}`;
      for (;;) {
        const page = await get(url);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        pages.push(page.body);
        if (page.body.next_cursor === null) return pages;
        url = `/api/usage/export?cursor=${page.body.next_cursor}&limit=${limit}`;
      }
    };

    it("without a rate card: vCPU-seconds per day, repository and size; no amounts; no lineage storage sampled", async () => {
      const report = await get("/api/usage", viewer.token);
      assert.equal(report.status, 200, JSON.stringify(report.body));
      const u = report.body;
      assert.equal(u.period, "2026-11");
      assert.equal(u.rate_card, null);
      assert.deepEqual(
        u.days.map((d: { date: string; vcpu_seconds: number; attempts: number; jobs: number }) => [
          d.date,
          d.vcpu_seconds,
          d.attempts,
          d.jobs,
        ]),
        [
          ["2026-11-03", 262, 2, 2],
          ["2026-11-04", 330, 2, 2],
          ["2026-11-05", 40, 1, 1],
        ],
      );
      assert.deepEqual(
        u.repositories.map((r: { repository: string; vcpu_seconds: number }) => [r.repository, r.vcpu_seconds]),
        [
          ["acme/gadget", 90],
          ["acme/widget", 542],
        ],
      );
      assert.equal(u.days[2].bytes_uploaded, 6 * 2 ** 20);
      assert.equal(u.days[0].storage_byte_hours, 0);
      assert.equal(u.days[0].amount_cents, null);
      assert.deepEqual(u.totals, {
        vcpu_seconds: 632 - 280,
        vcpu_seconds_by_size: [{ size: "kiln2-cpu", vcpu_seconds: 632 }],
        jobs: 5,
        attempts: 5,
        storage_byte_hours: 0,
        bytes_uploaded: 6 * 2 ** 20,
        adjustment_vcpu_seconds: -280,
        adjustment_amount_cents: null,
        amount_cents: null,
      });
    });

    it("under a rate card the export's pages sum to the report's totals to the vCPU-second and cent", async () => {
      const written = await writeTenantControls(t.storage, {
        tenantId: owner.tenant,
        expectedVersion: 0,
        changes: { rateCard: { cents_per_vcpu_second: 0.5, cents_per_gib_month: 5, cents_per_gib_uploaded: 1024 } },
        changedBy: "operator",
        now: at("22T07:00:00.000"),
      });
      assert.equal(written.kind, "written");
      const report = (await get("/api/usage?period=2026-11")).body;
      // 316 cents metered + 6 cents uploaded (6 MiB at 1024 cents a GiB) − 140 cents credited.
      assert.equal(report.totals.amount_cents, 316 + 6 - 140);
      assert.equal(report.totals.adjustment_amount_cents, -140);
      assert.deepEqual(
        report.days.map((d: { amount_cents: number }) => d.amount_cents),
        [131, 165, 20 + 6],
      );

      for (const limit of [1, 2, 1000]) {
        const pages = await exportAll("period=2026-11", limit);
        const first = pages[0];
        assert.deepEqual(first.totals, report.totals, `limit ${limit}`);
        for (const later of pages.slice(1)) assert.equal(later.totals, null);
        const records = pages.flatMap((p) => p.records);
        const adjustments = pages.flatMap((p) => p.adjustments);
        const uploads = pages.flatMap((p) => p.uploads);
        const sum = (
          xs: { vcpu_seconds?: number; amount_cents: number | null }[],
          m: "vcpu_seconds" | "amount_cents",
        ) => xs.reduce((n, x) => n + (x[m] ?? 0), 0);
        assert.equal(sum(records, "vcpu_seconds") + sum(adjustments, "vcpu_seconds"), report.totals.vcpu_seconds);
        assert.equal(
          sum(records, "amount_cents") + sum(uploads, "amount_cents") + sum(adjustments, "amount_cents"),
          report.totals.amount_cents,
        );
        assert.equal(records.length, report.totals.attempts);
        assert.equal(
          uploads.reduce((n: number, u: { bytes: number }) => n + u.bytes, 0),
          report.totals.bytes_uploaded,
        );
        // Ordered and unique across pages.
        assert.deepEqual(
          records.map((r: { job: string }) => r.job),
          [jobs.passed, jobs.failed, jobs.cancelledRunning, jobs.lost, jobs.infrastructure],
        );
        // Five records, one cancellation, one upload record: one item a page at limit 1.
        if (limit === 1) assert.equal(pages.length, 7);
      }

      const all = await exportAll("period=2026-11", 1000);
      const [page] = all;
      const recordOf = (job: string | undefined) =>
        page.records.filter((r: { job: string }) => r.job === job) as { vcpu_seconds: number; ended_at: string }[];
      const net = (job: string | undefined) =>
        recordOf(job).reduce((n, r) => n + r.vcpu_seconds, 0) +
        page.adjustments
          .filter((a: { job: string }) => a.job === job)
          .reduce((n: number, a: { vcpu_seconds: number }) => n + a.vcpu_seconds, 0);
      // Cancelled before placement: no record, one zero adjustment saying so.
      assert.deepEqual(recordOf(jobs.unplaced), []);
      const unplaced = page.adjustments.filter((a: { job: string }) => a.job === jobs.unplaced);
      assert.equal(unplaced.length, 1);
      assert.equal(unplaced[0].kind, "cancelled_before_placement");
      assert.equal(unplaced[0].vcpu_seconds, 0);
      assert.equal(unplaced[0].amount_cents, 0);
      // What the platform ended is not charged.
      assert.equal(recordOf(jobs.lost)[0]?.vcpu_seconds, 240);
      assert.equal(net(jobs.lost), 0);
      assert.equal(net(jobs.infrastructure), 0);
      // Charged: passed, failed, cancelled while running (to the request, not the reap).
      assert.equal(net(jobs.passed), 200);
      assert.equal(net(jobs.failed), 62);
      assert.equal(net(jobs.cancelledRunning), 90);
      assert.equal(recordOf(jobs.cancelledRunning)[0]?.ended_at, "2026-11-04T09:00:45.000Z");
      // The October job counts in October only (the day it started).
      const october = (await get("/api/usage?period=2026-10")).body;
      assert.equal(october.totals.vcpu_seconds, 40);
      assert.deepEqual(
        (await exportAll("period=2026-10", 10))[0].records.map((r: { job: string }) => r.job),
        [jobs.october],
      );
    });

    it("a cursor keeps its instant: what settles later is not on its pages", async () => {
      const first = (await get("/api/usage/export?period=2026-11&limit=1")).body;
      await t.clock.advance(60_000);
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now(), repository: "acme/widget" });
      await finish(t.storage, await place(t.storage, job.id, t.clock.now()), t.clock.now(), "passed");
      let cursor = first.next_cursor;
      const seen = [...first.records];
      while (cursor !== null) {
        const page = (await get(`/api/usage/export?cursor=${cursor}&limit=1`)).body;
        seen.push(...page.records);
        cursor = page.next_cursor;
      }
      assert.equal(seen.length, first.totals.attempts);
      assert.ok(!seen.some((r: { job: string }) => r.job === job.id));
      assert.equal((await get("/api/usage")).body.totals.attempts, first.totals.attempts + 1);
    });

    it("refuses what the spec lists: invalid_request naming the field, scope; the cookie reaches the export only", async () => {
      for (const period of ["2026-13", "2026-1", "november"]) {
        for (const path of ["/api/usage", "/api/usage/export"]) {
          const res = await get(`${path}?period=${period}`);
          assert.equal(res.status, 400);
          assert.equal(res.body.code, "invalid_request");
          assert.match(res.body.detail, /query\.period/);
        }
      }
      const badCursor = await get("/api/usage/export?cursor=bm90LWEtY3Vyc29y");
      assert.equal(badCursor.body.code, "invalid_request");
      assert.match(badCursor.body.detail, /query\.cursor/);
      const page = (await get("/api/usage/export?period=2026-11&limit=1")).body;
      const otherPeriod = await get(`/api/usage/export?period=2026-10&cursor=${page.next_cursor}`);
      assert.equal(otherPeriod.body.code, "invalid_request");
      assert.match(otherPeriod.body.detail, /query\.period/);

      const agent = mintToken("agent");
      await createAgentCredential(
        t.storage,
        {
          tenantId: owner.tenant,
          name: "submitter",
          tokenHash: hashToken(agent),
          scopes: ["submit"],
          createdBy: owner.userId,
          expiresAt: "2099-01-01T00:00:00.000Z",
          requestsPerMinute: 600,
        },
        t.clock.now(),
      );
      for (const path of ["/api/usage", "/api/usage/export"]) {
        const res = await get(path, agent);
        assert.equal(res.status, 403);
        assert.equal(res.body.code, "out_of_scope");
        assert.match(res.body.detail, /read/);
      }
      const anonymous = await t.app.inject({ method: "GET", url: "/api/usage" });
      assert.equal(anonymous.statusCode, 401);

      const email = `usage-${dialect.name}@example.test`;
      const { addPersonToTenant } = await import("@kiln/storage");
      await addPersonToTenant(
        t.storage,
        { tenantId: owner.tenant, email, displayName: "Usage Viewer", role: "viewer" },
        t.clock.now(),
      );
      const cookie = `kiln_session=${await signIn(t.app, t.storage, email, owner.tenant, t.clock)}`;
      const exported = await t.app.inject({ method: "GET", url: "/api/usage/export", headers: { cookie } });
      assert.equal(exported.statusCode, 200, exported.body);
      const reported = await t.app.inject({ method: "GET", url: "/api/usage", headers: { cookie } });
      assert.equal(reported.statusCode, 401, reported.body);
    });
  });
}
