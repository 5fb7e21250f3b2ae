import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { reclaimExpiredLeases, recordCanarySubmission, reserveCanary } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { claimJob, finishJob, hostReport } from "../src/testing/job-fixtures.js";
import { DOGFOOD, type DogfoodTestApp, dogfoodTestApp, openGate, PROBES } from "./dogfood-fixtures.js";

/** Operator rules 10 to 13 of the dogfood trial, each quoted, through the HTTP routes on the injected clock. */

const HOUR = 3600;
const iso = (ms: number) => new Date(ms).toISOString();

for (const dialect of DIALECTS) {
  describe(`dogfood rule 10: incidents (${dialect.name})`, { skip: dialect.skip }, () => {
    // "Incident recording: a wrong green, cross-tenant disclosure, duplicate execution or duplicate
    // charge names the run records that exposed it and stops the trial at once. The platform records
    // unexpected outages and bounded recoveries itself. An issue filed on a different UTC day than
    // the incident is recorded and published as filed late. No run resolves an incident."
    let t: DogfoodTestApp;
    let probe: string;
    let occurredAt: string;
    const incident = (body: object) => t.post("/operator/api/dogfood/incidents", body);
    const period = async () => (await t.get("/operator/api/dogfood/period")).json();

    before(async () => {
      t = await dogfoodTestApp(await dialect.openFresh());
      await openGate(t);
      probe = `probe:${await t.runJob({ tenant: PROBES })}`;
      await t.clock.advance(HOUR * 1000);
      occurredAt = iso(t.clock.now().getTime() - 600_000);
    });
    after(() => t.close());

    it("a zero-tolerance class names the run records that exposed it, known to the ledger", async () => {
      const base = {
        id: "xt-1",
        class: "cross_tenant_disclosure",
        occurred_at: occurredAt,
        service_blocking: true,
        detail: "a probe saw another tenant's log line",
      };
      for (const [body, why] of [
        [base, /names at least one run record/],
        [{ ...base, records: ["probe:job_missing"] }, /no run record probe:job_missing/],
        [{ ...base, records: [probe], occurred_at: iso(t.clock.now().getTime() + 60_000) }, /in the future/],
      ] as const) {
        const r = await incident(body);
        assert.equal(r.json().code, "invalid_request", r.body);
        assert.match(r.json().detail, why);
      }
      const running = await period();
      assert.equal(running.state, "running", "nothing was recorded by a refusal");
    });

    it("stops the trial at once; the same incident again is the recorded one, other content is conflict", async () => {
      const body = {
        id: "xt-1",
        class: "cross_tenant_disclosure",
        occurred_at: occurredAt,
        service_blocking: true,
        detail: "a probe saw another tenant's log line",
        records: [probe],
      };
      const r = await incident(body);
      assert.equal(r.statusCode, 200, r.body);
      assert.deepEqual(r.json().records, [probe]);
      assert.equal(r.json().issue, null);
      assert.equal(r.json().resolution, null);
      const stopped = await period();
      assert.equal(stopped.state, "stopped");
      assert.equal(stopped.clock.stopped_at, occurredAt);
      assert.deepEqual(stopped.clock.stopped_by, ["xt-1"]);
      assert.equal(stopped.clock.ends_at, null);
      const cut = stopped.closed_windows.at(-1);
      assert.equal(cut.ends_at, occurredAt, "the window closes at the incident, not counting");
      assert.equal(cut.counts, false);
      assert.match(cut.reasons[0], /xt-1 .*stopped the trial/);

      assert.equal((await incident(body)).statusCode, 200);
      const other = await incident({ ...body, detail: "something else" });
      assert.equal(other.statusCode, 409, other.body);
      const named = (await t.get(`/operator/api/dogfood/records?id=${encodeURIComponent(probe)}`)).json();
      assert.deepEqual(
        named.incidents.map((i: { id: string }) => i.id),
        ["xt-1"],
        "the run record lists the incident naming it",
      );
    });

    it("no run resolves an incident: a later passing run and an audit pass leave the trial stopped", async () => {
      await t.clock.advance(HOUR * 1000);
      await t.runJob({ tenant: DOGFOOD });
      await t.runJob({ tenant: PROBES });
      await t.audit();
      const still = await period();
      assert.equal(still.state, "stopped");
      assert.equal(still.incidents.find((i: { id: string }) => i.id === "xt-1").resolution, null);
    });

    it("an issue filed on a different UTC day than the incident is recorded and published as filed late", async () => {
      const issue = (body: object) => t.post("/operator/api/dogfood/incidents/issue", body);
      const sameDay = await incident({
        id: "d-1",
        class: "declared",
        occurred_at: occurredAt,
        service_blocking: false,
        detail: "slow queue",
      });
      assert.equal(sameDay.statusCode, 200, sameDay.body);
      const onTime = await issue({ incident: "d-1", number: 11, filed_at: t.clock.now().toISOString() });
      assert.equal(onTime.statusCode, 200, onTime.body);
      assert.equal(onTime.json().issue.filed_late, false);

      await t.clock.advance(20 * HOUR * 1000); // the next UTC day
      const late = await issue({ incident: "xt-1", number: 12, filed_at: t.clock.now().toISOString() });
      assert.equal(late.statusCode, 200, late.body);
      assert.equal(late.json().issue.number, 12);
      assert.equal(late.json().issue.filed_late, true);
      const published = await period();
      assert.equal(published.incidents.find((i: { id: string }) => i.id === "xt-1").issue.filed_late, true);
      assert.equal(published.scorecard.issues_filed_late, 1);

      assert.equal(
        (await issue({ incident: "nope", number: 1, filed_at: t.clock.now().toISOString() })).json().code,
        "not_found",
      );
      assert.equal(
        (await issue({ incident: "xt-1", number: 13, filed_at: t.clock.now().toISOString() })).json().code,
        "conflict",
      );
      assert.equal(
        (await issue({ incident: "d-1", number: 11, filed_at: "2020-01-01T00:00:00Z" })).json().code,
        "invalid_request",
      );
    });

    it("resolving the incident starts a new clock at the resolution", async () => {
      const resolve = (body: object) => t.post("/operator/api/dogfood/incidents/resolution", body);
      assert.equal((await resolve({ incident: "nope", detail: "x" })).json().code, "not_found");
      const resolvedAt = t.clock.now().toISOString();
      const r = await resolve({ incident: "xt-1", detail: "log isolation fixed in 0.4.2" });
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().resolution.detail, "log isolation fixed in 0.4.2");
      assert.equal((await resolve({ incident: "xt-1", detail: "log isolation fixed in 0.4.2" })).statusCode, 200);
      assert.equal((await resolve({ incident: "xt-1", detail: "otherwise" })).json().code, "conflict");
      const resumed = await period();
      assert.equal(resumed.state, "running");
      assert.equal(resumed.clock.number, 2);
      assert.equal(resumed.clock.started_at, resolvedAt);
      assert.equal(resumed.clock.ends_at, iso(Date.parse(resolvedAt) + 7 * 24 * HOUR * 1000));
      const audit = await t.operatorAudit();
      for (const op of [
        "operator.dogfood.incidents.record",
        "operator.dogfood.incidents.issue",
        "operator.dogfood.incidents.resolve",
      ]) {
        assert.ok(
          audit.some((e) => e.operation === op && e.outcome === "performed"),
          op,
        );
      }
    });

    it("the platform records unexpected outages and bounded recoveries itself, each exactly once", async () => {
      const failedProbe = await t.runJob({ tenant: PROBES, outcome: "failed" });
      // A dogfood job whose first attempt is lost with its host and whose second passes.
      const recovered = await t.queueJob({ tenant: DOGFOOD });
      await claimJob(t.storage, recovered, t.clock.now(), 60);
      await t.clock.advance(120_000);
      assert.deepEqual(await reclaimExpiredLeases(t.storage, t.clock.now()), [{ jobId: recovered, attempt: 1 }]);
      const second = await claimJob(t.storage, recovered, t.clock.now());
      await t.clock.advance(60_000);
      await finishJob(t.storage, t.deps.blobs, second, {
        now: t.clock.now(),
        report: hostReport(second, t.clock.now()),
      });

      const found = await t.audit();
      assert.deepEqual(found.map((f) => f.id).sort(), [
        `platform:bounded_recovery:${recovered}`,
        `platform:outage:${failedProbe}`,
      ]);
      assert.deepEqual(await t.audit(), [], "a second pass records nothing again");
      const incidents = (await period()).incidents as {
        id: string;
        recorded_by: string;
        service_blocking: boolean;
        records: string[];
      }[];
      const outage = incidents.find((i) => i.id === `platform:outage:${failedProbe}`);
      assert.equal(outage?.recorded_by, "platform");
      assert.equal(outage?.service_blocking, true);
      assert.deepEqual(outage?.records, [`probe:${failedProbe}`]);
      const recovery = incidents.find((i) => i.id === `platform:bounded_recovery:${recovered}`);
      assert.deepEqual(recovery?.records, [`shadow:${recovered}`, `shadow:${recovered}#2`]);
      assert.ok(
        (await t.operatorAudit()).some(
          (e) => e.actor === "platform" && e.target === `dogfood:incident:platform:outage:${failedProbe}`,
        ),
      );
    });

    it("a reserved probe whose job did not finish by its late bound is a missed probe: one outage, also when its job fails afterwards", async () => {
      const canary = "canary-late";
      const reserved = await reserveCanary(t.storage, {
        id: canary,
        tenantId: PROBES,
        hostId: "probe-host",
        dueAt: t.clock.now(),
        now: t.clock.now(),
      });
      assert.equal(reserved, true);
      const job = await t.queueJob({ tenant: PROBES });
      await recordCanarySubmission(t.storage, { id: canary, jobId: job, now: t.clock.now() });
      assert.deepEqual(await t.audit(), [], "within its late bound it is not missed yet");

      // The late bound is one canary interval after the reservation (300 s by default).
      await t.clock.advance(300_000);
      assert.deepEqual(await t.audit(), [{ id: `platform:outage:${job}`, class: "outage" }]);
      const outage = ((await period()).incidents as { id: string; records: string[]; detail: string }[]).find(
        (i) => i.id === `platform:outage:${job}`,
      );
      assert.deepEqual(outage?.records, [`probe:${job}`]);
      assert.match(outage?.detail ?? "", /had not finished by its late bound/);

      const lease = await claimJob(t.storage, job, t.clock.now());
      await t.clock.advance(60_000);
      await finishJob(t.storage, t.deps.blobs, lease, {
        now: t.clock.now(),
        outcome: "failed",
        report: hostReport(lease, t.clock.now()),
      });
      assert.deepEqual(await t.audit(), [], "its job failing afterwards is the same outage, not a second");
    });
  });

  describe(`dogfood rule 11: maintenance (${dialect.name})`, { skip: dialect.skip }, () => {
    // "Maintenance: an interval of at most 24 hours declared before it begins; every probe due
    // inside it is accounted as declared maintenance and a window containing it does not count."
    let t: DogfoodTestApp;
    let opened: number;
    const declare = (body: object) => t.post("/operator/api/dogfood/maintenance", body);
    before(async () => {
      t = await dogfoodTestApp(await dialect.openFresh());
      opened = Date.parse(await openGate(t));
    });
    after(() => t.close());

    it("refuses an interval over 24 hours, one not declared before it begins, and one that ends before it starts", async () => {
      const now = t.clock.now().getTime();
      for (const [body, why] of [
        [
          { id: "m-long", starts_at: iso(now + HOUR * 1000), ends_at: iso(now + 26 * HOUR * 1000), reason: "too long" },
          /at most 24 hours/,
        ],
        [
          { id: "m-past", starts_at: iso(now - 60_000), ends_at: iso(now + HOUR * 1000), reason: "already begun" },
          /before it begins/,
        ],
        [
          { id: "m-back", starts_at: iso(now + 2 * HOUR * 1000), ends_at: iso(now + HOUR * 1000), reason: "backwards" },
          /after starts_at/,
        ],
      ] as const) {
        const r = await declare(body);
        assert.equal(r.json().code, "invalid_request", r.body);
        assert.match(r.json().detail, why);
      }
    });

    it("a probe due inside is accounted as declared maintenance, raises no outage, and its window does not count; one reserved outside and never run is a missed probe, one outage", async () => {
      // A probe is due when the platform reserves its canary (before submitting it), whether or
      // not its job ever runs; these two are reserved and never submitted.
      const reserve = (id: string) =>
        reserveCanary(t.storage, {
          id,
          tenantId: PROBES,
          hostId: "probe-host",
          dueAt: t.clock.now(),
          now: t.clock.now(),
        });
      const body = {
        id: "m-1",
        starts_at: iso(opened + 2 * HOUR * 1000),
        ends_at: iso(opened + 3 * HOUR * 1000),
        reason: "database upgrade",
      };
      const r = await declare(body);
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().declared_at, t.clock.now().toISOString());
      assert.ok(r.json().declared_by.length > 0);
      assert.equal((await declare(body)).statusCode, 200, "the same declaration again is the recorded one");
      assert.equal((await declare({ ...body, reason: "other" })).json().code, "conflict");

      await t.clock.advance(2.5 * HOUR * 1000);
      const inside = await t.runJob({ tenant: PROBES, outcome: "failed" });
      assert.equal(await reserve("canary-inside-maintenance"), true);
      await t.clock.advance(HOUR * 1000);
      await t.runJob({ tenant: PROBES });
      assert.equal(await reserve("canary-outside-maintenance"), true);
      assert.deepEqual(await t.audit(), [], "a probe failing inside declared maintenance is no unexpected outage");

      // Past both reservations' late bound (one canary interval, 300 s by default): the one
      // inside maintenance is still declared maintenance; the one outside is a missed probe,
      // which the ledger audit records as an outage — once, however often it runs.
      await t.clock.advance(HOUR * 1000);
      assert.deepEqual(await t.audit(), [{ id: "platform:outage:canary-outside-maintenance", class: "outage" }]);
      assert.deepEqual(await t.audit(), [], "a missed probe is recorded once");
      const incidents = (await t.get("/operator/api/dogfood/period")).json().incidents as {
        id: string;
        class: string;
        service_blocking: boolean;
        detail: string;
      }[];
      const outages = incidents.filter((i) => i.class === "outage");
      assert.deepEqual(
        outages.map((i) => [i.id, i.service_blocking]),
        [["platform:outage:canary-outside-maintenance", true]],
      );
      assert.match(
        outages[0]?.detail ?? "",
        /canary-outside-maintenance .*outside declared maintenance, never became a job/,
      );
      const record = (await t.get(`/operator/api/dogfood/records?id=probe:${inside}`)).json();
      assert.ok(record.threshold_labels.includes("declared_maintenance"));

      await t.clock.advance(24 * HOUR * 1000);
      const p = (await t.get("/operator/api/dogfood/period")).json();
      const first = p.closed_windows[0];
      assert.equal(first.counts, false);
      assert.match(first.reasons.join(" "), /declared maintenance m-1/);
      assert.match(first.reasons.join(" "), /service-blocking incident platform:outage:canary-outside-maintenance/);
      assert.deepEqual(first.probes, {
        due: 4,
        passed: 1,
        failed: 0,
        unsettled: 0,
        missed: 1,
        declared_maintenance: 2,
      });
      assert.equal(p.clock.counting_windows, 0);
    });
  });

  describe(`dogfood rule 12: lifecycle changes and interventions (${dialect.name})`, { skip: dialect.skip }, () => {
    // "A lifecycle change falling in a window means that window does not count and the consecutive
    // count starts again after it." States and transitions: "dogfood trial | running | a routine
    // intervention recorded | | failed | one routine intervention fails the period".
    let t: DogfoodTestApp;
    let opened: number;
    before(async () => {
      t = await dogfoodTestApp(await dialect.openFresh());
      opened = Date.parse(await openGate(t));
    });
    after(() => t.close());

    it("the window a lifecycle change falls in does not count and the consecutive count starts again", async () => {
      const change = {
        kind: "guest_image_release",
        identity: `sha256:${"e".repeat(64)}`,
        at: iso(opened + 30 * HOUR * 1000),
        detail: "new guest image",
      };
      assert.equal(
        (await t.post("/operator/api/dogfood/lifecycle-changes", change)).json().code,
        "invalid_request",
        "at is in the future",
      );
      await t.clock.advance(31 * HOUR * 1000);
      const r = await t.post("/operator/api/dogfood/lifecycle-changes", change);
      assert.equal(r.statusCode, 200, r.body);
      assert.equal((await t.post("/operator/api/dogfood/lifecycle-changes", change)).statusCode, 200);
      assert.equal(
        (await t.post("/operator/api/dogfood/lifecycle-changes", { ...change, detail: "x" })).json().code,
        "conflict",
      );
      await t.clock.advance(41 * HOUR * 1000); // 72 hours after the gate opened
      const p = (await t.get("/operator/api/dogfood/period")).json();
      assert.deepEqual(
        p.closed_windows.map((w: { counts: boolean; consecutive: number }) => [w.counts, w.consecutive]),
        [
          [true, 1],
          [false, 0],
          [true, 1],
        ],
      );
      assert.match(p.closed_windows[1].reasons[0], /lifecycle change guest_image_release/);
      assert.equal(p.clock.counting_windows, 1);
      assert.equal(p.clock.ends_at, iso(opened + (72 + 6 * 24) * HOUR * 1000));
    });

    it("a non-routine intervention leaves the period running; a routine one fails it", async () => {
      const intervene = (body: object) => t.post("/operator/api/dogfood/interventions", body);
      const bad = await intervene({
        id: "i-0",
        action: "x",
        routine: false,
        at: t.clock.now().toISOString(),
        records: ["shadow:job_none"],
      });
      assert.equal(bad.json().code, "invalid_request");
      const once = await intervene({
        id: "i-1",
        action: "restarted a stuck host by hand",
        routine: false,
        at: t.clock.now().toISOString(),
      });
      assert.equal(once.statusCode, 200, once.body);
      assert.equal(once.json().period_failed, false);
      assert.equal((await t.get("/operator/api/dogfood/period")).json().state, "running");
      await t.clock.advance(HOUR * 1000);
      const routine = await intervene({
        id: "i-2",
        action: "cleared the cache volume, as every week",
        routine: true,
        at: t.clock.now().toISOString(),
      });
      assert.equal(routine.statusCode, 200, routine.body);
      assert.equal(routine.json().period_failed, true);
      const p = (await t.get("/operator/api/dogfood/period")).json();
      assert.equal(p.state, "failed");
      assert.equal(p.clock.ends_at, null);
      assert.equal(p.beta_decision.decision, "no_beta");
      assert.match(p.beta_decision.reasons[0], /routine intervention i-2 failed the period/);
      assert.equal(p.scorecard.routine_interventions, 1);
    });
  });

  describe(`dogfood rule 13: spend against the plan (${dialect.name})`, { skip: dialect.skip }, () => {
    // "The scorecard compares the month's recorded spend with the ceiling of the recorded spend plan."
    let t: DogfoodTestApp;
    before(async () => {
      t = await dogfoodTestApp(await dialect.openFresh());
    });
    after(() => t.close());

    it("the scorecard compares the month's spend with the plan's ceiling", async () => {
      const spend = (source: string, amount: number, month = "2026-11") =>
        t.post("/operator/api/dogfood/spend", { month, source, amount_cents: amount });
      assert.equal((await spend("plan", 100_000)).statusCode, 200);
      assert.equal((await spend("hetzner", 60_000)).json().month_total_cents, 60_000);
      assert.equal((await spend("invoice-2026-11-007", 30_000)).json().month_total_cents, 90_000);
      let card = (await t.get("/operator/api/dogfood/period")).json().scorecard;
      assert.equal(card.month, "2026-11");
      assert.equal(card.spend_cents, 90_000);
      assert.equal(card.spend_ceiling_cents, 100_000);
      assert.equal(card.within_ceiling, true);

      assert.equal((await spend("hetzner", 60_000)).statusCode, 200, "the same line again is the recorded one");
      assert.equal((await spend("hetzner", 61_000)).json().code, "conflict");
      await spend("backups", 20_000);
      await spend("hetzner", 500, "2026-10");
      card = (await t.get("/operator/api/dogfood/period")).json().scorecard;
      assert.equal(card.spend_cents, 110_000);
      assert.equal(card.within_ceiling, false);
      assert.deepEqual(card.months[0], {
        month: "2026-10",
        spend_cents: 500,
        spend_ceiling_cents: null,
        within_ceiling: null,
      });
      const audit = await t.operatorAudit();
      assert.equal(
        audit.filter((e) => e.operation === "operator.dogfood.spend.record").length,
        7,
        "every recording, conflict included, is audited",
      );
    });
  });
}
