import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { findOnboardedRepository } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import {
  appWithTenant,
  type personWithToken,
  type TestApp,
  tenantWithRepository,
  testBlobs,
} from "../src/testing/harness.js";
import { acceptJob, claimJob, finishJob } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";

const ORIGIN = "http://kiln.test";

/** The value of `attribute` on the element with `id`, or undefined. */
function attributeOf(html: string, id: string, attribute: string): string | undefined {
  const tag = new RegExp(`<[^>]*\\bid="${id}"[^>]*>`).exec(html)?.[0];
  return tag === undefined ? undefined : new RegExp(`\\b${attribute}="([^"]*)"`).exec(tag)?.[1];
}

/** The navigation links marked as the current page. */
const currentLinks = (html: string) => [...html.matchAll(/<a href="([^"]*)" aria-current="page">/g)].map((m) => m[1]);

/**
 * Issue 36's smaller list, on the dashboard's pages through the app on both engines: the nav
 * marks the current page; the landing page has the nav; an unknown page answers an HTML 404 with
 * the nav (the API keeps JSON); a job's tab says its status and repository with a status icon;
 * times carry UTC in their title; people by name and email, not `usr_…` ids; a tenant admin
 * onboards a repository from a form (members are told who can, and refused in their words);
 * the jobs filter takes what people type and keeps the form; a form posted after the session
 * ended is kept for the person to confirm once signed in again.
 */
