import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import {
  appWithTenant,
  bearer,
  type PersonWithToken,
  personWithToken,
  type TestApp,
  testBlobs,
} from "../src/testing/harness.js";
import { acceptJob, appendLines, claimJob, finishJob } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";
import { finishColdJob } from "./cold-job-fixture.js";
import { seedDashboardJobs } from "./dashboard-fixtures.js";

const REPOSITORY = "acme/widget";

/** Every `attribute="…"` value of `tag` elements in `html`, entities of URLs undone. */
function attributeValues(html: string, tag: string, attribute: string): string[] {
  const values: string[] = [];
  for (const [element] of html.matchAll(new RegExp(`<${tag}\\b[^>]*>`, "g"))) {
    const value = new RegExp(`\\b${attribute}="([^"]*)"`).exec(element)?.[1];
    if (value !== undefined) values.push(value.replaceAll("&amp;", "&"));
  }
  return values;
}

/** The value of `attribute` on the element with `id`, or undefined. */
function attributeOf(html: string, id: string, attribute: string): string | undefined {
  const tag = new RegExp(`<[^>]*\\bid="${id}"[^>]*>`).exec(html)?.[0];
  return tag === undefined ? undefined : new RegExp(`\\b${attribute}="([^"]*)"`).exec(tag)?.[1];
}

/**
 * Issue 20, "no dead links": every link on every dashboard page a signed-in person can reach,
 * crawled from the navigation, answers — 200 for an owner (a redirect followed to a page that
 * answers 200), and for a viewer 200 or a page saying which role it needs, never 404. The seeded
 * tenant has a page of everything a link can lead to: jobs passed, failed (with tests), queued
 * and retried, artifacts, a log longer than one page, repositories with lineages and an advisory,
 * usage, credentials, CLI tokens and the audit. Every form's target is a route too: a GET form
 * answers 200, a POST form without an Origin is refused by the route (never 404), so nothing is
 * performed.
 */
