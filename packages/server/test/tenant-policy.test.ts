import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createAgentCredential, listAuditEntries, listOperatorAuditEntries, onboardRepository } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { hashToken, mintToken } from "../src/domain/identity/token-format.js";
import { ARTIFACT_RETENTION_SECONDS } from "../src/domain/policy/platform-limits.js";
import { appWithTenant, bearer, callAs, personWithToken, type TestApp } from "../src/testing/harness.js";
import { acceptJob, claimJob, finishJob, inlineFile, inlineSubmission } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

const WIDGET = [
  inlineFile("Cargo.toml", '[package]\nname = "widget"\nversion = "0.1.0"\nedition = "2021"\n'),
  inlineFile("src/lib.rs", "pub fn f() {}\n"),
];
const submission = (size = "kiln2-cpu") => inlineSubmission("acme/widget", "test", WIDGET, { size });

/**
 * tenant.settings.get/write and operator.tenants.controls.get/set over HTTP on every dialect,
 * with the refusals the spec lists, and their enforcement at admission (sizes, agents,
 * suspension). The scheduler's side (concurrency, suspension at placement) is storage's
 * tenant-policy.test.ts.
 */
for (const dialect of DIALECTS) {
  describe(`tenant settings and controls (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let admin: { tenant: string; userId: string; token: string };
    let member: { token: string };
    let viewer: { token: string };
    let agentToken: string;
    let operator: OperatorClient;

    before(async () => {
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null }));
      member = await personWithToken(t.storage, { tenant: admin.tenant, role: "member" });
      viewer = await personWithToken(t.storage, { tenant: admin.tenant, role: "viewer" });
      await onboardRepository(
        t.storage,
        { tenantId: admin.tenant, name: "acme/widget", onboardedBy: admin.userId },
        t.clock.now(),
      );
      agentToken = mintToken("agent");
      await createAgentCredential(
        t.storage,
        {
          tenantId: admin.tenant,
          name: "bot",
          tokenHash: hashToken(agentToken),
          scopes: ["read", "submit"],
          createdBy: admin.userId,
          expiresAt: "2099-01-01T00:00:00.000Z",
          requestsPerMinute: 600,
        },
        t.clock.now(),
      );
      operator = await operatorClient(t.app, t.storage, t.clock.now());
    });
    after(() => t.close());

    const call = (method: "GET" | "POST", url: string, body?: unknown, token = admin.token) =>
      callAs(t, token, method, url, body);
    const op = async (method: "GET" | "POST", body?: object, tenant = admin.tenant) => {
      const url = `/operator/api/tenants/${tenant}`;
      const res = method === "GET" ? await operator.get(url) : await operator.post(url, body);
      return { status: res.statusCode, body: res.json() };
    };
    const write = (version: number, changes: Record<string, unknown>, token = admin.token) =>
      call("POST", "/api/tenant/settings", { version, changes }, token);
    const settingOf = (body: { settings: { name: string; value: unknown; origin: string }[] }, name: string) =>
      body.settings.find((s) => s.name === name);

    it("reads version 0: platform defaults, limits beside consumption, the operator-controlled names", async () => {
      const res = await call("GET", "/api/tenant/settings", undefined, viewer.token);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.version, 0);
      assert.equal(res.body.changed_by, null);
      assert.deepEqual(settingOf(res.body, "allowed_sizes")?.value, [
        "kiln2-cpu",
        "kiln4-cpu",
        "kiln8-cpu",
        "kiln16-cpu",
      ]);
      assert.equal(settingOf(res.body, "agents_may_submit")?.origin, "platform default");
      assert.equal(res.body.limits.max_running_jobs.consumption, 0);
      assert.equal(res.body.suspended, false);
      assert.ok(res.body.operator_controlled.includes("max_running_jobs"));
    });

    it("writes at the version read; a moved-past version is stale_version naming current_version; audited", async () => {
      const first = await write(0, { allowed_sizes: ["kiln2-cpu", "kiln4-cpu"], wall_clock_ceiling_seconds: 600 });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.version, 1);
      assert.equal(first.body.target, `tenant:${admin.tenant}`);
      assert.equal(first.body.effective, "next admitted job");
      assert.deepEqual(first.body.not_applied, []);
      const stale = await write(0, { default_size: "kiln4-cpu" });
      assert.equal(stale.status, 409);
      assert.equal(stale.body.code, "stale_version");
      assert.equal(stale.body.current_version, 1);
      const read = await call("GET", "/api/tenant/settings");
      assert.equal(read.body.version, 1);
      assert.equal(read.body.changed_by, admin.userId);
      assert.equal(settingOf(read.body, "wall_clock_ceiling_seconds")?.origin, "tenant setting");
      const audit = await listAuditEntries(t.storage, { tenantId: admin.tenant, limit: 50 });
      assert.ok(
        audit.entries.some((e) => e.target === `tenant-settings:${admin.tenant}` && e.value.startsWith("version 1")),
      );
    });

    it("refuses invalid_request naming the field; role and scope are enforced", async () => {
      const unknown = await write(1, { affected_tests: true });
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.detail, /body\.changes\.affected_tests/);
      const outside = await write(1, { default_size: "kiln8-cpu" });
      assert.equal(outside.status, 400);
      assert.match(outside.body.detail, /default_size/);
      const badCeiling = await write(1, { wall_clock_ceiling_seconds: 10 ** 7 });
      assert.equal(badCeiling.status, 400);
      assert.match(badCeiling.body.detail, /wall_clock_ceiling_seconds/);
      const byMember = await write(1, { default_size: "kiln4-cpu" }, member.token);
      assert.equal(byMember.status, 403);
      assert.equal(byMember.body.code, "out_of_scope", "a member's token carries no settings scope");
      assert.equal(byMember.body.scope, "settings");
      const byAgent = await write(1, { default_size: "kiln4-cpu" }, agentToken);
      assert.equal(byAgent.status, 403);
      assert.equal(byAgent.body.code, "out_of_scope");
    });

    it("an operator-controlled setting is refused operator_controlled, and the refusal is audited", async () => {
      const refused = await write(1, { max_running_jobs: 100 });
      assert.equal(refused.status, 403, JSON.stringify(refused.body));
      assert.equal(refused.body.code, "operator_controlled");
      const audit = await listAuditEntries(t.storage, { tenantId: admin.tenant, limit: 50 });
      assert.ok(audit.entries.some((e) => e.value === "refused operator_controlled: max_running_jobs"));
      assert.equal((await call("GET", "/api/tenant/settings")).body.version, 1, "nothing was written");
    });

    it("admission enforces allowed sizes, the tenant ceiling and agents_may_submit", async () => {
      const big = await call("POST", "/api/v4/jobs", submission("kiln8-cpu"), member.token);
      assert.equal(big.status, 400);
      assert.match(big.body.detail, /body\.size kiln8-cpu/);
      const ok = await call("POST", "/api/v4/jobs", submission(), agentToken);
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const row = await t.storage.db
        .selectFrom("jobs")
        .select(["wall_clock_seconds", "admitted"])
        .where("id", "=", ok.body)
        .executeTakeFirstOrThrow();
      assert.equal(row.wall_clock_seconds, 600, "the tenant's default ceiling");
      assert.equal(JSON.parse(row.admitted ?? "{}").wall_clock_ceiling.origin, "tenant setting");
      assert.equal((await write(1, { agents_may_submit: false })).status, 200);
      const agent = await call("POST", "/api/v4/jobs", submission(), agentToken);
      assert.equal(agent.status, 403);
      assert.equal(agent.body.code, "out_of_scope");
      assert.equal(agent.body.scope, "submit");
      assert.equal((await call("POST", "/api/v4/jobs", submission(), member.token)).status, 200, "people still may");
    });

    it("operator controls: read, set at the version (conflict otherwise), audited; session required", async () => {
      const anonymous = await t.app.inject({ method: "GET", url: `/operator/api/tenants/${admin.tenant}` });
      assert.equal(anonymous.statusCode, 404);
      assert.equal(anonymous.json().code, "operator_not_found");
      const tenantToken = await t.app.inject({
        method: "GET",
        url: `/operator/api/tenants/${admin.tenant}`,
        headers: bearer(admin.token),
      });
      assert.equal(tenantToken.json().code, "operator_not_found");

      const read = await op("GET");
      assert.equal(read.status, 200, JSON.stringify(read.body));
      assert.equal(read.body.version, 0);
      assert.equal(read.body.consumption.running_jobs, 0);
      const set = await op("POST", {
        expected_version: 0,
        changes: {
          max_running_jobs: 1,
          storage_quota_bytes: 2 ** 30,
          bandwidth_bytes_per_month: 2 ** 34,
          rate_card: { cents_per_vcpu_second: 0.002, cents_per_gib_month: 5, cents_per_gib_uploaded: 1 },
        },
        note: "trial limits",
      });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      assert.equal(set.body.version, 1);
      assert.equal(set.body.max_running_jobs, 1);
      assert.equal(set.body.rate_card.cents_per_gib_uploaded, 1);
      assert.match(set.body.changed_by, /^operator:/);
      const stale = await op("POST", { expected_version: 0, changes: { max_running_jobs: 2 } });
      assert.equal(stale.status, 409);
      assert.equal(stale.body.code, "conflict");
      const invalid = await op("POST", { expected_version: 1, changes: { max_running_jobs: -1 } });
      assert.equal(invalid.status, 400);
      assert.equal(invalid.body.code, "invalid_request");
      const noReason = await op("POST", { expected_version: 1, changes: { suspension: { suspended: true } } });
      assert.equal(noReason.status, 400);
      assert.match(noReason.body.detail, /suspension\.reason/);
      const unknownTenant = await op("POST", { expected_version: 0, changes: { max_running_jobs: 2 } }, "nosuch");
      assert.equal(unknownTenant.status, 400);

      const settings = await call("GET", "/api/tenant/settings");
      assert.equal(settings.body.limits.max_running_jobs.limit, 1);
      assert.equal(settings.body.limits.storage_quota_bytes.limit, 2 ** 30);
      const repos = await call("GET", "/api/repositories");
      assert.equal(repos.body.storage_quota_bytes, 2 ** 30, "the tenant's own quota is the one in force");
      const audit = await listOperatorAuditEntries(t.storage, { limit: 100 });
      const mine = audit.entries.filter((e) => e.target === `tenant-controls:${admin.tenant}`);
      assert.deepEqual(mine.map((e) => JSON.parse(e.value).outcome).sort(), ["conflict", "performed"]);
    });

    it("suspension refuses a new submission with conflict naming it; lifting it admits again", async () => {
      const suspended = await op("POST", {
        expected_version: 1,
        changes: { suspension: { suspended: true, reason: "payment overdue" } },
      });
      assert.equal(suspended.status, 200, JSON.stringify(suspended.body));
      assert.equal(suspended.body.suspension.suspended, true);
      assert.equal((await call("GET", "/api/tenant/settings")).body.suspended, true);
      const refused = await call("POST", "/api/v4/jobs", submission(), member.token);
      assert.equal(refused.status, 409);
      assert.equal(refused.body.code, "conflict");
      assert.match(refused.body.detail, /suspended by the operator .*payment overdue/);
      const queued = await t.storage.db
        .selectFrom("jobs")
        .select(["status", "queue_annotation"])
        .where("tenant_id", "=", admin.tenant)
        .where("status", "=", "queued")
        .execute();
      assert.ok(queued.length > 0);
      for (const job of queued) assert.match(job.queue_annotation ?? "", /is suspended by the operator/);
      const lifted = await op("POST", { expected_version: 2, changes: { suspension: { suspended: false } } });
      assert.equal(lifted.status, 200);
      assert.equal(lifted.body.suspension.since, null);
      assert.equal((await call("POST", "/api/v4/jobs", submission(), member.token)).status, 200);
    });

    it("artifact retention: artifacts are served for the tenant's days from publication, then gone", async () => {
      const own = await personWithToken(t.storage, { role: "admin", now: t.clock.now() });
      /** A job of `own`'s tenant that publishes one artifact now; its inventory. */
      const publish = async () => {
        const job = await acceptJob(t.storage, { tenant: own.tenant, now: t.clock.now(), repository: "acme/widget" });
        const lease = await claimJob(t.storage, job.id, t.clock.now());
        await finishJob(t.storage, t.deps.blobs, lease, {
          now: t.clock.now(),
          artifacts: [{ path: "target/release/widget", bytes: Buffer.from("widget") }],
          retentionSeconds: ARTIFACT_RETENTION_SECONDS,
        });
        const inventory = await call("GET", `/api/jobs/${job.id}/artifacts`, undefined, own.token);
        assert.equal(inventory.status, 200, JSON.stringify(inventory.body));
        return { id: job.id, publishedAt: t.clock.now().getTime(), expiresAt: Date.parse(inventory.body.expires_at) };
      };
      const setting = async () =>
        settingOf((await call("GET", "/api/tenant/settings", undefined, own.token)).body, "artifact_retention_days") as
          | Record<string, unknown>
          | undefined;

      // Never written: the platform's retention, applied.
      assert.deepEqual(await setting(), {
        name: "artifact_retention_days",
        value: ARTIFACT_RETENTION_SECONDS / 86_400,
        origin: "platform default",
        status: "applied",
      });
      const before = await publish();
      assert.equal(before.expiresAt - before.publishedAt, ARTIFACT_RETENTION_SECONDS * 1000);

      const written = await write(0, { artifact_retention_days: 2 }, own.token);
      assert.equal(written.status, 200, JSON.stringify(written.body));
      assert.deepEqual(written.body.not_applied, [], "the write says it applies");
      assert.equal((await setting())?.status, "applied");
      await t.clock.advance(60_000);
      const after = await publish();
      assert.equal(after.expiresAt - after.publishedAt, 2 * 86_400 * 1000, "published after the write: 2 days");

      // Past its two days the later job's artifacts are gone, its file too; the earlier job keeps
      // the retention it was published under (retention is never changed after publication).
      await t.clock.advance(2 * 86_400 * 1000);
      const gone = await call("GET", `/api/jobs/${after.id}/artifacts`, undefined, own.token);
      assert.equal(gone.status, 410, JSON.stringify(gone.body));
      assert.equal(gone.body.code, "gone");
      const file = await t.app.inject({
        method: "GET",
        url: `/api/jobs/${after.id}/artifacts/1/0`,
        headers: bearer(own.token),
      });
      assert.equal(file.statusCode, 410);
      assert.equal((await call("GET", `/api/jobs/${before.id}/artifacts`, undefined, own.token)).status, 200);
    });
  });
}
