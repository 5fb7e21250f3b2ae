import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { executorOf } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { hostReport } from "../src/testing/job-fixtures.js";
import { DOGFOOD, type DogfoodTestApp, dogfoodTestApp, openGate, PROBES } from "./dogfood-fixtures.js";

/**
 * The dogfood trial end to end on the injected clock: a simulated week and a half of probes and
 * dogfood runs with one maintenance window, one lifecycle change and one declared incident
 * produces the period, closed windows, scorecard and beta decision the rules imply; and the
 * scheduled ledger audit finds what the trial is about — a deliberately planted duplicate
 * settlement row, a wrong green, a duplicate execution — and the first of them stops the trial.
 */

const HOUR_MS = 3600_000;
const DAY_MS = 24 * HOUR_MS;
const iso = (ms: number) => new Date(ms).toISOString();

for (const dialect of DIALECTS) {
  describe(`dogfood simulated week (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: DogfoodTestApp;
    let t0: number;
    const heads: string[] = [];
    const at = async (ms: number) => {
      const now = t.clock.now().getTime();
      assert.ok(ms >= now, `the simulation only moves forward: ${iso(ms)} after ${iso(now)}`);
      await t.clock.advance(ms - now);
    };
    const period = async () => {
      const r = await t.get("/operator/api/dogfood/period");
      assert.equal(r.statusCode, 200, r.body);
      return r.json();
    };

    /** Day `d` of the trial: probes at hours 1, 7, 13 and 19 and one head run at hour 3; the ledger audit at hour 23. */
    const simulateDay = async (d: number, during: (hour: number) => Promise<void> = async () => {}) => {
      for (let hour = 0; hour < 24; hour += 1) {
        const instant = t0 + d * DAY_MS + hour * HOUR_MS;
        if (instant < t.clock.now().getTime()) continue; // hour 0 of a day the test already stepped into
        await at(instant);
        await during(hour);
        if ([1, 7, 13, 19].includes(hour)) await t.runJob({ tenant: PROBES });
        if (hour === 3) {
          const sha = `${d}`.padStart(40, "a");
          heads.push(`head:kiln/kiln@${sha}`);
          await t.runJob({ tenant: DOGFOOD, repository: "kiln/kiln", headSha: sha, seconds: 300 });
        }
        if (hour === 23) assert.deepEqual(await t.audit(), [], `day ${d}: the ledger audit finds nothing`);
      }
    };

    before(async () => {
      t = await dogfoodTestApp(await dialect.openFresh());
      t0 = Date.parse(await openGate(t));
      for (const month of ["2026-11", "2026-12"]) {
        assert.equal(
          (await t.post("/operator/api/dogfood/spend", { month, source: "plan", amount_cents: 50_000 })).statusCode,
          200,
        );
        assert.equal(
          (await t.post("/operator/api/dogfood/spend", { month, source: "hetzner", amount_cents: 12_000 })).statusCode,
          200,
        );
      }
    });
    after(() => t.close());

    it("a week with one maintenance window, one lifecycle change and one declared incident", async () => {
      await simulateDay(0);
      await simulateDay(1, async (hour) => {
        if (hour === 0) {
          const m = await t.post("/operator/api/dogfood/maintenance", {
            id: "m-db",
            starts_at: iso(t0 + 30 * HOUR_MS),
            ends_at: iso(t0 + 34 * HOUR_MS),
            reason: "PostgreSQL minor upgrade",
          });
          assert.equal(m.statusCode, 200, m.body);
        }
      });
      await simulateDay(2);
      await simulateDay(3, async (hour) => {
        if (hour === 9) {
          const c = await t.post("/operator/api/dogfood/lifecycle-changes", {
            kind: "host_generation",
            identity: "generation-2",
            at: iso(t0 + 80 * HOUR_MS),
            detail: "hosts moved to generation 2",
            host: "builder-1",
          });
          assert.equal(c.statusCode, 200, c.body);
        }
      });
      await simulateDay(4, async (hour) => {
        if (hour === 5) {
          const i = await t.post("/operator/api/dogfood/incidents", {
            id: "slow-cold-start",
            class: "declared",
            occurred_at: iso(t0 + 100 * HOUR_MS),
            service_blocking: false,
            detail: "cold lineage restore took four minutes",
          });
          assert.equal(i.statusCode, 200, i.body);
        }
        if (hour === 6) {
          const filed = await t.post("/operator/api/dogfood/incidents/issue", {
            incident: "slow-cold-start",
            number: 41,
            filed_at: t.clock.now().toISOString(),
          });
          assert.equal(filed.json().issue.filed_late, false, filed.body);
        }
        if (hour === 12) {
          const r = await t.post("/operator/api/dogfood/incidents/resolution", {
            incident: "slow-cold-start",
            detail: "restore streams the lineage now",
          });
          assert.equal(r.statusCode, 200, r.body);
        }
      });
      for (const d of [5, 6]) await simulateDay(d);
      await at(t0 + 7 * DAY_MS + 60_000);

      const week = await period();
      assert.equal(week.state, "running");
      assert.equal(week.clock.number, 1);
      assert.equal(week.clock.started_at, iso(t0));
      assert.deepEqual(
        week.closed_windows.map((w: { counts: boolean; consecutive: number }) => [w.counts, w.consecutive]),
        [
          [true, 1],
          [false, 0],
          [true, 1],
          [false, 0],
          [true, 1],
          [true, 2],
          [true, 3],
        ],
        "maintenance stops day 1 counting, the lifecycle change day 3; a non-blocking declared incident does not",
      );
      assert.deepEqual(
        week.closed_windows.map((w: { starts_at: string }) => w.starts_at),
        [0, 1, 2, 3, 4, 5, 6].map((d) => iso(t0 + d * DAY_MS)),
      );
      assert.match(week.closed_windows[1].reasons.join(), /declared maintenance m-db/);
      assert.match(week.closed_windows[3].reasons.join(), /lifecycle change host_generation generation-2/);
      assert.deepEqual(week.closed_windows[1].probes, {
        due: 4,
        passed: 3,
        failed: 0,
        unsettled: 0,
        missed: 0,
        declared_maintenance: 1,
      });
      assert.deepEqual(week.closed_windows[2].probes, {
        due: 4,
        passed: 4,
        failed: 0,
        unsettled: 0,
        missed: 0,
        declared_maintenance: 0,
      });
      assert.equal(week.closed_windows[2].run_records, 1);
      assert.equal(week.clock.counting_windows, 3);
      assert.equal(week.clock.ends_at, iso(t0 + 11 * DAY_MS), "four more counting windows complete seven");
      assert.deepEqual(week.open_window, { clock: 1, starts_at: iso(t0 + 7 * DAY_MS), ends_at: iso(t0 + 8 * DAY_MS) });
      assert.equal(week.scorecard.windows_counted, 5);
      assert.equal(week.scorecard.windows_not_counted, 2);
      assert.equal(week.scorecard.incidents, 1);
      assert.equal(week.scorecard.unresolved_incidents, 0);
      assert.equal(week.scorecard.probes.due, 28);
      assert.equal(week.scorecard.probes.declared_maintenance, 1);
      assert.equal(week.scorecard.month, "2026-11");
      assert.equal(week.scorecard.spend_cents, 12_000);
      assert.equal(week.scorecard.spend_ceiling_cents, 50_000);
      assert.equal(week.scorecard.within_ceiling, true);
      assert.equal(week.beta_decision, null);

      for (const d of [7, 8, 9, 10]) await simulateDay(d);
      await at(t0 + 11 * DAY_MS + 60_000);
      const ended = await period();
      assert.equal(ended.state, "ended");
      assert.equal(ended.closed_windows.length, 11);
      assert.equal(ended.clock.counting_windows, 7);
      assert.equal(ended.clock.ends_at, iso(t0 + 11 * DAY_MS));
      assert.equal(ended.open_window, null);
      assert.equal(ended.beta_decision.decision, "beta");
      assert.equal(ended.beta_decision.at, iso(t0 + 11 * DAY_MS));
      assert.equal(ended.scorecard.month, "2026-12");
      assert.equal(ended.scorecard.windows_counted, 9);
    });

    it("every run record reads by its identity, each absent field with its reason", async () => {
      const r = await t.get(`/operator/api/dogfood/records?id=${encodeURIComponent(heads[2] ?? "")}`);
      assert.equal(r.statusCode, 200, r.body);
      const record = r.json();
      assert.equal(record.kind, "head");
      assert.equal(record.id, heads[2]);
      assert.equal(record.status, "passed");
      assert.equal(record.duration_seconds, 300);
      assert.equal(record.settlements, 1);
      assert.deepEqual(record.window, { starts_at: iso(t0 + 2 * DAY_MS), ends_at: iso(t0 + 3 * DAY_MS) });
      assert.deepEqual(record.tests, { passed: 1, failed: 0, ignored: 1 });
      assert.ok(record.usage.vcpu_seconds > 0);
      assert.deepEqual(record.absent, [{ field: "failure", reason: "the job passed" }]);
      assert.deepEqual(record.threshold_labels, []);
      for (const [id, code] of [
        ["head:kiln/kiln@nosuchsha", "not_found"],
        [`${heads[2]}#2`, "not_found"],
        ["nonsense", "invalid_request"],
      ] as const) {
        assert.equal((await t.get(`/operator/api/dogfood/records?id=${encodeURIComponent(id)}`)).json().code, code, id);
      }
    });
  });

  describe(`dogfood ledger audit (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: DogfoodTestApp;
    before(async () => {
      t = await dogfoodTestApp(await dialect.openFresh());
    });
    after(() => t.close());

    it("a deliberately planted duplicate settlement row is found by the audit and stops the trial", async () => {
      await openGate(t);
      await t.clock.advance(3_600_000);
      const charged = await t.runJob({ tenant: DOGFOOD });
      assert.deepEqual(await t.audit(), [], "one settlement per job: nothing to find");
      // Plant a second settlement of the job straight into the ledger, as a double-charging bug would.
      const db = executorOf(t.storage);
      const last = await db
        .selectFrom("job_transitions")
        .select((eb) => eb.fn.max("position").as("position"))
        .where("job_id", "=", charged)
        .executeTakeFirstOrThrow();
      await t.clock.advance(60_000);
      const plantedAt = t.clock.now().toISOString();
      await db
        .insertInto("job_transitions")
        .values({
          job_id: charged,
          position: Number(last.position) + 1,
          from_status: "passed",
          to_status: "passed",
          at: plantedAt,
          reason: "planted duplicate settlement",
        })
        .execute();

      const found = await t.audit();
      assert.deepEqual(found, [{ id: `platform:duplicate_charge:${charged}`, class: "duplicate_charge" }]);
      const p = (await t.get("/operator/api/dogfood/period")).json();
      assert.equal(p.state, "stopped");
      assert.deepEqual(p.clock.stopped_by, [`platform:duplicate_charge:${charged}`]);
      assert.equal(p.clock.stopped_at, plantedAt);
      const incident = p.incidents.find((i: { id: string }) => i.id === `platform:duplicate_charge:${charged}`);
      assert.deepEqual(incident.records, [`shadow:${charged}`]);
      assert.equal(incident.recorded_by, "platform");
      const record = (await t.get(`/operator/api/dogfood/records?id=shadow:${charged}`)).json();
      assert.equal(record.settlements, 2);
      assert.ok(record.threshold_labels.includes("duplicate_charge"));
      assert.deepEqual(
        record.incidents.map((i: { id: string }) => i.id),
        [`platform:duplicate_charge:${charged}`],
      );
      assert.deepEqual(await t.audit(), [], "recorded exactly once");
    });

    it("finds a wrong green and a duplicate execution in the ledger and names their run records", async () => {
      const green = await t.runJob({
        tenant: DOGFOOD,
        report: (lease, now) => ({
          ...hostReport(lease, now),
          tests: [{ target: "kiln (lib)", name: "settle::twice", outcome: "failed", duration_ms: 3 }],
        }),
        cargoOutput: "test settle::twice ... FAILED\n\ntest result: FAILED. 0 passed; 1 failed\n",
      });
      const twice = await t.runJob({ tenant: PROBES });
      const db = executorOf(t.storage);
      const first = await db.selectFrom("attempts").selectAll().where("job_id", "=", twice).executeTakeFirstOrThrow();
      // Plant a second attempt of the same probe that also ran to the end.
      await db
        .insertInto("attempts")
        .values({ ...first, number: 2, lease_token: "planted" })
        .execute();

      const found = await t.audit();
      assert.deepEqual(
        found.sort((a, b) => a.class.localeCompare(b.class)),
        [
          { id: `platform:duplicate_execution:${twice}`, class: "duplicate_execution" },
          { id: `platform:wrong_green:${green}`, class: "wrong_green" },
        ],
      );
      const p = (await t.get("/operator/api/dogfood/period")).json();
      const wrong = p.incidents.find((i: { class: string }) => i.class === "wrong_green");
      assert.deepEqual(wrong.records, [`shadow:${green}`]);
      assert.match(wrong.detail, /failed tests in the report: settle::twice/);
      assert.match(wrong.detail, /test result: FAILED/);
      const dup = p.incidents.find((i: { class: string }) => i.class === "duplicate_execution");
      assert.deepEqual(dup.records, [`probe:${twice}`, `probe:${twice}#2`]);
      const labels = (await t.get(`/operator/api/dogfood/records?id=shadow:${green}`)).json().threshold_labels;
      assert.ok(labels.includes("wrong_green"));
    });

    it("labels a record whose duration is over its window's p95", async () => {
      const fast: string[] = [];
      for (let i = 0; i < 20; i += 1) fast.push(await t.runJob({ tenant: PROBES, seconds: 30 }));
      const slow = await t.runJob({ tenant: PROBES, seconds: 900 });
      const record = (await t.get(`/operator/api/dogfood/records?id=probe:${slow}`)).json();
      assert.ok(record.threshold_labels.includes("duration_over_window_p95"), JSON.stringify(record));
      assert.ok(record.window_p95_duration_seconds < 900);
      const quick = (await t.get(`/operator/api/dogfood/records?id=probe:${fast[0]}`)).json();
      assert.ok(!quick.threshold_labels.includes("duration_over_window_p95"));
    });
  });
}