for (const dialect of DIALECTS) {
  describe(`every link on every dashboard page answers (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let ownerCookie: string;
    let viewerCookie: string;

    before(async () => {
      const blobs = testBlobs();
      let owner: PersonWithToken;
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: REPOSITORY, deps: { blobs } }));
      const viewer = await personWithToken(t.storage, { tenant: owner.tenant, role: "viewer", now: t.clock.now() });
      await onboardRepository(
        t.storage,
        { tenantId: owner.tenant, name: "acme/gadget", onboardedBy: "test" },
        t.clock.now(),
      );
      // Three cold saves of one lineage: lineages on the repository page and an advisory.
      for (let generation = 1; generation <= 3; generation++) {
        await finishColdJob(t, {
          token: owner.token,
          repository: REPOSITORY,
          lineage: "lin_acme_widget",
          reason: "evicted",
          savedBytes: 3 * 2 ** 20,
          generation,
        });
      }
      const seeded = await seedDashboardJobs(t.storage, blobs, owner.tenant, t.clock.now());
      // A log of more than one page (1,000 lines a page), so its pages link onwards.
      const long = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now(), repository: REPOSITORY });
      const lease = await claimJob(t.storage, long.id, t.clock.now());
      for (let batch = 0; batch < 3; batch++) {
        const lines = Array.from({ length: 500 }, (_, i) => `line ${batch * 500 + i}`);
        await appendLines(t.storage, lease, lines, t.clock.now());
      }
      await finishJob(t.storage, blobs, lease, { now: t.clock.now() });
      // A retry of the failed job, so a job page links to the job it retried.
      const retried = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${seeded.failed}/retry`,
        headers: { ...bearer(owner.token), "idempotency-key": "links-retry" },
      });
      assert.equal(retried.statusCode, 200, retried.body);
      // A credential on the credentials page.
      const minted = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { ...bearer(owner.token), "content-type": "application/json", "idempotency-key": "links-mint" },
        payload: JSON.stringify({ name: "links-bot", scopes: ["read"], expires_in_seconds: 3600 }),
      });
      assert.equal(minted.statusCode, 200, minted.body);
      ownerCookie = await signIn(t.app, t.storage, owner.email, undefined, t.clock);
      viewerCookie = await signIn(t.app, t.storage, viewer.email, undefined, t.clock);
    });
    after(() => t.close());

    const get = (url: string, cookie: string) =>
      t.app.inject({ method: "GET", url, cookies: { kiln_session: cookie } });

    /**
     * Crawls from the navigation as `cookie`'s person; `judge` asserts on each answer. Returns
     * every URL visited, and the POST form targets found (each once).
     */
    const crawl = async (cookie: string, judge: (url: string, status: number, body: string) => void) => {
      const seen = new Set<string>();
      const posts = new Set<string>();
      const queue = ["/", "/jobs"];
      while (queue.length > 0) {
        const url = queue.shift() as string;
        if (seen.has(url)) continue;
        seen.add(url);
        let res = await get(url, cookie);
        // A redirect inside the dashboard is followed once; its target must answer.
        if (res.statusCode === 303 || res.statusCode === 302) {
          const location = String(res.headers.location);
          assert.ok(location.startsWith("/"), `${url} redirects inside kiln: ${location}`);
          assert.ok(!location.startsWith("/?next="), `${url} asked a signed-in person to sign in`);
          res = await get(location, cookie);
        }
        judge(url, res.statusCode, res.body);
        if (!String(res.headers["content-type"]).startsWith("text/html")) continue;
        const links = [...attributeValues(res.body, "a", "href"), ...attributeValues(res.body, "link", "href")];
        for (const raw of links) {
          const href = raw.split("#")[0] ?? "";
          if (href === "") continue;
          // Only an absolute link leaves kiln (the provider's install page); any other must be kiln's own path.
          if (/^https?:\/\//.test(href)) continue;
          assert.ok(href.startsWith("/"), `${url} links a path relative to itself, which resolves elsewhere: ${raw}`);
          if (!seen.has(href)) queue.push(href);
        }
        for (const script of attributeValues(res.body, "script", "src")) if (!seen.has(script)) queue.push(script);
        for (const form of res.body.matchAll(/<form\b[^>]*>/g)) {
          const tag = form[0];
          const action = /\baction="([^"]*)"/.exec(tag)?.[1]?.replaceAll("&amp;", "&") ?? url;
          assert.ok(action.startsWith("/"), `${url} has a form posting outside kiln: ${action}`);
          if (/\bmethod="post"/i.test(tag)) posts.add(action);
          else if (!seen.has(action)) queue.push(action);
        }
      }
      return { seen, posts };
    };

    it("as an owner: every link answers 200, and every form posts to a route", async () => {
      const { seen, posts } = await crawl(ownerCookie, (url, status, body) => {
        assert.equal(status, 200, `${url} answers ${status}: ${body.slice(0, 400)}`);
      });
      // The crawl reached every kind of page, so none was left out by a missing link.
      for (const prefix of [
        "/jobs/",
        "/jobs?",
        "/repositories/acme/widget",
        "/advisories/lineage-always-cold",
        "/usage/export.ndjson",
        "/credentials",
        "/cli-tokens",
        "/settings",
        "/audit",
        "/onboarding",
        "/assets/",
      ]) {
        assert.ok(
          [...seen].some((u) => u.startsWith(prefix)),
          `the crawl reached ${prefix}: ${[...seen].join(" ")}`,
        );
      }
      assert.ok(
        [...seen].some((u) => /^\/jobs\/[^/?]+\/artifacts\/\d+\/\d+$/.test(u)),
        "an artifact download",
      );
      assert.ok(
        [...seen].some((u) => /^\/jobs\/[^/?]+\?log_cursor=/.test(u)),
        "a log's next page",
      );
      // The advisory's "how to act on it" is its guide, docs/advisories/<kind>.md, as a page.
      const guide = await get("/advisories/lineage-always-cold", ownerCookie);
      assert.match(guide.body, /<h1>lineage-always-cold: a lineage misses every time<\/h1>/);
      assert.match(guide.body, /<strong>Remedy, by cause\.<\/strong>/);
      assert.match(guide.body, /<li><code>evicted<\/code> — the tenant storage quota evicts it/);
      for (const unknown of ["README", "no-such-kind", "..%2Fsecrets"]) {
        const res = await get(`/advisories/${unknown}`, ownerCookie);
        assert.equal(res.statusCode, 404, unknown);
        assert.equal(attributeOf(res.body, "refusal", "data-code"), "not_found");
      }
      assert.ok(posts.size >= 5, `forms found: ${[...posts].join(" ")}`);
      for (const action of posts) {
        // No Origin: the route refuses it before performing anything, as it refuses a cross-site post.
        const res = await t.app.inject({
          method: "POST",
          url: action,
          cookies: { kiln_session: ownerCookie },
          headers: { "content-type": "application/x-www-form-urlencoded" },
          payload: "idempotency_key=links-check",
        });
        assert.notEqual(res.statusCode, 404, `the form target ${action} is not a route: ${res.body.slice(0, 300)}`);
        assert.ok(res.statusCode >= 400, `${action} without an Origin performed something: ${res.statusCode}`);
      }
    });

    it("as a viewer: every link answers 200 or names the role it needs, never 404", async () => {
      const { seen } = await crawl(viewerCookie, (url, status, body) => {
        assert.ok(
          status === 200 || (status === 403 && attributeOf(body, "refusal", "data-code") === "role_required"),
          `${url} as a viewer answers ${status}: ${body.slice(0, 400)}`,
        );
      });
      assert.ok([...seen].some((u) => u.startsWith("/jobs/")));
    });
  });
}
