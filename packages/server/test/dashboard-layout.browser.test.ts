/**
 * The dashboard's layout in Debian's chromium at a phone's width (390 px), in dark mode, in
 * Tokyo (issue 36): no page scrolls sideways, the dark scheme applies, times read in the
 * viewer's zone with UTC in their title, and a job's tab title and icon follow its status.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import { createTenant, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { buildApp } from "../src/build-app.js";
import { type AppOrigin, listenBeforeTheApp } from "../src/testing/app-origin.js";
import { closeBrowserTest, launchChromium, watchPageProblems } from "../src/testing/browser.js";
import { tenantWithRepository, testBlobs } from "../src/testing/harness.js";
import { acceptJob, claimJob } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";
import { type SeededJobs, seedDashboardJobs } from "./dashboard-fixtures.js";

const PHONE = { width: 390, height: 844 };

describe("the dashboard at 390 px, dark, in Tokyo", () => {
  const tenant = `layout${process.pid}`;
  let storage: Storage;
  let app: FastifyInstance;
  let origin: AppOrigin;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let jobs: SeededJobs;
  let clock: ManualClock;
  const pageErrors: string[] = [];
  const policyViolations: string[] = [];

  before(async () => {
    storage = await openSqliteForTest();
    clock = ManualClock.withRealTimers(new Date("2026-11-29T10:00:00.000Z"));
    const blobs = testBlobs();
    await createTenant(storage, { id: tenant, displayName: "Acme Widgets" }, clock.now());
    const owner = await tenantWithRepository(storage, { tenant, role: "owner", now: clock.now() });
    jobs = await seedDashboardJobs(storage, blobs, tenant, clock.now());

    origin = await listenBeforeTheApp();
    base = origin.base;
    app = buildApp({ storage, clock, blobs, version: "test", publicOrigin: base, checkResponses: true });
    await origin.serve(app);
    const cookie = await signIn(app, storage, owner.email, undefined, clock);

    browser = await launchChromium();
    context = await browser.newContext({ viewport: PHONE, colorScheme: "dark", timezoneId: "Asia/Tokyo" });
    await context.addCookies([{ name: "kiln_session", value: cookie, url: base }]);
    page = await context.newPage();
    watchPageProblems(page, { pageErrors, policyViolations });
  });

  after(() => closeBrowserTest(browser, origin, app, storage));

  it("fits every page in 390 px without sideways scrolling, in the dark scheme", async () => {
    const paths = [
      "/",
      "/jobs",
      `/jobs/${jobs.failed}`,
      `/jobs/${jobs.passed}`,
      "/repositories",
      "/repositories/acme/widget",
      "/settings",
      "/credentials",
      "/cli-tokens",
      "/usage",
      "/audit",
      "/onboarding",
      "/no-such-page",
      `/resume?action=${encodeURIComponent(`/jobs/${jobs.failed}/retry`)}&back=${encodeURIComponent(`/jobs/${jobs.failed}`)}`,
    ];
    for (const path of paths) {
      await page.goto(`${base}${path}`);
      // (Evaluated in the page: the test's own TypeScript has no DOM types.)
      const { scrollWidth, innerWidth, background } = (await page.evaluate(`({
        scrollWidth: document.documentElement.scrollWidth,
        innerWidth: window.innerWidth,
        background: getComputedStyle(document.body).backgroundColor,
      })`)) as { scrollWidth: number; innerWidth: number; background: string };
      assert.equal(innerWidth, PHONE.width);
      assert.ok(scrollWidth <= innerWidth, `${path} is ${scrollWidth} px wide at ${innerWidth} px`);
      assert.equal(background, "rgb(20, 21, 24)", `${path} in the dark scheme`);
      // The section is marked in the nav (none on the landing page and the 404).
      const current = await page.locator('header nav a[aria-current="page"]').allTextContents();
      assert.ok(current.length <= 1, `${path}: ${current.join()}`);
    }
    await page.goto(`${base}/repositories/acme/widget`);
    assert.deepEqual(await page.locator('header nav a[aria-current="page"]').allTextContents(), ["Repositories"]);
    await page.screenshot({ path: "/tmp/kiln-layout-390-dark.png", fullPage: false });
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(policyViolations, []);
  });

  it("shows times in the viewer's zone, UTC in their title", async () => {
    await page.goto(`${base}/jobs/${jobs.failed}`);
    const time = page.locator("time[datetime]").first();
    await page.waitForSelector("time[data-local]");
    const datetime = (await time.getAttribute("datetime")) ?? "";
    const expected = new Intl.DateTimeFormat("sv-SE", {
      timeZone: "Asia/Tokyo",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
    })
      .format(new Date(datetime))
      .replace(",", "");
    const text = (await time.textContent()) ?? "";
    assert.ok(text.startsWith(expected), `${text} in Tokyo (${expected}) for ${datetime}`);
    assert.match(text, /GMT\+9|JST/);
    assert.equal(await time.getAttribute("title"), `${datetime.slice(0, 19).replace("T", " ")} UTC`);
  });

  it("titles a job's tab with its status and repository, and follows it with the icon", async () => {
    const job = await acceptJob(storage, { tenant, now: clock.now(), repository: "acme/widget" });
    await page.goto(`${base}/jobs/${job.id}`);
    assert.equal(await page.title(), "queued · cargo test --workspace · acme/widget · kiln");
    assert.equal(await page.getAttribute("#favicon", "href"), "/assets/favicon/queued.svg");
    await claimJob(storage, job.id, clock.now());
    await page.waitForSelector('#job-status[data-status="running"]');
    await page.waitForFunction(`document.title.startsWith("running · ")`);
    assert.equal(await page.title(), "running · cargo test --workspace · acme/widget · kiln");
    assert.equal(await page.getAttribute("#favicon", "href"), "/assets/favicon/running.svg");
    const icon = await page.request.get(`${base}/assets/favicon/running.svg`);
    assert.equal(icon.status(), 200);
    assert.deepEqual(pageErrors, []);
  });
});
