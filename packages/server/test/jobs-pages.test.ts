import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addPersonToTenant, createTenant } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { testsFailedFirst } from "../src/pages/job-pages.js";
import { type SeededJobs, seedDashboardJobs } from "./dashboard-fixtures.js";
import { type JobsTestApp, jobsTestApp } from "./job-fixtures.js";
import { signIn } from "./sign-in.js";

let tenants = 0;

for (const dialect of DIALECTS) {
  describe(`jobs pages (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: JobsTestApp;
    let jobs: SeededJobs;
    let cookie: string;
    let otherCookie: string;

    before(async () => {
      t = await jobsTestApp(await dialect.openFresh());
      tenants += 1;
      const tenant = `pages${process.pid}x${tenants}`;
      const other = `${tenant}other`;
      for (const id of [tenant, other])
        await createTenant(t.storage, { id, displayName: `Tenant ${id}` }, t.clock.now());
      await addPersonToTenant(
        t.storage,
        { tenantId: tenant, email: `viewer@${tenant}.example`, role: "viewer" },
        t.clock.now(),
      );
      await addPersonToTenant(
        t.storage,
        { tenantId: other, email: `owner@${other}.example`, role: "owner" },
        t.clock.now(),
      );
      jobs = await seedDashboardJobs(t.storage, t.blobs, tenant, t.clock.now());
      cookie = await signIn(t.app, t.storage, `viewer@${tenant}.example`, undefined, t.clock);
      otherCookie = await signIn(t.app, t.storage, `owner@${other}.example`, undefined, t.clock);
    });
    after(() => t.close());

    const get = (url: string, session = cookie) =>
      t.app.inject({ method: "GET", url, cookies: session === "" ? {} : { kiln_session: session } });

    it("lists the tenant's jobs with the summary counts, under the page policy", async () => {
      const res = await get("/jobs");
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.headers["content-security-policy"] as string, /script-src 'self'/);
      for (const id of Object.values(jobs)) assert.ok(res.body.includes(`data-job="${id}"`), `lists ${id}`);
      assert.match(res.body, /id="count-queued">1</);
      assert.match(res.body, /id="count-passed">1</);
      assert.match(res.body, /id="count-failed">1</);
      assert.match(res.body, /id="count-running">0</);
    });

    it("filters by repository, status, branch and class", async () => {
      const byRepo = await get("/jobs?repository=acme%2Fgadget");
      assert.ok(byRepo.body.includes(`data-job="${jobs.queued}"`));
      assert.ok(!byRepo.body.includes(`data-job="${jobs.passed}"`));
      assert.match(byRepo.body, /value="acme\/gadget"/, "the form keeps the filter");

      const byStatus = await get("/jobs?status=failed&repository=&branch=");
      assert.ok(byStatus.body.includes(`data-job="${jobs.failed}"`));
      assert.ok(!byStatus.body.includes(`data-job="${jobs.passed}"`));
      assert.ok(!byStatus.body.includes(`data-job="${jobs.queued}"`));

      const none = await get("/jobs?branch=release&class=test%3Astable%3Akiln2-cpu");
      assert.equal(none.statusCode, 200);
      assert.match(none.body, /No jobs match these filters/);
    });

    it("refuses a filter the operation refuses, saying why", async () => {
      const res = await get("/jobs?status=exploded");
      assert.equal(res.statusCode, 400);
      assert.match(res.body, /id="refusal"/);
      assert.match(res.body, /status/);
    });

    it("shows a job: status, phases, the failure, failed tests first and the log as text", async () => {
      const res = await get(`/jobs/${jobs.failed}`);
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.body, /id="job-status"><span class="status status-failed">/);
      assert.match(res.body, /id="failure"><strong>test failure<\/strong> in phase <strong>test<\/strong>/);
      assert.match(res.body, /<table id="phases">/);
      const tests = res.body.slice(res.body.indexOf('<table id="tests">'));
      const failed = tests.indexOf("parses_empty_input");
      assert.ok(failed > 0 && failed < tests.indexOf("tests::adds"), "the failed test comes first");
      assert.ok(tests.indexOf("tests::adds") < tests.indexOf("tests::slow"), "then passed, then ignored");
      assert.match(res.body, /1 failed · 1 passed · 1 ignored/);
      // The log's markup renders as text, and its colour codes are not shown raw.
      assert.ok(res.body.includes("assertion failed &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
      assert.ok(!res.body.includes("<script>alert"));
      assert.ok(!res.body.includes("\u001b["));
    });

    it("sorts tests failed first, then passed, then ignored", () => {
      const row = (outcome: "passed" | "failed" | "ignored", name: string) => ({
        target: "t",
        name,
        outcome,
        attempt: 1,
        duration_ms: null,
      });
      const sorted = testsFailedFirst([
        row("ignored", "a"),
        row("passed", "b"),
        row("failed", "c"),
        row("failed", "a"),
      ]);
      assert.deepEqual(
        sorted.map((r) => `${r.outcome}:${r.name}`),
        ["failed:a", "failed:c", "passed:b", "ignored:a"],
      );
    });

    it("shows another tenant's job to nobody and sends a visitor without a session to sign in", async () => {
      const foreign = await get(`/jobs/${jobs.failed}`, otherCookie);
      assert.equal(foreign.statusCode, 404);
      assert.ok(!foreign.body.includes("assertion failed"));
      const list = await get("/jobs", otherCookie);
      assert.ok(!list.body.includes(jobs.passed));

      const anonymous = await get("/jobs?status=failed", "");
      assert.equal(anonymous.statusCode, 303);
      assert.equal(anonymous.headers.location, "/?next=%2Fjobs%3Fstatus%3Dfailed");
    });
  });
}
