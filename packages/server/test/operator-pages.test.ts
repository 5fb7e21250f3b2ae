import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addPersonToTenant,
  appendOperatorAuditEntry,
  createTenant,
  raiseTenantAnomaly,
  registerHost,
} from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import type { LightMyRequestResponse } from "fastify";
import { buildApp } from "../src/build-app.js";
import { operatorAuditValue } from "../src/domain/platform/operator-audit-value.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { acceptJob, claimJob, HOST } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";
import { defaultHandlers } from "../src/web/handlers/default-handlers.js";
import { bootstrapOperatorCredential } from "./operator-session-fixture.js";

const OWN_ORIGIN = "http://kiln.test";
const MARKUP = `<script>alert("x")</script>`;
const ESCAPED = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;";

/** Every page of the console a signed-in operator reaches from its navigation. */
const SECTIONS = [
  "/operator",
  "/operator/hosts",
  "/operator/placements",
  "/operator/anomalies",
  "/operator/audit",
  "/operator/dogfood",
  "/operator/tenants",
];

/**
 * The operator console (issue 20 item 6): its pages perform the operator operations in-process
 * for an operator session only, drain and undrain are audited as over the API, a cross-site
 * form is refused, markup renders as text and every link answers.
 */
for (const dialect of DIALECTS) {
  describe(`operator pages (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let credential: string;
    let operatorCookie: string;
    let tenantCookie: string;
    let placedJob: string;
    const tenant = "acme-ops";

    const get = (url: string, cookies: Record<string, string>) => t.app.inject({ method: "GET", url, cookies });
    const opGet = (url: string) => get(url, { kiln_operator_session: operatorCookie });
    const postForm = (
      url: string,
      fields: Record<string, string>,
      cookies: Record<string, string>,
      headers: Record<string, string> = { origin: OWN_ORIGIN },
    ) =>
      t.app.inject({
        method: "POST",
        url,
        cookies,
        headers: { ...headers, "content-type": "application/x-www-form-urlencoded" },
        payload: new URLSearchParams(fields).toString(),
      });
    const opPost = (url: string, fields: Record<string, string> = {}, headers?: Record<string, string>) =>
      postForm(url, fields, { kiln_operator_session: operatorCookie }, headers);
    /** Reads through the API itself, as an operator: what the pages did is what the API sees. */
    const api = async (url: string) => {
      const r = await t.app.inject({
        method: "GET",
        url,
        cookies: { kiln_operator_session: operatorCookie },
      });
      assert.equal(r.statusCode, 200, r.body);
      return r.json();
    };
    const audit = async () =>
      (await api("/operator/api/audit")) as { operation: string; target: string; outcome?: string; actor: string }[];

    async function signInAsOperator(): Promise<LightMyRequestResponse> {
      return postForm("/operator/sign-in", { credential }, {});
    }

    before(async () => {
      t = await testApp(await dialect.openFresh());
      const now = t.clock.now();
      await createTenant(t.storage, { id: tenant, displayName: "Acme Ops" }, now);
      for (const id of ["local", "builder-1"]) {
        await registerHost(t.storage, { id, vcpus: 64, memoryBytes: 2 ** 37, isolation: "sandbox", now });
      }
      placedJob = (await acceptJob(t.storage, { tenant, now })).id;
      await claimJob(t.storage, placedJob, now);
      await raiseTenantAnomaly(t.storage, {
        id: "ta-markup",
        tenantId: tenant,
        rule: "submission_burst",
        subject: "hour",
        jobId: null,
        evidence: JSON.stringify([{ kind: "submissions", detail: `burst ${MARKUP}` }]),
        now,
      });
      // More entries than one audit page shows, so the audit is read page by page.
      for (let i = 1; i <= 60; i += 1) {
        await appendOperatorAuditEntry(
          t.storage,
          { actor: "system", target: `seed:${i}`, value: operatorAuditValue("seed.entry", "performed", `seed ${i}`) },
          now,
        );
      }
      await addPersonToTenant(t.storage, { tenantId: tenant, email: "owner@acme-ops.example", role: "owner" }, now);
      tenantCookie = await signIn(t.app, t.storage, "owner@acme-ops.example", undefined, t.clock);
      credential = await bootstrapOperatorCredential(t.storage, now);
      const opened = await signInAsOperator();
      const cookie = opened.cookies.find((c) => c.name === "kiln_operator_session");
      assert.ok(cookie, "the sign-in form set the operator cookie");
      operatorCookie = cookie.value;
    });
    after(() => t.close());

    it("shows the sign-in form without a session; the credential opens an audited operator session", async () => {
      const form = await get("/operator", {});
      assert.equal(form.statusCode, 200);
      assert.match(form.body, /<form method="post" action="\/operator\/sign-in" id="operator-sign-in">/);
      assert.match(form.body, /type="password" name="credential"/);
      assert.ok(!form.body.includes('href="/operator/hosts"'), "no console links before sign-in");

      const opened = await signInAsOperator();
      assert.equal(opened.statusCode, 303, opened.body);
      assert.equal(opened.headers.location, "/operator");
      const cookie = opened.cookies.find((c) => c.name === "kiln_operator_session");
      assert.ok(cookie);
      assert.equal(cookie.httpOnly, true);
      assert.equal(cookie.sameSite, "Strict");
      assert.equal(cookie.path, "/operator");

      const home = await get("/operator", { kiln_operator_session: cookie.value });
      assert.equal(home.statusCode, 200, home.body);
      assert.match(home.body, /<h1>Operator console<\/h1>/);
      assert.match(home.body, /<table id="operating-states">/);
      assert.match(home.body, /Management readiness/);
      assert.match(home.body, /<table id="capacity">/);
      assert.match(home.body, /id="operator-home" href="\/operator">kiln · Operator</);
      const sessions = (await audit()).filter((e) => e.operation === "operator.session.create");
      assert.ok(sessions.length >= 2, "each sign-in from the form is audited as operator.session.create");

      const wrong = await postForm("/operator/sign-in", { credential: "kiln_operator_not-it" }, {});
      assert.equal(wrong.statusCode, 404);
      assert.match(wrong.body, /data-code="operator_not_found"/);
      assert.equal(wrong.cookies.length, 0, "a wrong credential sets no cookie");
      const crossSite = await postForm("/operator/sign-in", { credential }, {}, { origin: "http://evil.example" });
      assert.equal(crossSite.statusCode, 404);
      assert.equal(crossSite.cookies.length, 0, "another site cannot sign the browser in");
    });

    it("renders every page from the operator operations with the seeded hosts, placement, anomaly and tenant", async () => {
      const hosts = await opGet("/operator/hosts");
      assert.equal(hosts.statusCode, 200, hosts.body);
      for (const host of ["local", "builder-1", HOST]) {
        assert.ok(hosts.body.includes(`href="/operator/hosts/${host}"`), `lists ${host}`);
      }
      assert.match(hosts.body, /data-host-state="builder-1:serving"/);
      assert.match(hosts.body, /action="\/operator\/hosts\/builder-1\/drain"/);
      assert.match(hosts.body, /<table id="hosts">/);

      const host = await opGet("/operator/hosts/builder-1");
      assert.equal(host.statusCode, 200, host.body);
      assert.match(host.body, /id="host-state" data-state="serving"/);
      assert.match(host.body, /<dl class="facts" id="host-facts">/);
      assert.match(host.body, /href="\/operator\/hosts\/builder-1\/recovery"/);
      const recovery = await opGet("/operator/hosts/builder-1/recovery");
      assert.equal(recovery.statusCode, 200, recovery.body);
      assert.match(recovery.body, /id="recovery-facts"/);
      const unknown = await opGet("/operator/hosts/nowhere");
      assert.equal(unknown.statusCode, 404);
      assert.match(unknown.body, /data-code="operator_not_found"/);

      const placements = await opGet("/operator/placements");
      assert.equal(placements.statusCode, 200, placements.body);
      assert.ok(placements.body.includes(placedJob), "the running attempt is a live placement");
      assert.ok(placements.body.includes(`href="/operator/tenants/${tenant}"`));

      const anomalies = await opGet("/operator/anomalies");
      assert.equal(anomalies.statusCode, 200, anomalies.body);
      assert.ok(anomalies.body.includes("ta-markup"));
      assert.ok(anomalies.body.includes(`burst ${ESCAPED}`), "evidence markup renders as text");
      assert.ok(!anomalies.body.includes(MARKUP));

      const dogfood = await opGet("/operator/dogfood");
      assert.equal(dogfood.statusCode, 200, dogfood.body);
      assert.match(dogfood.body, /id="dogfood-state" data-state="gate_closed"/);
      assert.match(dogfood.body, /<table id="gate">/);
      // An unmet gate condition reads as work left, not as the green "open" it showed before.
      const gate = /<table id="gate">[\s\S]*?<\/table>/.exec(dogfood.body)?.[0] ?? "";
      assert.match(gate, /class="status status-unmet">unmet</);
      assert.doesNotMatch(gate, /status-open/);

      // The Tenants page lists the tenants (operator.tenants.list), each linked to its controls.
      const tenants = await opGet("/operator/tenants");
      assert.equal(tenants.statusCode, 200, tenants.body);
      assert.match(tenants.body, /<table id="tenants">/);
      assert.deepEqual(
        [...tenants.body.matchAll(/<a href="([^"]*)" aria-current="page">/g)].map((m) => m[1]),
        ["/operator/tenants"],
        "the console's nav marks the current section",
      );
      assert.match(tenants.body, new RegExp(`<a href="/operator/tenants/${tenant}" class="mono">${tenant}</a>`));
      const listed = (await opGet("/operator/api/tenants")).json() as {
        tenants: { tenant: string; members: number; suspended: boolean }[];
      };
      const row = listed.tenants.find((x) => x.tenant === tenant);
      assert.ok(row !== undefined && row.members >= 1 && row.suspended === false, JSON.stringify(listed));

      const controls = await opGet(`/operator/tenants/${tenant}`);
      assert.equal(controls.statusCode, 200, controls.body);
      assert.match(controls.body, /id="tenant-controls"/);
      assert.match(controls.body, /1 of at most \d+/, "the running job beside the concurrency limit");
      const opened = await opGet(`/operator/tenants?tenant=${tenant}`);
      assert.equal(opened.statusCode, 303);
      assert.equal(opened.headers.location, `/operator/tenants/${tenant}`);

      const auditPage = await opGet("/operator/audit");
      assert.equal(auditPage.statusCode, 200, auditPage.body);
      assert.match(auditPage.body, /<code>operator\.session\.create<\/code>/);
      assert.match(auditPage.body, /id="audit-older" href="\/operator\/audit\?page=2"/);
      assert.ok(!auditPage.body.includes("seed 1<"), "the oldest entry is not on the first page");
      const older = await opGet("/operator/audit?page=2");
      assert.equal(older.statusCode, 200);
      assert.ok(older.body.includes("seed 1<"), "the oldest entry is on the last page");
      assert.match(older.body, /id="audit-newer" href="\/operator\/audit\?page=1"/);
    });

    it("drains and undrains from the page: the host's state changes and the operator audit records both", async () => {
      const drained = await opPost("/operator/hosts/builder-1/drain");
      assert.equal(drained.statusCode, 303, drained.body);
      assert.equal(drained.headers.location, "/operator/hosts/builder-1?notice=drained");
      assert.equal((await api("/operator/api/hosts/builder-1")).serving_state, "drained");
      const [drainEntry] = await audit();
      assert.equal(drainEntry?.operation, "operator.hosts.drain");
      assert.equal(drainEntry?.target, "host:builder-1");
      assert.equal(drainEntry?.outcome, "performed");
      assert.match(drainEntry?.actor ?? "", /^operator:/);
      const page = await opGet("/operator/hosts/builder-1?notice=drained");
      assert.match(page.body, /id="notice"/);
      assert.match(page.body, /id="host-state" data-state="drained"/);
      assert.match(page.body, /name="policy_revision" value="1"/, "undrain names the revision read");

      const stale = await opPost("/operator/hosts/builder-1/undrain", { policy_revision: "0" });
      assert.equal(stale.statusCode, 409);
      assert.match(stale.body, /data-code="conflict"/);
      const notNumber = await opPost("/operator/hosts/builder-1/undrain", { policy_revision: "one" });
      assert.equal(notNumber.statusCode, 400);
      assert.match(notNumber.body, /data-code="invalid_request"/);
      assert.equal((await api("/operator/api/hosts/builder-1")).serving_state, "drained");

      const undrained = await opPost("/operator/hosts/builder-1/undrain", { policy_revision: "1", note: MARKUP });
      assert.equal(undrained.statusCode, 303, undrained.body);
      assert.equal((await api("/operator/api/hosts/builder-1")).serving_state, "serving");
      const [undrainEntry] = await audit();
      assert.equal(undrainEntry?.operation, "operator.hosts.undrain");
      assert.equal(undrainEntry?.outcome, "performed");

      // The note an operator typed is in the audit's value, and the audit page shows it as text.
      const auditPage = await opGet("/operator/audit");
      assert.ok(auditPage.body.includes(ESCAPED), "the audited note renders as text");
      assert.ok(!auditPage.body.includes(MARKUP));
      assert.match(auditPage.body, /<code>operator\.hosts\.undrain<\/code>/);
    });

    it("changes a tenant's controls from its page at the version read, audited", async () => {
      const page = await opGet(`/operator/tenants/${tenant}`);
      assert.match(page.body, /id="controls-form"/);
      assert.match(page.body, /name="expected_version" value="0"/);
      const limits = {
        max_running_jobs: "3",
        storage_quota_bytes: "1073741824",
        bandwidth_bytes_per_month: "1073741824",
      };
      const saved = await opPost(`/operator/tenants/${tenant}/controls`, {
        ...limits,
        expected_version: "0",
        was_suspended: "no",
        suspended: "no",
        note: MARKUP,
      });
      assert.equal(saved.statusCode, 303, saved.body);
      assert.equal(saved.headers.location, `/operator/tenants/${tenant}?notice=saved`);
      const controls = await api(`/operator/api/tenants/${tenant}`);
      assert.equal(controls.max_running_jobs, 3);
      assert.equal(controls.version, 1);
      const [entry] = await audit();
      assert.equal(entry?.operation, "operator.tenants.controls.set");
      assert.equal(entry?.target, `tenant-controls:${tenant}`);
      assert.equal(entry?.outcome, "performed");

      const stale = await opPost(`/operator/tenants/${tenant}/controls`, {
        max_running_jobs: "9",
        expected_version: "0",
      });
      assert.equal(stale.statusCode, 409);
      assert.match(stale.body, /data-code="conflict"/);
      const noReason = await opPost(`/operator/tenants/${tenant}/controls`, {
        expected_version: "1",
        was_suspended: "no",
        suspended: "yes",
      });
      assert.equal(noReason.statusCode, 400);
      assert.match(noReason.body, /data-code="invalid_request"/);
      assert.equal((await api(`/operator/api/tenants/${tenant}`)).max_running_jobs, 3, "refused forms change nothing");
      const shown = await opGet(`/operator/tenants/${tenant}?notice=saved`);
      assert.match(shown.body, /id="notice"/);
      assert.match(shown.body, /name="expected_version" value="1"/);
    });

    it("records an anomaly's disposition from the page, audited, changing nothing else", async () => {
      const page = await opGet("/operator/anomalies");
      assert.match(page.body, /action="\/operator\/anomalies\/ta-markup\/disposition"/);
      const recorded = await opPost("/operator/anomalies/ta-markup/disposition", {
        disposition: "dismissed",
        note: "expected burst",
      });
      assert.equal(recorded.statusCode, 303, recorded.body);
      const [flag] = (await api("/operator/api/anomalies")) as { id: string; disposition: { disposition: string } }[];
      assert.equal(flag?.id, "ta-markup");
      assert.equal(flag?.disposition.disposition, "dismissed");
      const [entry] = await audit();
      assert.equal(entry?.operation, "operator.anomalies.disposition");
      assert.equal(entry?.target, "anomaly:ta-markup");
      const bad = await opPost("/operator/anomalies/ta-markup/disposition", { disposition: "ignored" });
      assert.equal(bad.statusCode, 400);
      assert.match(bad.body, /data-code="invalid_request"/);
      const unknown = await opPost("/operator/anomalies/platform/pa-none/disposition", { disposition: "confirmed" });
      assert.equal(unknown.statusCode, 404);
      assert.match(unknown.body, /data-code="operator_not_found"/);
      assert.match((await opGet("/operator/anomalies")).body, /status-dismissed/);
    });

    it("refuses a cross-site form and changes nothing", async () => {
      const before = (await audit()).length;
      for (const headers of [
        { origin: "http://evil.example" },
        { "sec-fetch-site": "cross-site" },
        {} as Record<string, string>,
      ]) {
        const r = await opPost("/operator/hosts/local/drain", {}, headers);
        assert.equal(r.statusCode, 404, JSON.stringify(headers));
        assert.match(r.body, /data-code="operator_not_found"/);
      }
      const controls = await opPost(
        `/operator/tenants/${tenant}/controls`,
        { max_running_jobs: "0", expected_version: "1" },
        { origin: "http://evil.example" },
      );
      assert.equal(controls.statusCode, 404);
      assert.equal((await api(`/operator/api/tenants/${tenant}`)).max_running_jobs, 3);
      const disposed = await opPost(
        "/operator/anomalies/ta-markup/disposition",
        { disposition: "confirmed" },
        { origin: "http://evil.example" },
      );
      assert.equal(disposed.statusCode, 404);
      const signOut = await opPost("/operator/sign-out", {}, { origin: "http://evil.example" });
      assert.equal(signOut.statusCode, 404);
      assert.equal((await api("/operator/api/hosts/local")).serving_state, "serving");
      assert.equal((await audit()).length, before, "nothing was performed, so nothing was audited");
      assert.equal((await opGet("/operator/hosts")).statusCode, 200, "the session survived the cross-site sign-out");
    });

    it("a tenant session does not reach the console, and the operator's session does not reach tenant pages", async () => {
      const home = await get("/operator", { kiln_session: tenantCookie });
      assert.equal(home.statusCode, 200);
      assert.match(home.body, /id="operator-sign-in"/, "a tenant member is asked for the operator credential");
      for (const url of [...SECTIONS.slice(1), "/operator/hosts/local", `/operator/tenants/${tenant}`]) {
        const r = await get(url, { kiln_session: tenantCookie });
        assert.equal(r.statusCode, 303, url);
        assert.equal(r.headers.location, "/operator", url);
      }
      const drain = await postForm("/operator/hosts/local/drain", {}, { kiln_session: tenantCookie });
      assert.equal(drain.statusCode, 404, "a tenant member's drain form is refused as the API refuses it");
      assert.match(drain.body, /data-code="operator_not_found"/);
      assert.equal((await api("/operator/api/hosts/local")).serving_state, "serving");

      const jobs = await get("/jobs", { kiln_operator_session: operatorCookie });
      assert.equal(jobs.statusCode, 303, "the tenant dashboard asks an operator to sign in as a person");
      assert.match(String(jobs.headers.location), /^\/\?next=/);
    });

    it("every link on every operator page answers 200 for the operator (no dead links)", async () => {
      const seen = new Set<string>();
      const queue = [...SECTIONS];
      while (queue.length > 0) {
        const url = queue.shift() as string;
        if (seen.has(url)) continue;
        seen.add(url);
        const r = await opGet(url);
        assert.equal(r.statusCode, 200, `${url} answers ${r.statusCode}: ${r.body.slice(0, 300)}`);
        if (!String(r.headers["content-type"]).startsWith("text/html")) continue;
        assert.ok(!/<script(?![^>]*\bsrc="\/assets\/)/.test(r.body), `${url} runs no inline script`);
        for (const [, raw] of r.body.matchAll(/href="([^"]*)"/g)) {
          const href = (raw ?? "").replaceAll("&amp;", "&").split("#")[0] ?? "";
          if (href === "") continue;
          assert.ok(href.startsWith("/"), `${url} links only kiln's own paths: ${href}`);
          if (!seen.has(href)) queue.push(href);
        }
      }
      for (const url of [
        ...SECTIONS,
        "/operator/hosts/builder-1",
        "/operator/hosts/builder-1/recovery",
        `/operator/tenants/${tenant}`,
        "/operator/audit?page=2",
        "/operator/api/audit/export",
      ]) {
        assert.ok(seen.has(url), `the crawl reached ${url}`);
      }
    });

    it("a page whose operation this build does not serve says so", async () => {
      const { "operator.dogfood.period": _served, ...handlers } = defaultHandlers;
      // Its own last-used recorder: closing this app must not close the shared app's.
      const { lastUsed: _shared, ...deps } = t.deps;
      const app = buildApp(deps, handlers);
      try {
        await app.ready();
        const r = await app.inject({
          method: "GET",
          url: "/operator/dogfood",
          cookies: { kiln_operator_session: operatorCookie },
        });
        assert.equal(r.statusCode, 501);
        assert.match(r.body, /data-code="not_implemented"/);
        assert.match(r.body, /does not serve it yet/);
      } finally {
        await app.close();
      }
    });

    it("signing out ends the operator session and audits it", async () => {
      const out = await opPost("/operator/sign-out");
      assert.equal(out.statusCode, 303, out.body);
      assert.equal(out.headers.location, "/operator");
      const after = await opGet("/operator/hosts");
      assert.equal(after.statusCode, 303, "the ended session reaches no page");
      const fresh = (await signInAsOperator()).cookies.find((c) => c.name === "kiln_operator_session");
      assert.ok(fresh);
      operatorCookie = fresh.value;
      assert.ok((await audit()).some((e) => e.operation === "operator.session.delete"));
    });
  });
}