for (const dialect of DIALECTS) {
  describe(`dashboard layout and first-run pages (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let tenant: string;
    let admin: Awaited<ReturnType<typeof personWithToken>>;
    let adminCookie: string;
    let memberCookie: string;
    let finishedJob: string;

    before(async () => {
      const blobs = testBlobs();
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null, deps: { blobs } }));
      tenant = admin.tenant;
      const member = await tenantWithRepository(t.storage, { tenant, role: "member", now: t.clock.now() });
      const job = await acceptJob(t.storage, { tenant, now: t.clock.now(), repository: "acme/widget" });
      const lease = await claimJob(t.storage, job.id, t.clock.now());
      await finishJob(t.storage, blobs, lease, { now: t.clock.now(), outcome: "failed" });
      finishedJob = job.id;
      adminCookie = await signIn(t.app, t.storage, admin.email, undefined, t.clock);
      memberCookie = await signIn(t.app, t.storage, member.email, undefined, t.clock);
    });
    after(() => t.close());

    const get = (url: string, cookie: string | null = adminCookie, accept = "text/html") =>
      t.app.inject({
        method: "GET",
        url,
        headers: { accept },
        ...(cookie === null ? {} : { cookies: { kiln_session: cookie } }),
      });
    const post = (url: string, fields: Record<string, string>, cookie: string | null = adminCookie) => {
      const form = new URLSearchParams({ idempotency_key: randomUUID(), ...fields });
      return t.app.inject({
        method: "POST",
        url,
        ...(cookie === null ? {} : { cookies: { kiln_session: cookie } }),
        headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN },
        payload: form.toString(),
      });
    };

    it("marks the current section in the nav, on the landing page too, which has the nav", async () => {
      for (const [url, current] of [
        ["/jobs", "/jobs"],
        [`/jobs/${finishedJob}`, "/jobs"],
        ["/repositories", "/repositories"],
        ["/repositories/acme/widget", "/repositories"],
        ["/settings", "/settings"],
        ["/audit", "/audit"],
      ] as const) {
        const page = await get(url);
        assert.equal(page.statusCode, 200, `${url}: ${page.body}`);
        assert.deepEqual(currentLinks(page.body), [current], url);
        assert.match(page.body, /<meta name="color-scheme" content="light dark">/);
        assert.match(page.body, /@media \(prefers-color-scheme:dark\)/);
      }
      const landing = await get("/");
      assert.equal(landing.statusCode, 200);
      assert.match(landing.body, /<nav><a href="\/jobs">Jobs<\/a>/);
      assert.match(landing.body, /id="signed-in-as"/);
      assert.deepEqual(currentLinks(landing.body), []);
    });

    it("answers an unknown page with an HTML 404 holding the nav; the API and non-browsers keep JSON", async () => {
      const page = await get("/no-such-page?x=1", null);
      assert.equal(page.statusCode, 404);
      assert.match(String(page.headers["content-type"]), /^text\/html/);
      assert.match(page.body, /<nav><a href="\/jobs">Jobs<\/a>/);
      assert.match(page.body, /id="not-found"[^>]*>There is no page at <code>\/no-such-page<\/code>/);
      assert.equal(page.headers["content-security-policy"] !== undefined, true);
      for (const [url, accept] of [
        ["/api/no-such-operation", "text/html"],
        ["/no-such-page", "application/json"],
      ] as const) {
        const api = await get(url, null, accept);
        assert.equal(api.statusCode, 404, url);
        assert.equal(api.json().code, "not_found", url);
      }
    });

    it("titles a job's tab with its status, command and repository, its icon the status's", async () => {
      const page = await get(`/jobs/${finishedJob}`);
      assert.match(page.body, /<title>failed · cargo test --workspace · acme\/widget · kiln<\/title>/);
      assert.match(page.body, /<link rel="icon" id="favicon" href="\/assets\/favicon\/failed\.svg"/);
      assert.match(page.body, /<script src="\/assets\/layout\.js" defer><\/script>/);
      const icon = await get("/assets/favicon/failed.svg", null, "image/*");
      assert.equal(icon.statusCode, 200);
      assert.match(String(icon.headers["content-type"]), /^image\/svg\+xml/);
      assert.match(icon.body, /fill="#cf222e"/);
      assert.notEqual((await get("/assets/favicon/passed.svg", null, "image/*")).body, icon.body);
      const favicon = await get("/favicon.ico", null, "image/*");
      assert.equal(favicon.statusCode, 301);
      assert.equal(favicon.headers.location, "/assets/favicon/kiln.svg");
      // Times say UTC in their tooltip (the layout script shows the viewer's own zone).
      assert.match(page.body, /<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">/);
      assert.equal((await get("/assets/layout.js", null, "*/*")).statusCode, 200);
    });

    it("keeps a retry posted after the session ended, to confirm once signed in; the retry names its person", async () => {
      const lost = await post(`/jobs/${finishedJob}/retry`, {}, null);
      assert.equal(lost.statusCode, 303);
      const next = new URL(String(lost.headers.location), ORIGIN).searchParams.get("next") ?? "";
      assert.match(next, /^\/resume\?/);
      const landing = await get(`/?next=${encodeURIComponent(next)}`, null);
      assert.match(landing.body, /id="session-ended"/);

      const resume = await get(next);
      assert.equal(resume.statusCode, 200, resume.body);
      assert.equal(attributeOf(resume.body, "resume-form", "action"), `/jobs/${finishedJob}/retry`);
      assert.match(resume.body, new RegExp(`id="resume">Retry job ${finishedJob}<`));
      assert.equal(attributeOf(resume.body, "resume-back", "href"), `/jobs/${finishedJob}`);
      const retried = await post(`/jobs/${finishedJob}/retry`, {});
      assert.equal(retried.statusCode, 303, retried.body);
      const retryPage = await get(String(retried.headers.location));
      assert.equal(retryPage.statusCode, 200);
      // Who submitted it: the admin by name and email, not the person's id.
      const submittedBy = /id="submitted-by">([\s\S]*?)<\/dd>/.exec(retryPage.body)?.[1] ?? "";
      assert.match(submittedBy, new RegExp(`${admin.email.replaceAll(".", "\\.")}`));
      assert.match(submittedBy, /Person \d+/);
      assert.doesNotMatch(submittedBy, /usr_/);
      const audit = await get("/audit");
      assert.doesNotMatch(audit.body, /<td[^>]*>usr_/);
    });

    it("onboards a repository from the Repositories page as an admin, as typed or pasted", async () => {
      const list = await get("/repositories");
      assert.match(list.body, /id="onboard-form"/);
      const onboarded = await post("/repositories", { repository: " acme/gizmo " });
      assert.equal(onboarded.statusCode, 303, onboarded.body);
      assert.equal(onboarded.headers.location, "/repositories/acme/gizmo?notice=onboarded");
      assert.ok(await findOnboardedRepository(t.storage, { tenantId: tenant, repository: "acme/gizmo" }));
      const pasted = await post("/repositories", { repository: "https://github.com/acme/pasted.git" });
      assert.equal(pasted.headers.location, "/repositories/acme/pasted?notice=onboarded");
      const again = await post("/repositories", { repository: "acme/gizmo" });
      assert.equal(again.headers.location, "/repositories/acme/gizmo?notice=already");
      const page = await get("/repositories/acme/gizmo?notice=onboarded");
      assert.match(page.body, /Repository onboarded/);

      // Not a repository: the form keeps what was typed and says how to write it.
      const wrong = await post("/repositories", { repository: "gizmo" });
      assert.equal(wrong.statusCode, 400);
      assert.equal(attributeOf(wrong.body, "onboard-repository", "value"), "gizmo");
      assert.match(wrong.body, /write it as owner\/name/);
      assert.doesNotMatch(wrong.body, /must match|body\.|repositories\.onboard/);

      // Another site's post is refused before anything is performed.
      const crossSite = await t.app.inject({
        method: "POST",
        url: "/repositories",
        cookies: { kiln_session: adminCookie },
        headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://evil.example" },
        payload: new URLSearchParams({ idempotency_key: randomUUID(), repository: "acme/evil" }).toString(),
      });
      assert.notEqual(crossSite.statusCode, 303);
      assert.equal(await findOnboardedRepository(t.storage, { tenantId: tenant, repository: "acme/evil" }), undefined);
    });

    it("tells a member who can onboard, and refuses the form in the member's words", async () => {
      const list = await get("/repositories", memberCookie);
      assert.doesNotMatch(list.body, /id="onboard-form"/);
      assert.match(list.body, /id="onboard-hidden"/);
      const refused = await post("/repositories", { repository: "acme/member-made" }, memberCookie);
      assert.equal(refused.statusCode, 403);
      assert.equal(attributeOf(refused.body, "refusal", "data-code"), "role_required");
      assert.match(refused.body, /needs the admin role .*you are a member.*Ask an owner or admin/);
      assert.doesNotMatch(refused.body, /repositories\.onboard/);
      assert.equal(
        await findOnboardedRepository(t.storage, { tenantId: tenant, repository: "acme/member-made" }),
        undefined,
      );
    });

    it("filters jobs by what people type, and keeps the form when a filter cannot match", async () => {
      const pasted = await get(`/jobs?repository=${encodeURIComponent("https://github.com/acme/widget")}`);
      assert.equal(pasted.statusCode, 200);
      assert.match(pasted.body, new RegExp(`data-job="${finishedJob}"`));
      assert.match(pasted.body, /name="repository" value="acme\/widget"/);
      const typed = await get("/jobs?repository=widget&branch=main");
      assert.equal(typed.statusCode, 400);
      assert.match(typed.body, /name="repository" value="widget"/);
      assert.match(typed.body, /name="branch" value="main"/);
      assert.match(typed.body, /Repository: write it as owner\/name/);
      assert.doesNotMatch(typed.body, /must match pattern|query\.repository|\^\[/);
    });
  });
}