describe("dogfood records in the served OpenAPI document", () => {
  it("documents DogfoodPeriod and DogfoodRunRecord field by field", async () => {
    const dialect = DIALECTS[0];
    assert.ok(dialect);
    const t = await dogfoodTestApp(await dialect.openFresh());
    try {
      const r = await t.app.inject({ method: "GET", url: "/api/openapi.json" });
      assert.equal(r.statusCode, 200);
      const schemas = r.json().components.schemas as Record<
        string,
        { description?: string; properties?: Record<string, Record<string, unknown>> }
      >;
      const described = (s: Record<string, unknown>): boolean => {
        if (typeof s.description === "string" && s.description.length > 0) return true;
        const ref = s.$ref;
        return typeof ref === "string" && typeof schemas[ref.split("/").at(-1) ?? ""]?.description === "string";
      };
      for (const name of ["DogfoodPeriod", "DogfoodRunRecord"]) {
        const schema = schemas[name];
        assert.ok(schema?.description, `${name} has a description`);
        const properties = Object.entries(schema?.properties ?? {});
        assert.ok(properties.length >= 10, `${name} lists its fields`);
        for (const [field, property] of properties) assert.ok(described(property), `${name}.${field} is described`);
      }
      const clock = schemas.DogfoodPeriod?.properties?.clock as { properties: Record<string, Record<string, unknown>> };
      for (const [field, property] of Object.entries(clock.properties)) {
        assert.ok(described(property), `DogfoodPeriod.clock.${field} is described`);
      }
    } finally {
      await t.close();
    }
  });
});
