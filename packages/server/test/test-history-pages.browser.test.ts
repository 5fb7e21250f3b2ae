/**
 * Issue 37 on the dashboard, in a real browser (Debian's chromium driven by playwright-core): the
 * repository page's Tests section from the test history (the flakiest, the newly failing, the
 * slowest, each run linking its job), and the job page's flaky tests apart from the failures
 * and its build timeline (units as bars, the critical path highlighted). Five test jobs with
 * evidence in the agreed issue-37 shape (test-history-fixtures.ts), finished through the host
 * protocol; the signed-in person is a viewer of the tenant.
 */
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { Browser, Page } from "playwright-core";
import { launchChromium, watchPageProblems } from "../src/testing/browser.js";
import { personWithToken, type TestApp, tenantWithRepository, testApp } from "../src/testing/harness.js";
import { signIn } from "../src/testing/sign-in.js";
import { BROKEN_TEST, FLAKY_TEST, runFiveTestJobs, SLOW_TEST } from "../src/testing/test-history-fixtures.js";

export const SCREENSHOTS = { repository: "/tmp/kiln-repository-tests.png", job: "/tmp/kiln-job-flaky-timeline.png" };

describe("issue 37's tests on the dashboard, in chromium", () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let page: Page;
  let jobs: string[];
  const problems: string[] = [];

  before(async () => {
    t = await testApp(await openSqliteForTest());
    const owner = await personWithToken(t.storage, { role: "owner" });
    const viewer = await tenantWithRepository(t.storage, { tenant: owner.tenant, role: "viewer" });
    jobs = await runFiveTestJobs(t, owner.token, "acme/widget");
    const session = await signIn(t.app, t.storage, viewer.email, owner.tenant, t.clock);
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addCookies([{ name: "kiln_session", value: session, url: base }]);
    page = await context.newPage();
    watchPageProblems(page, { pageErrors: problems, policyViolations: problems });
  });

  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("the repository page shows the flakiest, the newly failing and the slowest tests, each run linking its job", async () => {
    await page.goto(`${base}/repositories/acme/widget`);
    assert.match((await page.textContent("#tests-window")) ?? "", /Over the last 5 test jobs/);

    const flaky = page.locator(`#tests-flakiest tr[data-test="${FLAKY_TEST}"]`);
    assert.equal(await page.locator("#tests-flakiest tbody tr").count(), 1, "only the flaky test is listed as flaky");
    assert.match((await flaky.textContent()) ?? "", /2 \(40%\)/);
    const runs = flaky.locator("a.run");
    assert.deepEqual(
      await runs.evaluateAll((links) => links.map((a) => `${a.className}|${a.getAttribute("href")}`)),
      jobs.map((job, n) => `run run-${n === 1 || n === 3 ? "flaky" : "passed"}|/jobs/${job}`),
    );

    assert.deepEqual(
      await page.locator("#tests-newly_failing tbody tr").evaluateAll((rows) => rows.map((r) => r.dataset.test)),
      [BROKEN_TEST],
    );
    const slowest = page.locator("#tests-slowest tbody tr").first();
    assert.equal(await slowest.getAttribute("data-test"), SLOW_TEST);
    assert.match((await slowest.textContent()) ?? "", /slower \(×2\.60\)/);
    await page.screenshot({ path: SCREENSHOTS.repository, fullPage: true });

    // A run's mark opens the job it ran in.
    await runs.nth(3).click();
    await page.waitForURL(`${base}/jobs/${jobs[3]}`);
    assert.equal(await page.locator("#part-flaky").count(), 1);
  });

  it("the job page names its flaky test apart from the failures, with both tries, and draws the build timeline", async () => {
    await page.goto(`${base}/jobs/${jobs[3]}`);
    assert.match(
      (await page.textContent("#flaky-summary")) ?? "",
      /1 flaky.*counted passed, not failures.*Policy pass/s,
    );
    const row = page.locator(`#flaky-tests tr[data-test="${FLAKY_TEST}"]`);
    const text = (await row.textContent()) ?? "";
    assert.match(text, /passed on try 2 of 2/);
    assert.match(text, /try 1 failed 12 ms · try 2 passed 30 ms/);
    await row.locator("details.try-output summary").first().click();
    assert.match((await row.locator("details.try-output pre").first().textContent()) ?? "", /connection reset/);
    assert.equal(await page.locator("#failures").count(), 0, "a flaky test is no failure");
    assert.equal(await page.locator("#failure").count(), 0, "the job passed");

    assert.match((await page.textContent("#timeline-summary")) ?? "", /critical path 8\.0 s \(89% of it\)/);
    assert.equal(await page.textContent("#critical-path"), "serde 1.0.210 (lib) → widget 0.1.0 (test)");
    assert.deepEqual(
      await page
        .locator("#timeline tr.unit")
        .evaluateAll((rows) => rows.map((r) => `${r.dataset.unit}:${r.dataset.critical}`)),
      ["itoa:false", "serde:true", "widget:true"],
    );
    // Bars are placed on the wall time: widget starts at 5 of 9 s and runs 3 s, drawn in the critical colour.
    const widget = page.locator('#timeline tr[data-unit="widget"] .bar');
    assert.equal(await widget.getAttribute("class"), "bar bar-critical");
    const [track, bar] = await Promise.all([
      page.locator('#timeline tr[data-unit="widget"] td.timeline').boundingBox(),
      widget.boundingBox(),
    ]);
    assert.ok(track !== null && bar !== null);
    const offset = (bar.x - track.x) / track.width;
    assert.ok(Math.abs(offset - 5 / 9) < 0.03, `widget's bar starts at ${offset} of the wall time`);
    assert.ok(Math.abs(bar.width / track.width - 3 / 9) < 0.03, `widget's bar spans ${bar.width / track.width}`);
    assert.equal(await page.locator("#timeline .bar-unit").count(), 1, "itoa, off the critical path");
    await page.screenshot({ path: SCREENSHOTS.job, fullPage: true });
  });

  it("a job without flaky tests shows no flaky section; a failed job lists its failure, not as flaky", async () => {
    await page.goto(`${base}/jobs/${jobs[2]}`);
    assert.equal(await page.locator("#part-flaky").count(), 0);
    assert.equal(await page.locator("#part-timeline").count(), 1);
    await page.goto(`${base}/jobs/${jobs[4]}`);
    assert.equal(await page.locator("#part-flaky").count(), 0);
    assert.equal(await page.locator(`#tests tr.test-failed`).count(), 1);
    assert.deepEqual(problems, []);
  });
});
