import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { AttemptReport } from "@kiln/contract";
import { createTenant } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import {
  BURST_MIN_SUBMISSIONS,
  HISTORY_DAYS,
  submissionBurst,
} from "../src/domain/platform/tenant-anomalies/submission-burst.js";
import { TenantAnomalyEvaluator } from "../src/domain/platform/tenant-anomalies/tenant-anomaly-evaluator.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { acceptJob, claimJob, finishJob, hostReport } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/**
 * Tenant anomaly flags raised by rules over what kiln recorded — attempts' cgroup CPU seconds
 * against their wall clock and cargo output, submissions of the hour against the tenant's
 * history — each with its evidence, raised once, listed and disposed by an operator (audited,
 * changing nothing else).
 */
const WALL_SECONDS = 120;

for (const dialect of DIALECTS) {
  describe(`tenant anomalies (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;
    let evaluator: TenantAnomalyEvaluator;

    before(async () => {
      t = await testApp(await dialect.openFresh());
      operator = await operatorClient(t.app, t.storage, t.clock.now());
      evaluator = new TenantAnomalyEvaluator({ storage: t.storage, clock: t.clock });
      for (const id of ["acme-miner", "acme-build", "acme-burst"]) await createTenant(t.storage, { id }, t.clock.now());
    });
    after(() => t.close());

    /** A job of `tenant` that ran WALL_SECONDS on 2 vCPUs using `cpuSeconds`, cargo reporting `crates`. */
    async function ranJob(tenant: string, cpuSeconds: number, withCrates: boolean) {
      const job = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      const lease = await claimJob(t.storage, job.id, t.clock.now());
      const started = t.clock.now();
      await t.clock.advance(WALL_SECONDS * 1000);
      const base = hostReport(lease, started);
      const report: AttemptReport = {
        ...base,
        crates: withCrates ? base.crates : [],
        tests: withCrates ? base.tests : [],
        unit: base.unit === null ? null : { ...base.unit, cpu_seconds: cpuSeconds, vcpus: 2 },
      };
      await finishJob(t.storage, t.deps.blobs, lease, {
        now: t.clock.now(),
        outcome: "failed",
        report,
        cargoOutput: withCrates ? Buffer.from('{"reason":"compiler-artifact"}\n') : Buffer.from(""),
      });
      return job.id;
    }
    const list = async () => {
      const r = await operator.get("/operator/api/anomalies");
      assert.equal(r.statusCode, 200, r.body);
      return r.json() as {
        id: string;
        flag: string;
        tenant: string;
        job?: string;
        evidence: { kind: string; detail: string }[];
        disposition: unknown;
      }[];
    };

    it("raises a miner flag for a job pinned at 100 % CPU with no cargo output, and a burst flag; once each", async () => {
      const miner = await ranJob("acme-miner", WALL_SECONDS * 2 * 0.99, false);
      await ranJob("acme-build", WALL_SECONDS * 2 * 0.99, true); // saturated, but cargo compiled crates
      await ranJob("acme-build", WALL_SECONDS * 2 * 0.3, false); // no output, but mostly idle
      for (let i = 0; i < BURST_MIN_SUBMISSIONS; i++)
        await acceptJob(t.storage, { tenant: "acme-burst", now: t.clock.now() });

      const raised = await evaluator.runOnce();
      assert.deepEqual(raised.map((f) => [f.rule, f.tenantId]).sort(), [
        ["cpu_saturated_without_output", "acme-miner"],
        ["submission_burst", "acme-burst"],
      ]);
      assert.deepEqual(await evaluator.runOnce(), [], "evaluated again, nothing is raised twice");

      const flags = await list();
      assert.equal(flags.length, 2);
      const minerFlag = flags.find((f) => f.flag === "cpu_saturated_without_output");
      assert.equal(minerFlag?.tenant, "acme-miner");
      assert.equal(minerFlag?.job, miner);
      assert.equal(minerFlag?.disposition, null);
      assert.match(
        minerFlag?.evidence.find((e) => e.kind === "cpu_saturation")?.detail ?? "",
        /237\.6 CPU seconds in 120\.0 s .* 99\.0 %/,
      );
      assert.ok(minerFlag?.evidence.some((e) => e.kind === "no_cargo_output"));
      const burst = flags.find((f) => f.flag === "submission_burst");
      assert.match(
        burst?.evidence.find((e) => e.kind === "submissions_in_hour")?.detail ?? "",
        new RegExp(`^${BURST_MIN_SUBMISSIONS} jobs`),
      );
    });

    it("a burst is judged against the tenant's history", () => {
      const hourStart = new Date("2026-11-22T08:00:00.000Z");
      const now = new Date("2026-11-22T08:30:00.000Z");
      const hours = HISTORY_DAYS * 24;
      const judge = (inHour: number, inHistory: number) =>
        submissionBurst({ tenantId: "t", hourStart, now, inHour, inHistory }) !== null;
      assert.equal(judge(BURST_MIN_SUBMISSIONS - 1, 0), false, "below the minimum");
      assert.equal(judge(100, hours * 10), false, "exactly 10 × a busy tenant's average is its normal");
      assert.equal(judge(101, hours * 10), true);
      assert.equal(
        submissionBurst({ tenantId: "t", hourStart, now, inHour: 60, inHistory: 0 })?.subject,
        "hour:2026-11-22T08",
        "one flag per tenant and hour",
      );
    });

    it("a disposition records the operator's verdict and note, audited, and changes nothing else", async () => {
      const jobsBefore = await t.storage.db.selectFrom("jobs").selectAll().orderBy("id").execute();
      const controlsBefore = (await operator.get("/operator/api/tenants/acme-miner")).json();
      const [flag] = (await list()).filter((f) => f.flag === "cpu_saturated_without_output");
      assert.ok(flag);

      const r = await operator.post(`/operator/api/anomalies/${flag.id}/disposition`, {
        disposition: "confirmed",
        note: "mining in build.rs; tenant contacted",
      });
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().disposition.disposition, "confirmed");
      assert.equal(r.json().disposition.note, "mining in build.rs; tenant contacted");
      assert.match(r.json().disposition.disposed_by, /^operator/);
      assert.deepEqual(r.json().evidence, flag.evidence, "the evidence stays");

      const flags = await list();
      assert.equal(flags.at(-1)?.id, flag.id, "a disposed flag lists after the undisposed");
      const audit = (await operator.get("/operator/api/audit")).json() as {
        operation: string;
        target: string;
        outcome?: string;
      }[];
      assert.ok(
        audit.some(
          (e) =>
            e.operation === "operator.anomalies.disposition" &&
            e.target === `anomaly:${flag.id}` &&
            e.outcome === "performed",
        ),
      );
      assert.deepEqual(
        await t.storage.db.selectFrom("jobs").selectAll().orderBy("id").execute(),
        jobsBefore,
        "no job changed",
      );
      const controlsAfter = (await operator.get("/operator/api/tenants/acme-miner")).json();
      assert.deepEqual(
        { ...controlsAfter, consumption: undefined },
        { ...controlsBefore, consumption: undefined },
        "no tenant control (admission) changed",
      );
      assert.equal(controlsAfter.suspension.suspended, false);
    });

    it("refuses a bad disposition invalid_request, an unknown flag and a caller without a session operator_not_found", async () => {
      const [flag] = await list();
      assert.ok(flag);
      for (const body of [{ disposition: "ignored" }, {}, { disposition: "dismissed", note: 7 }]) {
        const r = await operator.post(`/operator/api/anomalies/${flag.id}/disposition`, body);
        assert.equal(r.statusCode, 400, JSON.stringify(body));
        assert.equal(r.json().code, "invalid_request");
      }
      const unknown = await operator.post("/operator/api/anomalies/ta-nothing/disposition", {
        disposition: "dismissed",
      });
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.json().code, "operator_not_found");
      for (const [method, url] of [
        ["GET", "/operator/api/anomalies"],
        ["POST", `/operator/api/anomalies/${flag.id}/disposition`],
      ] as const) {
        const r = await t.app.inject({
          method,
          url,
          headers: { "sec-fetch-site": "same-origin", "content-type": "application/json" },
          ...(method === "POST" ? { payload: JSON.stringify({ disposition: "dismissed" }) } : {}),
        });
        assert.equal(r.statusCode, 404, url);
        assert.equal(r.json().code, "operator_not_found");
      }
    });
  });
}
