import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { signIn } from "../src/testing/sign-in.js";
import { finishColdJob } from "./cold-job-fixture.js";

const ORIGIN = "http://kiln.test";
const REPOSITORY = "acme/widget";
const LINEAGE = "lin_acme_widget";

/** The value of `attribute` on the element with `id` in an HTML page, or undefined. */
function attributeOf(html: string, id: string, attribute: string): string | undefined {
  const tag = new RegExp(`<[^>]*\\bid="${id}"[^>]*>`).exec(html)?.[0];
  return tag === undefined ? undefined : new RegExp(`\\b${attribute}="([^"]*)"`).exec(tag)?.[1];
}

/**
 * The repository, tenant, credential and usage pages through the app on both engines, as a
 * browser submits their forms (urlencoded, Origin of kiln's own pages, the form's idempotency
 * key): every mutation is the operation's own handler behind its scope, so a role that may not
 * act sees no button and is refused all the same.
 */
for (const dialect of DIALECTS) {
  describe(`tenant and repository pages (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: Awaited<ReturnType<typeof personWithToken>>;
    let adminCookie: string;
    let viewerCookie: string;
    let generation = 0;

    const coldJob = async () => {
      generation += 1;
      await finishColdJob(t, {
        token: owner.token,
        repository: REPOSITORY,
        lineage: LINEAGE,
        reason: "evicted",
        savedBytes: 3 * 1024 * 1024,
        generation,
      });
    };

    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
      const admin = await personWithToken(t.storage, { tenant: owner.tenant, role: "admin", now: t.clock.now() });
      const viewer = await personWithToken(t.storage, { tenant: owner.tenant, role: "viewer", now: t.clock.now() });
      await onboardRepository(
        t.storage,
        { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "test" },
        t.clock.now(),
      );
      for (let i = 0; i < 3; i++) await coldJob();
      adminCookie = await signIn(t.app, t.storage, admin.email, undefined, t.clock);
      viewerCookie = await signIn(t.app, t.storage, viewer.email, undefined, t.clock);
    });
    after(() => t.close());

    const get = (url: string, cookie = adminCookie) =>
      t.app.inject({ method: "GET", url, cookies: { kiln_session: cookie } });
    /** A form post as the browser sends it from kiln's own page (a fresh idempotency key unless given). */
    const post = (
      url: string,
      fields: Record<string, string | string[]>,
      options: { cookie?: string; origin?: string; key?: string } = {},
    ) => {
      const form = new URLSearchParams();
      form.set("idempotency_key", options.key ?? randomUUID());
      for (const [name, value] of Object.entries(fields)) {
        for (const v of Array.isArray(value) ? value : [value]) form.append(name, v);
      }
      return t.app.inject({
        method: "POST",
        url,
        cookies: { kiln_session: options.cookie ?? adminCookie },
        headers: { "content-type": "application/x-www-form-urlencoded", origin: options.origin ?? ORIGIN },
        payload: form.toString(),
      });
    };
    const api = async (url: string) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(owner.token) });
      assert.equal(res.statusCode, 200, res.body);
      return res.json();
    };

    it("lists the repositories with their storage, and shows one with its lineages, advisory and settings", async () => {
      const list = await get("/repositories");
      assert.equal(list.statusCode, 200, list.body);
      assert.match(list.body, /data-repository="acme\/widget"/);
      assert.match(list.body, /3\.00 MiB/);

      const page = await get(`/repositories/${REPOSITORY}`);
      assert.equal(page.statusCode, 200, page.body);
      assert.match(page.body, new RegExp(`data-lineage="${LINEAGE}"`));
      assert.match(page.body, /Tenant storage quota: /);
      assert.match(page.body, /<form method="post" action="\/repositories\/acme\/widget\/purges" class="purge">/);
      assert.match(page.body, /data-advisory="[^"]+"/, "the always-cold lineage is advised");
      assert.match(page.body, /Measured: <span class="mono">/);
      assert.match(page.body, /Version <span id="settings-version">\d+<\/span>/);
    });

    it("saves a repository setting at the version read; a stale version says so and saves nothing", async () => {
      const before = (await api(`/api/repositories/${REPOSITORY}/settings`)) as {
        version: number;
        affected_tests: boolean;
      };
      const saved = await post(`/repositories/${REPOSITORY}/settings`, {
        version: String(before.version),
        affected_tests: before.affected_tests ? [] : "true",
        wall_clock_ceiling_seconds: String(
          ((await api(`/api/repositories/${REPOSITORY}/settings`)) as { wall_clock_ceiling_seconds: number })
            .wall_clock_ceiling_seconds,
        ),
      });
      assert.equal(saved.statusCode, 303, saved.body);
      assert.equal(saved.headers.location, `/repositories/${REPOSITORY}?notice=saved`);
      const after = (await api(`/api/repositories/${REPOSITORY}/settings`)) as {
        version: number;
        affected_tests: boolean;
        wall_clock_ceiling_seconds: number;
      };
      assert.equal(after.version, before.version + 1);
      assert.equal(after.affected_tests, !before.affected_tests);

      // The same form again (the version it read is now old) with another change: refused, shown the current values.
      const stale = await post(`/repositories/${REPOSITORY}/settings`, {
        version: String(before.version),
        ...(after.affected_tests ? { affected_tests: "true" } : {}),
        wall_clock_ceiling_seconds: String(after.wall_clock_ceiling_seconds - 1),
      });
      assert.equal(stale.statusCode, 409, stale.body);
      assert.equal(attributeOf(stale.body, "stale-version", "data-current-version"), String(after.version));
      assert.match(
        stale.body,
        new RegExp(`name="version" value="${after.version}"`),
        "the form is at the current version",
      );
      assert.equal(
        ((await api(`/api/repositories/${REPOSITORY}/settings`)) as { version: number }).version,
        after.version,
        "nothing was saved",
      );

      // A value of the wrong type is refused naming the field, as the API refuses it.
      const wrong = await post(`/repositories/${REPOSITORY}/settings`, {
        version: String(after.version),
        wall_clock_ceiling_seconds: "soon",
      });
      assert.equal(wrong.statusCode, 400, wrong.body);
      assert.equal(attributeOf(wrong.body, "refusal", "data-code"), "invalid_request");
      // Said in the person's words: the field as the form calls it, no schema path.
      assert.match(wrong.body, /Wall clock ceiling seconds must be a whole number/);
      assert.doesNotMatch(wrong.body, /body\.changes/);

      // The audit trail shows the write, attributed.
      const audit = await get("/audit");
      assert.equal(audit.statusCode, 200, audit.body);
      assert.match(audit.body, /repository-settings:acme\/widget/);
    });

    it("purges a lineage only with its typed confirmation, and dismisses an advisory", async () => {
      const unconfirmed = await post(`/repositories/${REPOSITORY}/purges`, { lineage: LINEAGE, confirm: "yes" });
      assert.equal(attributeOf(unconfirmed.body, "refusal", "data-code"), "confirmation_required", unconfirmed.body);
      assert.equal(((await api(`/api/repositories/${REPOSITORY}`)) as { lineages: unknown[] }).lineages.length, 1);

      const purged = await post(`/repositories/${REPOSITORY}/purges`, { lineage: LINEAGE, confirm: LINEAGE });
      assert.equal(purged.statusCode, 303, purged.body);
      assert.equal(purged.headers.location, `/repositories/${REPOSITORY}?notice=purged`);
      assert.deepEqual(((await api(`/api/repositories/${REPOSITORY}`)) as { lineages: unknown[] }).lineages, []);
      assert.match((await get(`/repositories/${REPOSITORY}?notice=purged`)).body, /id="notice"[^>]*>Lineage purged/);

      const [advisory] = ((await api(`/api/repositories/${REPOSITORY}`)) as { advisories: { id: string }[] })
        .advisories;
      assert.ok(advisory);
      const dismissed = await post(`/repositories/${REPOSITORY}/advisories/${advisory.id}/dismissal`, {});
      assert.equal(dismissed.statusCode, 303, dismissed.body);
      assert.deepEqual(((await api(`/api/repositories/${REPOSITORY}`)) as { advisories: unknown[] }).advisories, []);
    });

    it("mints a credential and shows its value once; a resubmitted form does not show it again", async () => {
      const page = await get("/credentials");
      assert.equal(page.statusCode, 200, page.body);
      assert.match(page.body, /id="mint-form"/);

      const key = randomUUID();
      const fields = { name: "ci-bot", scopes: ["read", "submit"], expires_in_seconds: "86400" };
      const minted = await post("/credentials", fields, { key });
      assert.equal(minted.statusCode, 201, minted.body);
      const value = attributeOf(minted.body, "credential-value", "value");
      assert.match(value ?? "", /^kiln_agent_/);
      assert.match(minted.body, /<script src="\/assets\/copy-secret\.js" defer><\/script>/);
      assert.equal(minted.headers["cache-control"], "no-store");
      // The value works as the agent's credential.
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(value ?? "") });
      assert.equal(identity.statusCode, 200, identity.body);

      const again = await post("/credentials", fields, { key });
      assert.equal(again.statusCode, 201, again.body);
      assert.match(again.body, /id="already-shown"/);
      assert.ok(!again.body.includes(value ?? "-"), "the value is never shown again");

      const listed = await get("/credentials");
      assert.match(listed.body, /data-credential="ci-bot"/);
      const revoked = await post("/credentials/ci-bot/revoke", {});
      assert.equal(revoked.statusCode, 303, revoked.body);
      const refused = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(value ?? "") });
      assert.equal(refused.statusCode, 401);
    });

    it("shows a viewer no mint button and refuses the mint from the page all the same", async () => {
      const page = await get("/credentials", viewerCookie);
      assert.equal(page.statusCode, 403, page.body);
      assert.equal(attributeOf(page.body, "refusal", "data-code"), "role_required");
      assert.doesNotMatch(page.body, /mint-form|id="mint"/);

      const minted = await post(
        "/credentials",
        { name: "viewer-bot", scopes: "read", expires_in_seconds: "86400" },
        { cookie: viewerCookie },
      );
      assert.equal(minted.statusCode, 403, minted.body);
      assert.equal(attributeOf(minted.body, "refusal", "data-code"), "role_required");
      assert.doesNotMatch(minted.body, /kiln_agent_/);
      const listed = (await api("/api/credentials")) as { credentials: { name: string }[] };
      assert.ok(!listed.credentials.some((c) => c.name === "viewer-bot"), "nothing was minted");
    });

    it("refuses a cross-site form post (CSRF) and mints nothing", async () => {
      for (const origin of ["http://evil.example", "null"]) {
        const res = await post(
          "/credentials",
          { name: "csrf-bot", scopes: "read", expires_in_seconds: "86400" },
          { origin },
        );
        assert.equal(res.statusCode, 401, `${origin}: ${res.body}`);
        assert.match(res.body, /cross-site request refused/);
      }
      const listed = (await api("/api/credentials")) as { credentials: { name: string }[] };
      assert.ok(!listed.credentials.some((c) => c.name === "csrf-bot"));
    });

    it("edits the tenant's settings at their version, with the operator's limits beside consumption", async () => {
      const page = await get("/settings");
      assert.equal(page.statusCode, 200, page.body);
      assert.match(page.body, /id="limit-running"/);
      assert.match(page.body, /id="limit-storage"/);
      // What this runtime records but does not apply is not offered as a setting, and the page says so.
      for (const name of ["default_toolchain", "log_retention_days"]) {
        assert.doesNotMatch(page.body, new RegExp(`name="${name}"`), `${name} offered`);
        assert.doesNotMatch(page.body, new RegExp(`data-setting="${name}"`), `${name} shown as a setting`);
        assert.match(
          page.body,
          new RegExp(`id="not-offered"[^<]*.*<code>${name}</code>`),
          `${name} named as not offered`,
        );
      }
      assert.doesNotMatch(page.body, /does not apply it yet/);
      const version = Number(/id="settings-version">(\d+)</.exec(page.body)?.[1]);
      const current = (await api("/api/tenant/settings")) as {
        version: number;
        settings: { name: string; value: unknown }[];
      };
      assert.equal(version, current.version);
      const value = (name: string) => current.settings.find((s) => s.name === name)?.value;
      const form = {
        version: String(current.version),
        default_size: String(value("default_size")),
        allowed_sizes: value("allowed_sizes") as string[],
        wall_clock_ceiling_seconds: String(value("wall_clock_ceiling_seconds")),
        artifact_retention_days: "5",
        ...(value("agents_may_submit") === true ? { agents_may_submit: "true" } : {}),
      };
      const saved = await post("/settings", form);
      assert.equal(saved.statusCode, 303, saved.body);
      const after = (await api("/api/tenant/settings")) as {
        version: number;
        settings: { name: string; value: unknown }[];
      };
      assert.equal(after.version, current.version + 1);
      assert.equal(after.settings.find((s) => s.name === "artifact_retention_days")?.value, 5);

      const stale = await post("/settings", { ...form, artifact_retention_days: "6" });
      assert.equal(stale.statusCode, 409, stale.body);
      assert.equal(attributeOf(stale.body, "stale-version", "data-current-version"), String(after.version));
      assert.equal(((await api("/api/tenant/settings")) as { version: number }).version, after.version);

      // A viewer reads them with the form disabled.
      const viewer = await get("/settings", viewerCookie);
      assert.equal(viewer.statusCode, 200, viewer.body);
      assert.doesNotMatch(viewer.body, /id="save-settings"/);
    });

    it("charts the month's usage per day and per repository, and downloads an export whose totals are the report's", async () => {
      const report = (await api("/api/usage")) as {
        period: string;
        totals: { vcpu_seconds: number; attempts: number };
        days: unknown[];
        repositories: unknown[];
      };
      assert.ok(report.totals.attempts >= 3);
      const page = await get("/usage");
      assert.equal(page.statusCode, 200, page.body);
      assert.equal(
        (page.body.match(/<g class="bar-row"/g) ?? []).length,
        report.days.length + report.repositories.length,
      );
      assert.match(
        page.body,
        new RegExp(`id="total-vcpu-seconds">${report.totals.vcpu_seconds.toLocaleString("en-US")}<`),
      );
      assert.match(page.body, /data-label="acme\/widget"/);

      const download = await get(`/usage/export.ndjson?period=${report.period}`);
      assert.equal(download.statusCode, 200, download.body);
      assert.match(download.headers["content-type"] as string, /^application\/x-ndjson/);
      assert.match(
        download.headers["content-disposition"] as string,
        /attachment; filename="kiln-usage-\d{4}-\d{2}\.ndjson"/,
      );
      const lines = download.body
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { type: string; vcpu_seconds?: number });
      const metering = lines.filter((l) => l.type === "metering");
      const adjustments = lines.filter((l) => l.type === "adjustment");
      assert.equal(metering.length, report.totals.attempts);
      const totals = lines.find((l) => l.type === "totals");
      assert.equal(totals?.vcpu_seconds, report.totals.vcpu_seconds);
      assert.equal(
        [...metering, ...adjustments].reduce((sum, l) => sum + (l.vcpu_seconds ?? 0), 0),
        report.totals.vcpu_seconds,
        "the export's records sum to the report's total",
      );

      const refused = await get("/usage?period=2026-13");
      assert.equal(refused.statusCode, 400);
      assert.equal(attributeOf(refused.body, "refusal", "data-code"), "invalid_request");
    });

    it("shows onboarding and the person's CLI tokens, and every navigation link answers", async () => {
      // The size a job runs at when none is named is the tenant's default_size, proposed here.
      const current = (await api("/api/tenant/settings")) as {
        version: number;
        settings: { name: string; value: unknown }[];
      };
      const value = (name: string) => current.settings.find((s) => s.name === name)?.value;
      const saved = await post("/settings", {
        version: String(current.version),
        default_size: "kiln4-cpu",
        allowed_sizes: value("allowed_sizes") as string[],
        wall_clock_ceiling_seconds: String(value("wall_clock_ceiling_seconds")),
        artifact_retention_days: String(value("artifact_retention_days")),
        ...(value("agents_may_submit") === true ? { agents_may_submit: "true" } : {}),
      });
      assert.equal(saved.statusCode, 303, saved.body);
      const onboarding = await get("/onboarding");
      assert.equal(onboarding.statusCode, 200, onboarding.body);
      assert.match(onboarding.body, /id="first-job">3 jobs so far/);
      assert.match(
        onboarding.body,
        /id="proposed-size"><code>kiln cargo test<\/code> runs at <strong class="mono">kiln4-cpu<\/strong>, this tenant's default size; <code>--size<\/code> names another \(<span class="mono">kiln2-cpu<\/span>/,
      );
      const tokens = await get("/cli-tokens");
      assert.equal(tokens.statusCode, 200, tokens.body);
      assert.match(tokens.body, /data-token="[^"]+"/, "the admin's own token from its sign-up");
      const nav = /<nav>(.*?)<\/nav>/.exec(tokens.body)?.[1] ?? "";
      const hrefs = [...nav.matchAll(/href="([^"]+)"/g)].map((m) => m[1] ?? "");
      assert.ok(hrefs.length >= 8);
      for (const href of hrefs) {
        const res = await get(href);
        assert.equal(res.statusCode, 200, `${href}: ${res.body.slice(0, 300)}`);
      }
      // A viewer's navigation answers too, or says which role it needs.
      for (const href of hrefs) {
        const res = await get(href, viewerCookie);
        assert.ok(
          res.statusCode === 200 || attributeOf(res.body, "refusal", "data-code") === "role_required",
          `${href} as a viewer: ${res.statusCode}`,
        );
      }
    });
  });
}
