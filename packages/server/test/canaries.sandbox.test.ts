import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger, systemClock } from "@kiln/contract";
import { claimNextJob, registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { type CanaryPass, CanaryRunner } from "../src/domain/platform/canaries/canary-runner.js";
import { canarySettings } from "../src/domain/platform/canaries/canary-settings.js";
import { CANARY_TENANT } from "../src/domain/platform/platform-tenants.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { type Embedded, startEmbedded } from "../src/testing/e2e-jobs.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { finishJob } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/**
 * Canaries through the public API and workload health from their verdicts, with a host played
 * by the storage verbs it calls (claim, finish) on the test's clock: a canary is a real job of
 * the canary tenant pinned to the host it targets; its pass, failure and lateness move workload
 * health; draining every host makes it refuse at once; attribution names host, attempt and
 * phases. The last suite runs a canary with real cargo on the embedded host.
 */
const SETTINGS = canarySettings({ intervalSeconds: 300, lateAfterSeconds: 240 });
const HOST = "builder-1";

for (const dialect of DIALECTS) {
  describe(`canaries and workload health (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;
    let runner: CanaryRunner;

    before(async () => {
      t = await testApp(await dialect.openFresh(), { canaries: SETTINGS });
      operator = await operatorClient(t.app, t.storage, t.clock.now());
      runner = new CanaryRunner({
        storage: t.storage,
        clock: t.clock,
        log: silentLogger,
        settings: SETTINGS,
        app: t.app,
      });
    });
    after(() => t.close());

    /** The host asks for work (or re-enrolls): it is seen now. */
    const hostAlive = (id = HOST) =>
      registerHost(t.storage, { id, vcpus: 16, memoryBytes: 2 ** 35, isolation: "sandbox", now: t.clock.now() });
    const claimAs = (hostId: string) =>
      claimNextJob(t.storage, {
        hostId,
        freeVcpus: 16,
        vcpusOfSize: VCPUS_OF_SIZE,
        leaseSeconds: 15,
        now: t.clock.now(),
      });
    /** The host runs the canary it is handed and reports `outcome`. */
    async function hostRuns(jobId: string, outcome: "passed" | "failed") {
      const placed = await claimAs(HOST);
      assert.equal(placed?.job.id, jobId, "the host is handed its canary");
      await t.clock.advance(3000);
      await finishJob(
        t.storage,
        t.deps.blobs,
        { jobId, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token },
        { now: t.clock.now(), outcome },
      );
    }
    const health = async () => {
      const r = await operator.get("/operator/api/platform/states");
      assert.equal(r.statusCode, 200, r.body);
      return r.json().end_to_end_workload_health;
    };
    const onlyJob = (pass: CanaryPass) => {
      assert.equal(pass.submitted.length, 1, JSON.stringify(pass));
      const [submitted] = pass.submitted;
      assert.equal(submitted?.error, null);
      assert.ok(submitted?.jobId);
      return submitted.jobId;
    };

    it("submits one canary per serving host and slot through the public API, pinned to the host", async () => {
      await hostAlive();
      const pass = await runner.runOnce();
      const jobId = onlyJob(pass);
      assert.equal(pass.submitted[0]?.host, HOST);
      assert.equal((await runner.runOnce()).submitted.length, 0, "the slot's canary is submitted once");

      const job = await t.storage.db
        .selectFrom("jobs")
        .select(["tenant_id", "pinned_host", "status", "submitted_by", "repository"])
        .where("id", "=", jobId)
        .executeTakeFirstOrThrow();
      assert.equal(job.tenant_id, CANARY_TENANT);
      assert.equal(job.pinned_host, HOST);
      assert.equal(job.status, "queued");
      assert.match(job.submitted_by, /^agent:canary-[0-9a-f]{12}$/, "the platform's agent credential submitted it");
      const credential = await t.storage.db
        .selectFrom("agent_credentials")
        .select(["token_hash", "created_by"])
        .where("tenant_id", "=", CANARY_TENANT)
        .executeTakeFirstOrThrow();
      assert.match(credential.token_hash, /^[0-9a-f]{64}$/, "stored as a digest");
      assert.equal(credential.created_by, "platform");

      await hostAlive("builder-2");
      assert.equal(await claimAs("builder-2"), undefined, "another host never takes a pinned canary");
      const second = onlyJob(await runner.runOnce());
      const pinned = await t.storage.db
        .selectFrom("jobs")
        .select("pinned_host")
        .where("id", "=", second)
        .executeTakeFirstOrThrow();
      assert.equal(pinned.pinned_host, "builder-2", "a host serving later in the slot gets its own canary");
      assert.equal((await claimAs("builder-2"))?.job.id, second);

      const pending = await health();
      assert.equal(pending.state, "refusing");
      assert.equal(pending.reason.code, "canary_pending");
      assert.ok(pending.deadline);
    });

    it("a passed canary makes workload health ok; attribution names host, attempt and phases", async () => {
      const [canary] = (await health()).canaries.filter((c: { host: string }) => c.host === HOST);
      await hostRuns(canary.job_id, "passed");
      // builder-2 ran its canary too (placed in the test before).
      const b2 = (await health()).canaries.find((c: { host: string }) => c.host === "builder-2");
      const placed = await t.storage.db
        .selectFrom("attempts")
        .select(["number", "lease_token"])
        .where("job_id", "=", b2.job_id)
        .executeTakeFirstOrThrow();
      await finishJob(
        t.storage,
        t.deps.blobs,
        { jobId: b2.job_id, attempt: placed.number, leaseToken: placed.lease_token },
        { now: t.clock.now() },
      );

      const ok = await health();
      assert.equal(ok.state, "ok", JSON.stringify(ok));
      assert.equal(ok.reason.code, "canaries_passing");
      assert.equal(ok.deadline, null);
      assert.deepEqual(
        ok.canaries.map((c: { host: string; verdict: string }) => [c.host, c.verdict]),
        [
          [HOST, "passed"],
          ["builder-2", "passed"],
        ],
      );

      const r = await operator.get(`/operator/api/canaries/${canary.job_id}/attribution`);
      assert.equal(r.statusCode, 200, r.body);
      const attribution = r.json();
      assert.equal(attribution.verdict, "passed");
      assert.equal(attribution.host, HOST);
      assert.equal(attribution.attributed_to, "host");
      assert.equal(attribution.attempts.length, 1);
      assert.equal(attribution.attempts[0].host, HOST);
      assert.equal(attribution.attempts[0].duration_ms, 3000, "the attempt's wall clock on the test's clock");
      assert.deepEqual(
        attribution.attempts[0].phases.map((p: { name: string; duration_ms: number }) => [p.name, p.duration_ms]),
        [
          ["provision", 12],
          ["test", 840],
          ["publish", 3],
        ],
      );
      assert.ok(attribution.evidence.some((e: { kind: string }) => e.kind === "attempt"));
    });

    it("draining every host turns a healthy workload refusing at once (well within one interval)", async () => {
      const healthy = await health();
      assert.equal(healthy.state, "ok");
      for (const host of [HOST, "builder-2"]) {
        const drained = await operator.post(`/operator/api/hosts/${host}/drain`);
        assert.equal(drained.statusCode, 200, drained.body);
      }
      const refusing = await health();
      assert.equal(refusing.state, "refusing");
      assert.equal(refusing.reason.code, "no_serving_host");
      assert.ok(Date.parse(refusing.computed_at) - Date.parse(healthy.computed_at) < SETTINGS.intervalSeconds * 1000);
      assert.ok(Date.parse(refusing.deadline) > Date.parse(refusing.computed_at));
      assert.equal((await runner.runOnce()).submitted.length, 0, "no canary is submitted to a drained host");
      for (const host of [HOST, "builder-2"]) {
        const back = await operator.post(`/operator/api/hosts/${host}/undrain`, { policy_revision: 1 });
        assert.equal(back.statusCode, 200, back.body);
      }
    });

    it("a failed canary refuses with canary_failed, attributed to the workload", async () => {
      await t.clock.advance(SETTINGS.intervalSeconds * 1000);
      await hostAlive();
      await hostAlive("builder-2");
      const pass = await runner.runOnce();
      assert.equal(pass.submitted.length, 2);
      const mine = pass.submitted.find((s) => s.host === HOST)?.jobId;
      assert.ok(mine);
      await hostRuns(mine, "failed");
      const failed = await health();
      assert.equal(failed.state, "refusing");
      assert.equal(failed.reason.code, "canary_failed");
      assert.match(failed.reason.detail, new RegExp(mine));
      const attribution = (await operator.get(`/operator/api/canaries/${mine}/attribution`)).json();
      assert.equal(attribution.verdict, "failed");
      assert.equal(attribution.attributed_to, "workload");
    });

    it("a canary not finished within its bound is late: canary_late, then cancelled by the next pass", async () => {
      await t.clock.advance(SETTINGS.intervalSeconds * 1000);
      await hostAlive();
      await hostAlive("builder-2");
      const pass = await runner.runOnce();
      const late = pass.submitted.find((s) => s.host === HOST)?.jobId;
      assert.ok(late);
      // builder-2 passes its canary; builder-1 never takes its own.
      const b2 = pass.submitted.find((s) => s.host === "builder-2")?.jobId;
      assert.ok(b2);
      const placed = await claimAs("builder-2");
      assert.equal(placed?.job.id, b2);
      await finishJob(
        t.storage,
        t.deps.blobs,
        { jobId: b2, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token },
        { now: t.clock.now() },
      );
      const before = (await operator.get(`/operator/api/canaries/${late}/attribution`)).json();
      assert.equal(before.verdict, "pending");
      assert.equal(before.attributed_to, "undecided");

      await t.clock.advance(SETTINGS.lateAfterSeconds * 1000);
      await hostAlive();
      await hostAlive("builder-2");
      const refusing = await health();
      assert.equal(refusing.state, "refusing");
      assert.equal(refusing.reason.code, "canary_late");
      assert.match(refusing.reason.detail, new RegExp(late));

      const next = await runner.runOnce();
      assert.deepEqual(next.cancelled, [late], "the late canary is cancelled through the API");
      const status = await t.storage.db
        .selectFrom("jobs")
        .select("status")
        .where("id", "=", late)
        .executeTakeFirstOrThrow();
      assert.equal(status.status, "cancelled");
      const attribution = (await operator.get(`/operator/api/canaries/${late}/attribution`)).json();
      assert.equal(attribution.verdict, "late");
      assert.equal(attribution.attributed_to, "host");
      assert.deepEqual(attribution.attempts, [], "no attempt ever ran");
    });

    it("a job that is no canary, and any caller without an operator session, are operator_not_found", async () => {
      const r = await operator.get("/operator/api/canaries/job_nothing/attribution");
      assert.equal(r.statusCode, 404);
      assert.equal(r.json().code, "operator_not_found");
      for (const url of ["/operator/api/platform/states", "/operator/api/canaries/job_nothing/attribution"]) {
        const anonymous = await t.app.inject({ method: "GET", url, headers: { "sec-fetch-site": "same-origin" } });
        assert.equal(anonymous.statusCode, 404, url);
        assert.equal(anonymous.json().code, "operator_not_found");
      }
    });
  });
}

describe("a canary with real cargo on the embedded host", () => {
  let embedded: Embedded;
  let operator: OperatorClient;

  before(async () => {
    embedded = await startEmbedded();
    operator = await operatorClient(embedded.app, embedded.storage, new Date());
  });
  after(() => embedded.close());

  it("runs the canary crate's test on the host it targets; attribution names host, attempt and phase times", async () => {
    // The embedded app judges canaries by the default settings; the runner uses the same.
    const settings = canarySettings();
    const runner = new CanaryRunner({
      storage: embedded.storage,
      clock: systemClock,
      log: silentLogger,
      settings,
      app: embedded.app,
    });
    // The embedded host has claimed (and so been seen) since it started.
    const pass = await runner.runOnce();
    assert.deepEqual(
      pass.submitted.map((s) => [s.host, s.error]),
      [["local", null]],
    );
    const jobId = pass.submitted[0]?.jobId;
    assert.ok(jobId);
    const deadline = Date.now() + 240_000;
    let status = "queued";
    while (status !== "passed" && status !== "failed" && status !== "cancelled") {
      assert.ok(Date.now() < deadline, `canary ${jobId} still ${status}`);
      await new Promise((r) => setTimeout(r, 250));
      const row = await embedded.storage.db
        .selectFrom("jobs")
        .select("status")
        .where("id", "=", jobId)
        .executeTakeFirstOrThrow();
      status = row.status;
    }
    assert.equal(status, "passed");

    const r = await operator.get(`/operator/api/canaries/${jobId}/attribution`);
    assert.equal(r.statusCode, 200, r.body);
    const attribution = r.json();
    assert.equal(attribution.verdict, "passed");
    assert.equal(attribution.host, "local");
    assert.equal(attribution.attributed_to, "host");
    assert.equal(attribution.attempts.length, 1);
    const [attempt] = attribution.attempts;
    assert.equal(attempt.host, "local");
    assert.equal(attempt.outcome, "passed");
    assert.ok(attempt.duration_ms > 0);
    const phases = new Map(
      attempt.phases.map((p: { name: string; duration_ms: number | null }) => [p.name, p.duration_ms]),
    );
    assert.ok(phases.has("provision") && phases.has("test"), JSON.stringify(attempt.phases));
    assert.ok((phases.get("test") as number) > 0, "the test phase ran cargo for a measured time");

    const evidence = await embedded.app.inject({
      method: "GET",
      url: `/api/jobs/${jobId}/evidence`,
      headers: { authorization: `Bearer ${embedded.token}` },
    });
    assert.equal(evidence.statusCode, 404, "a canary is the canary tenant's job, not another tenant's");

    const states = (await operator.get("/operator/api/platform/states")).json();
    assert.equal(states.end_to_end_workload_health.state, "ok", JSON.stringify(states.end_to_end_workload_health));
    assert.deepEqual(
      states.end_to_end_workload_health.canaries.map((c: { host: string; job_id: string; verdict: string }) => [
        c.host,
        c.job_id,
        c.verdict,
      ]),
      [["local", jobId, "passed"]],
    );
    const drained = await operator.post("/operator/api/hosts/local/drain");
    assert.equal(drained.statusCode, 200, drained.body);
    const refusing = (await operator.get("/operator/api/platform/states")).json().end_to_end_workload_health;
    assert.deepEqual([refusing.state, refusing.reason.code], ["refusing", "no_serving_host"]);
  });
});
