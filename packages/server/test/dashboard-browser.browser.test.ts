/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core signs in through a
 * real OpenID provider running locally (its login and consent pages), lands on the jobs page,
 * opens a seeded job and signs out.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import { createTenant, findPersonByEmail, listMembershipsOfPerson, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import type { Browser, Page } from "playwright-core";
import { buildApp } from "../src/build-app.js";
import { type AppOrigin, listenBeforeTheApp } from "../src/testing/app-origin.js";
import { closeBrowserTest, launchChromium, watchPageProblems } from "../src/testing/browser.js";
import { testBlobs } from "../src/testing/harness.js";
import { acceptJob, appendLines, claimJob, finishJob } from "../src/testing/job-fixtures.js";
import {
  type LocalOidcProvider,
  signInAtProvider,
  startLocalOidcProvider,
} from "../src/testing/local-oidc-provider.js";
import { OIDC_CALLBACK_PATH } from "../src/web/pages/oidc-sign-in.js";
import { type SeededJobs, seedDashboardJobs } from "./dashboard-fixtures.js";

export const SCREENSHOT = "/tmp/kiln-job-page.png";

describe("the dashboard in chromium, signed in through OpenID Connect", () => {
  const tenant = `acme${process.pid}`;
  let storage: Storage;
  let app: FastifyInstance;
  let origin: AppOrigin;
  let base: string;
  let provider: LocalOidcProvider;
  let browser: Browser;
  let page: Page;
  let jobs: SeededJobs;
  const dialogs: string[] = [];
  /** Console messages about the page policy: any is a script or style the pages should not have. */
  const policyViolations: string[] = [];
  const pageErrors: string[] = [];
  let clock: ManualClock;
  let blobs: ReturnType<typeof testBlobs>;

  before(async () => {
    storage = await openSqliteForTest();
    clock = ManualClock.withRealTimers(new Date());
    blobs = testBlobs();
    await createTenant(storage, { id: tenant, displayName: "Acme Widgets" }, clock.now());
    jobs = await seedDashboardJobs(storage, blobs, tenant, clock.now());

    // kiln's origin must be known before the app is built (callback URL, Origin checks): the
    // server listens first and hands its requests to the app once it is ready.
    origin = await listenBeforeTheApp();
    base = origin.base;
    provider = await startLocalOidcProvider(`${base}${OIDC_CALLBACK_PATH}`, {
      ann: {
        email: "ann@acme.example",
        name: "Ann Example",
        groups: ["engineering", `kiln:${tenant}:member`, "kiln:no-such-tenant:owner"],
      },
    });
    app = buildApp({
      storage,
      clock,
      blobs,
      version: "test",
      publicOrigin: base,
      checkResponses: true,
      oidc: provider.settings(false),
    });
    await origin.serve(app);

    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    // Nothing on these pages may run script the server did not serve from /assets.
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    watchPageProblems(page, { pageErrors, policyViolations });
  });

  after(() => closeBrowserTest(browser, origin, provider, app, storage));

  it("signs in at the identity provider and lands on the jobs page as a member of the tenant", async () => {
    await page.goto(`${base}/jobs`);
    await page.waitForURL(`${base}/?next=%2Fjobs`);
    await page.click("#sign-in-oidc");

    // The provider's own login page, then its consent page.
    await signInAtProvider(page, provider.issuer, "ann");

    await page.waitForURL(`${base}/jobs`);
    assert.equal(await page.textContent("#signed-in-as"), "Ann Example · member of Acme Widgets");
    for (const id of Object.values(jobs)) {
      assert.equal(await page.locator(`tr[data-job="${id}"]`).count(), 1, `the jobs page lists ${id}`);
    }
    assert.equal(await page.textContent("#count-failed"), "1");

    // The groups claim made her a member of the tenant it names, and of no tenant that does not exist.
    const person = await findPersonByEmail(storage, "ann@acme.example");
    assert.ok(person);
    assert.deepEqual(
      (await listMembershipsOfPerson(storage, person.id)).map((m) => [m.tenantId, m.role, m.organizationId]),
      [[tenant, "member", `kiln:${tenant}:member`]],
    );
  });

  it("filters the list and opens a failed job: its failure, failed tests first, its log as text", async () => {
    await page.selectOption('select[name="status"]', "failed");
    await page.click('form.filters button[type="submit"]');
    await page.waitForURL(/\/jobs\?.*status=failed/);
    assert.equal(await page.locator("#jobs tbody tr").count(), 1);

    await page.click(`tr[data-job="${jobs.failed}"] a`);
    await page.waitForURL(`${base}/jobs/${jobs.failed}`);
    assert.match((await page.textContent("#failure")) ?? "", /test failure in phase test/);
    assert.match((await page.textContent("#tests tbody tr:first-child")) ?? "", /parses_empty_input/);
    // The log's markup is shown, not run; its colour codes are colours.
    assert.match((await page.textContent("#log-lines")) ?? "", /assertion failed <script>alert\('x'\)<\/script>/);
    assert.equal(await page.textContent("#log-lines .ansi-bold.ansi-fg-1"), "error");
    assert.match((await page.textContent("#tests")) ?? "", /shows_<script>alert\('t'\)<\/script>/);
    assert.deepEqual(dialogs, []);

    // The failing test's output: its link finds the captured output in the log.
    await page.click('a.test-output[data-test="parses_empty_input"]');
    await page.waitForSelector("#log-lines .line.found");
    assert.match((await page.textContent("#log-lines .line.found")) ?? "", /---- parses_empty_input stdout ----/);
    // The first error link points at the first error line.
    const firstError = await page.getAttribute("#first-error-link", "href");
    assert.match((await page.textContent(`#log-lines ${firstError}`)) ?? "", /error: assertion failed/);

    // The tests table filters by search text and by outcome, in the page.
    await page.fill("#tests-search", "markup");
    await page.waitForSelector('#tests-shown:text-is("1")');
    assert.equal(await page.locator("#tests tbody tr:not([hidden])").count(), 1);
    await page.fill("#tests-search", "");
    await page.selectOption("#tests-outcome", "failed");
    await page.waitForSelector('#tests-shown:text-is("2")');
    await page.selectOption("#tests-outcome", "");
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    assert.deepEqual(policyViolations, []);
    assert.deepEqual(pageErrors, []);
  });

  it("follows a job from queued to passed on its page, log and status, without a reload", async () => {
    const job = await acceptJob(storage, { tenant, now: clock.now(), repository: "acme/widget" });
    await page.goto(`${base}/jobs/${job.id}`);
    await page.waitForSelector('#job-status[data-status="queued"]');
    // A mark on this document: a reload would lose it.
    await page.evaluate(() => {
      (globalThis as { kilnMark?: string }).kilnMark = "same document";
    });

    const lease = await claimJob(storage, job.id, clock.now());
    await page.waitForSelector('#job-status[data-status="running"]');
    await appendLines(
      storage,
      lease,
      ["   Compiling widget v0.1.0", "\u001b[32mtest tests::adds ... ok\u001b[0m"],
      clock.now(),
    );
    await page.waitForSelector('#log-lines .line:has-text("test tests::adds ... ok")');
    assert.equal(await page.textContent("#log-lines .ansi-fg-2"), "test tests::adds ... ok");

    // A streamed line's markup is text too: the script sets it as textContent.
    await appendLines(storage, lease, ["test result: ok. 1 passed <img src=x onerror=alert(1)>"], clock.now());
    await finishJob(storage, blobs, lease, { now: clock.now() });
    await page.waitForSelector('#job-status[data-status="passed"]');
    await page.waitForSelector('#log-lines .line:has-text("test result: ok. 1 passed")');
    assert.equal(await page.evaluate(() => (globalThis as { kilnMark?: string }).kilnMark), "same document");
    // Its tests arrived with the settled evidence.
    await page.waitForSelector('#tests tr[data-outcome="passed"]');
    assert.equal(await page.locator("#log-lines .line").count(), 3, "each line once");
    assert.match((await page.textContent("#log-lines")) ?? "", /<img src=x onerror=alert\(1\)>/);
    assert.equal(await page.locator("#log-lines img").count(), 0);
    assert.deepEqual(dialogs, []);
    assert.equal(await page.locator("#first-error-link").isHidden(), true);
    assert.deepEqual(policyViolations, []);
    assert.deepEqual(pageErrors, []);
  });

  it("follows a long log keeping only the newest lines in the page, the rest in the log's pages", async () => {
    const job = await acceptJob(storage, { tenant, now: clock.now(), repository: "acme/widget" });
    await page.goto(`${base}/jobs/${job.id}`);
    await page.waitForSelector('#log-lines[data-follow="true"]');
    const lease = await claimJob(storage, job.id, clock.now());
    const total = 6000;
    for (let from = 1; from <= total; from += 1000) {
      const lines = Array.from({ length: 1000 }, (_, i) => `line ${from + i}`);
      await appendLines(storage, lease, lines, clock.now());
    }
    await finishJob(storage, blobs, lease, { now: clock.now() });
    await page.waitForSelector('#log-lines[data-follow="settled"]');
    assert.match((await page.textContent(`#L${total}`)) ?? "", new RegExp(`line ${total}$`));
    const kept = await page.locator("#log-lines .line").count();
    // The page script keeps at most 5,000 followed lines, dropping whole chunks from the top.
    assert.ok(kept <= 5000 && kept > 4000, `${kept} lines kept`);
    assert.equal(await page.locator("#L1").count(), 0, "the oldest lines left the page");
    assert.equal(await page.isVisible("#log-trimmed"), true);
    // The log's first page still holds them.
    await page.click("#log-trimmed a");
    await page.waitForSelector("#L1");
    assert.equal(await page.locator("#log-lines .line").count(), 1000);
    assert.equal(await page.isVisible("#log-more"), true);
    assert.deepEqual(pageErrors, []);
  });

  it("updates the jobs list as a job changes status, without a reload", async () => {
    const job = await acceptJob(storage, { tenant, now: clock.now(), repository: "acme/gizmo" });
    await page.goto(`${base}/jobs?repository=acme%2Fgizmo`);
    await page.waitForSelector(`tr[data-job="${job.id}"][data-status="queued"]`);
    await page.evaluate(() => {
      (globalThis as { kilnMark?: string }).kilnMark = "list document";
    });
    // The summary counts are the tenant's (jobs.list's summary); they move with the job. (The
    // fixture's placement may start other queued jobs too, so they are read once it runs.)
    const count = async (status: string) => Number(await page.textContent(`#count-${status}`));
    const lease = await claimJob(storage, job.id, clock.now());
    await page.waitForSelector(`tr[data-job="${job.id}"][data-status="running"]`);
    const [running, failed] = [await count("running"), await count("failed")];
    assert.ok(running >= 1);
    await finishJob(storage, blobs, lease, { now: clock.now(), outcome: "failed" });
    await page.waitForSelector(`tr[data-job="${job.id}"][data-status="failed"]`);
    assert.equal(await count("running"), running - 1, "the summary counts follow");
    assert.equal(await count("failed"), failed + 1);
    assert.equal(await page.evaluate(() => (globalThis as { kilnMark?: string }).kilnMark), "list document");
    assert.deepEqual(policyViolations, []);
  });

  it("signs out: the session ends and the jobs page asks to sign in again", async () => {
    await page.click("#sign-out");
    await page.waitForURL(`${base}/`);
    await page.waitForSelector("#sign-in-oidc");
    await page.goto(`${base}/jobs`);
    await page.waitForURL(`${base}/?next=%2Fjobs`);
    assert.equal(await page.locator("#signed-in-as").count(), 0);
  });
});
