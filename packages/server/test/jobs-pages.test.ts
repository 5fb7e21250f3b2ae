import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { addPersonToTenant, createTenant } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { acceptJob, type JobsTestApp, jobsTestApp } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";
import { ansiSegments, isErrorLine } from "../src/web/pages/ansi-log.js";
import { testsFailedFirst } from "../src/web/pages/job-pages.js";
import { type SeededJobs, seedDashboardJobs } from "./dashboard-fixtures.js";

let tenants = 0;

for (const dialect of DIALECTS) {
  describe(`jobs pages (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: JobsTestApp;
    let jobs: SeededJobs;
    let cookie: string;
    let otherCookie: string;
    let memberCookie: string;
    let tenant: string;

    before(async () => {
      t = await jobsTestApp(await dialect.openFresh());
      tenants += 1;
      tenant = `pages${process.pid}x${tenants}`;
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
      await addPersonToTenant(
        t.storage,
        { tenantId: tenant, email: `member@${tenant}.example`, role: "member" },
        t.clock.now(),
      );
      jobs = await seedDashboardJobs(t.storage, t.blobs, tenant, t.clock.now());
      cookie = await signIn(t.app, t.storage, `viewer@${tenant}.example`, undefined, t.clock);
      otherCookie = await signIn(t.app, t.storage, `owner@${other}.example`, undefined, t.clock);
      memberCookie = await signIn(t.app, t.storage, `member@${tenant}.example`, undefined, t.clock);
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

      const byBranchAndClass = await get("/jobs?branch=main&class=test%3Astable%3Akiln2-cpu");
      for (const id of Object.values(jobs))
        assert.ok(byBranchAndClass.body.includes(`data-job="${id}"`), `lists ${id}`);
      const otherClass = await get("/jobs?class=build%3Astable%3Akiln2-cpu");
      for (const id of Object.values(jobs)) assert.ok(!otherClass.body.includes(`data-job="${id}"`), `omits ${id}`);

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
      assert.match(res.body, /id="job-status" data-status="failed"><span class="status status-failed">/);
      assert.match(res.body, /id="failure"><strong>test failure<\/strong> in phase <strong>test<\/strong>/);
      assert.match(res.body, /<table id="phases">/);
      const tests = res.body.slice(res.body.indexOf('<table id="tests">'));
      const failed = tests.indexOf("parses_empty_input");
      assert.ok(failed > 0 && failed < tests.indexOf("tests::adds"), "the failed test comes first");
      assert.ok(tests.indexOf("tests::adds") < tests.indexOf("tests::slow"), "then passed, then ignored");
      assert.match(res.body, /2 failed · 1 passed · 1 ignored/);
      // Each test with its binary and duration.
      assert.match(
        res.body,
        /<td class="mono">widget::integration<\/td><td class="mono">parses_empty_input.*<td class="num">31 ms<\/td><\/tr>/,
      );
      // The log's and the test names' markup renders as text; colour codes become classes.
      assert.ok(res.body.includes("assertion failed &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
      assert.ok(res.body.includes("shows_&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt;"));
      assert.ok(!res.body.includes("<script>alert"));
      assert.ok(!res.body.includes("\u001b["));
      assert.match(res.body, /<span class="ansi-bold ansi-fg-1">error<\/span>: assertion failed/);
    });

    it("serves only scripts from /assets: no inline script on the pages, the job page's script served", async () => {
      for (const url of ["/jobs", `/jobs/${jobs.failed}`]) {
        const res = await get(url);
        const tags = res.body.match(/<script[^>]*>/g) ?? [];
        assert.ok(tags.length > 0, `${url} loads its script`);
        for (const tag of tags) assert.match(tag, /^<script src="\/assets\/[a-z-]+\.js" defer>$/, `${url}: ${tag}`);
      }
      const script = await get("/assets/job-page.js", "");
      assert.equal(script.statusCode, 200);
      assert.match(script.headers["content-type"] as string, /^text\/javascript/);
      // The page colours lines with the server's own parser, and sets log text as text only.
      assert.match(script.body, /function ansiSegments\(line\)/);
      assert.ok(!script.body.includes("innerHTML"));
      const list = await get("/assets/jobs-list.js", "");
      assert.match(list.body, /new EventSource\("\/api\/events"\)/);
    });

    it("links the first error line and each failed test's output in the log", async () => {
      const res = await get(`/jobs/${jobs.failed}`);
      const lineId = (text: string) => {
        const at = res.body.indexOf(text);
        assert.ok(at > 0, `the log shows ${text}`);
        const id = /id="(L\d+)"/g;
        let last: string | undefined;
        for (const m of res.body.slice(0, at).matchAll(id)) last = m[1];
        assert.ok(last);
        return last;
      };
      const errorLine = lineId("assertion failed &lt;script&gt;");
      assert.match(res.body, new RegExp(`<a id="first-error-link" href="#${errorLine}">Jump to the first error</a>`));
      const output = lineId("---- parses_empty_input stdout ----");
      assert.match(res.body, new RegExp(`data-test="parses_empty_input" href="#${output}">output</a>`));
      // A settled log is not followed.
      assert.match(res.body, /data-follow="false"/);
      assert.match((await get(`/jobs/${jobs.queued}`)).body, /id="first-error-link" href="#log" hidden/);
    });

    it("shows crates fresh and rebuilt, caches and why cold, injected settings applied or not, usage", async () => {
      const res = await get(`/jobs/${jobs.failed}`);
      assert.match(res.body, /id="crates-summary">1 fresh · 1 rebuilt or failed</);
      assert.match(
        res.body,
        /<tr class="crate-compiled"><td class="mono">widget 0\.1\.0<\/td><td>workspace<\/td><td>rebuilt</,
      );
      assert.match(res.body, /status-cold">cold<\/span><\/td><td>first job of the class</);
      assert.match(res.body, /profile\.dev\.debug<\/td>.*status-applied">applied</);
      assert.match(
        res.body,
        /profile\.dev\.incremental<\/td>.*status-not applied">not applied<\/span><\/td><td>the repository&#39;s own Cargo/,
      );
      assert.match(res.body, /<dt>Metered<\/dt><dd>30 s<\/dd>/);
      // Phases as a timeline: one bar per phase, sized within its attempt.
      assert.equal(res.body.match(/<div class="bar bar-/g)?.length, 3);
      assert.match(res.body, /data-phase="test">.*status-failed/);
    });

    it("lists artifacts and downloads one through the same handler as the API", async () => {
      const res = await get(`/jobs/${jobs.passed}`);
      const link = /<a href="(\/jobs\/[^"]+\/artifacts\/1\/0)" download>target\/release\/widget<\/a>/.exec(res.body);
      assert.ok(link?.[1], "the artifact is linked");
      const bytes = await get(link[1]);
      assert.equal(bytes.statusCode, 200);
      assert.equal(bytes.body, "widget binary bytes");
      assert.equal(bytes.headers["content-disposition"], "attachment; filename*=UTF-8''widget");
      assert.equal((await get(link[1], otherCookie)).statusCode, 404, "another tenant's artifact is not found");
      assert.equal((await get(`/jobs/${jobs.passed}/artifacts/1/9`)).statusCode, 404);
      const malformed = await get(`/jobs/${jobs.passed}/artifacts/first/0`);
      assert.equal(malformed.statusCode, 400, "validated against the operation's schema");
      assert.match(malformed.body, /data-code="invalid_request"/);
    });

    const post = (url: string, session: string, headers: Record<string, string>, key = randomUUID()) =>
      t.app.inject({
        method: "POST",
        url,
        cookies: { kiln_session: session },
        headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
        payload: `idempotency_key=${encodeURIComponent(key)}`,
      });
    const statusOf = async (id: string) =>
      /id="job-status" data-status="([a-z_]+)"/.exec((await get(`/jobs/${id}`)).body)?.[1];
    const SAME_ORIGIN = { origin: "http://kiln.test" };

    it("refuses a cross-site cancel, and one that names no origin; the job stays queued", async () => {
      const job = await acceptJob(t.storage, { tenant, now: t.clock.now(), repository: "acme/gadget" });
      const page = await get(`/jobs/${job.id}`, memberCookie);
      assert.match(
        page.body,
        /<form method="post" action="\/jobs\/[^"]+\/cancel"><input type="hidden" name="idempotency_key" value="[0-9a-f-]{36}"><button type="submit" id="cancel">/,
      );
      const crossSite = await post(`/jobs/${job.id}/cancel`, memberCookie, { origin: "https://evil.example" });
      assert.equal(crossSite.statusCode, 401);
      assert.match(crossSite.body, /cross-site request refused/);
      const fetchMetadata = await post(`/jobs/${job.id}/cancel`, memberCookie, { "sec-fetch-site": "cross-site" });
      assert.equal(fetchMetadata.statusCode, 401);
      const unnamed = await post(`/jobs/${job.id}/cancel`, memberCookie, {});
      assert.equal(unnamed.statusCode, 401);
      const signedOut = await t.app.inject({ method: "POST", url: `/jobs/${job.id}/cancel`, headers: SAME_ORIGIN });
      assert.equal(signedOut.statusCode, 303);
      // The cancel is kept for the person to confirm once signed in again, then back to the job.
      const resume = `/resume?${new URLSearchParams({ action: `/jobs/${job.id}/cancel`, back: `/jobs/${job.id}` })}`;
      assert.equal(signedOut.headers.location, `/?next=${encodeURIComponent(resume)}`);
      assert.equal(await statusOf(job.id), "queued");
    });

    it("cancels from the page's form as a member; a repeated submission replays", async () => {
      const job = await acceptJob(t.storage, { tenant, now: t.clock.now(), repository: "acme/gadget" });
      const key = randomUUID();
      const res = await post(`/jobs/${job.id}/cancel`, memberCookie, SAME_ORIGIN, key);
      assert.equal(res.statusCode, 303, res.body);
      assert.equal(res.headers.location, `/jobs/${job.id}`);
      assert.equal(await statusOf(job.id), "cancelled");
      const again = await post(`/jobs/${job.id}/cancel`, memberCookie, SAME_ORIGIN, key);
      assert.equal(again.statusCode, 303, "the key's first answer, not conflict");
      const fresh = await post(`/jobs/${job.id}/cancel`, memberCookie, SAME_ORIGIN);
      assert.equal(fresh.statusCode, 409, "a terminal job cannot be cancelled");
      assert.match(fresh.body, /data-code="conflict"/);
    });

    it("shows a viewer no cancel or retry button, and refuses the viewer's cancel", async () => {
      const job = await acceptJob(t.storage, { tenant, now: t.clock.now(), repository: "acme/gadget" });
      const page = await get(`/jobs/${job.id}`);
      assert.equal(page.statusCode, 200);
      assert.ok(!page.body.includes('id="cancel"'));
      assert.ok(!(await get(`/jobs/${jobs.failed}`)).body.includes('id="retry"'));
      const res = await post(`/jobs/${job.id}/cancel`, cookie, SAME_ORIGIN);
      assert.equal(res.statusCode, 403);
      assert.match(res.body, /data-code="role_required"/);
      assert.equal(await statusOf(job.id), "queued");
    });

    it("retries a failed job from its page, landing on the linked new job", async () => {
      assert.match((await get(`/jobs/${jobs.failed}`, memberCookie)).body, /id="retry">Retry job</);
      const res = await post(`/jobs/${jobs.failed}/retry`, memberCookie, SAME_ORIGIN);
      assert.equal(res.statusCode, 303, res.body);
      const retry = /^\/jobs\/(.+)$/.exec(res.headers.location as string)?.[1];
      assert.ok(retry && retry !== jobs.failed);
      const page = await get(`/jobs/${retry}`, memberCookie);
      assert.match(page.body, new RegExp(`<dt>Retry of</dt><dd><a href="/jobs/${jobs.failed}">`));
      assert.equal(await statusOf(retry), "queued");
    });

    it("colours ANSI SGR runs as classes and finds cargo's error lines", () => {
      assert.deepEqual(ansiSegments("\u001b[1m\u001b[31merror\u001b[0m: x \u001b[38;5;9mred\u001b[39m\u001b[2K"), [
        { text: "error", classes: "ansi-bold ansi-fg-1" },
        { text: ": x ", classes: "" },
        { text: "red", classes: "" },
      ]);
      assert.deepEqual(ansiSegments("\u001b[92mok\u001b[22;44m!"), [
        { text: "ok", classes: "ansi-fg-10" },
        { text: "!", classes: "ansi-fg-10 ansi-bg-4" },
      ]);
      for (const line of [
        "\u001b[1m\u001b[31merror\u001b[0m: could not compile",
        "error[E0308]: mismatched types",
        "test parser::rejects ... FAILED",
        "thread 'main' panicked at src/main.rs:2:5:",
      ])
        assert.ok(isErrorLine(line), line);
      for (const line of ["test parser::accepts ... ok", "   Compiling error-chain v0.12.4", "warning: unused"])
        assert.ok(!isErrorLine(line), line);
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
