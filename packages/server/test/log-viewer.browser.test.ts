/**
 * The job page's log viewer and running-job view in a real browser (Debian's chromium through
 * playwright-core): search across a 20,000-line log, folds, line permalinks, the timestamps
 * toggle, colours, jump to the end, and the live panel of a running job.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { launchChromium, watchPageProblems } from "../src/testing/browser.js";
import { type LogViewerDemo, NEEDLE, startLogViewerDemo } from "./log-viewer-demo.js";

describe("the log viewer in chromium", () => {
  let demo: LogViewerDemo;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const policyViolations: string[] = [];

  before(async () => {
    demo = await startLogViewerDemo();
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addCookies([{ name: "kiln_session", value: demo.cookie, url: demo.base }]);
    // Counts the date formatters the page builds: the layout script's localized times need one
    // for the page, never one a time (a followed log built one per streamed line).
    await context.addInitScript(() => {
      const scope = globalThis as unknown as { Intl: { DateTimeFormat: object }; formattersBuilt: number };
      scope.formattersBuilt = 0;
      scope.Intl.DateTimeFormat = new Proxy(scope.Intl.DateTimeFormat, {
        construct(target, args) {
          scope.formattersBuilt += 1;
          return Reflect.construct(target as new (...a: unknown[]) => object, args);
        },
      });
    });
    page = await context.newPage();
    watchPageProblems(page, { pageErrors, policyViolations });
  });
  after(async () => {
    await browser?.close();
    await demo?.close();
  });

  it("finds a line on page 6 of the 20,000-line log and opens it there, highlighted, its fold open", async () => {
    await page.goto(`${demo.base}/jobs/${demo.failed}`);
    await page.fill('input[name="log_search"]', NEEDLE.toUpperCase());
    await page.press('input[name="log_search"]', "Enter");
    await page.waitForSelector("#log-search-summary");
    assert.match((await page.textContent("#log-search-summary")) ?? "", /^1 line contains/);
    await page.click("a.search-hit");
    await page.waitForURL(new RegExp(`log_line=${demo.needleLine}.*#L${demo.needleLine}$`));
    const line = page.locator(`#L${demo.needleLine}`);
    await line.waitFor({ state: "visible" });
    assert.ok(((await line.textContent()) ?? "").includes(NEEDLE));
    assert.equal(await page.locator("#L5001").count(), 1, "the sixth page");
    assert.equal(await line.evaluate((el) => el.matches(":target") || el.classList.contains("found")), true);
    assert.equal(await line.locator("mark").textContent(), NEEDLE);
    // No closed fold hides it.
    assert.equal(await line.evaluate((el) => el.closest("details:not([open])")), null);
    assert.deepEqual(pageErrors, []);
  });

  it("folds kiln's own lines and the passing binary; a click opens them; numbers are permalinks", async () => {
    await page.goto(`${demo.base}/jobs/${demo.failed}`);
    const preamble = page.locator("details.fold-kiln").first();
    assert.equal(await preamble.evaluate((el) => el.hasAttribute("open")), false);
    assert.equal(await page.locator("#L1").isVisible(), false, "kiln's preamble folded");
    await preamble.locator("summary").click();
    await page.locator("#L1").waitFor({ state: "visible" });
    const unitTests = page.locator("details.fold-binary").first();
    assert.equal(await unitTests.evaluate((el) => el.hasAttribute("open")), false, "a passing binary folded");
    assert.match((await unitTests.locator(".fold-verdict").textContent()) ?? "", /^test result: ok\. 4 passed/);

    // A line number marks its line in place (no reload) and the address is its permalink.
    await page.evaluate(() => {
      (globalThis as { kilnMark?: string }).kilnMark = "same document";
    });
    await page.click("#L2 a.seq");
    await page.waitForSelector("#L2.found");
    assert.match(page.url(), new RegExp(`/jobs/${demo.failed}\\?log_line=2#L2$`));
    assert.equal(await page.evaluate(() => (globalThis as { kilnMark?: string }).kilnMark), "same document");
    assert.deepEqual(pageErrors, []);
  });

  it("shows times behind the toggle, colours cargo's ANSI runs, marks stderr, and never runs the log's markup", async () => {
    await page.goto(`${demo.base}/jobs/${demo.failed}`);
    const time = page.locator("#log-lines .line .ts").first();
    assert.equal(await time.isVisible(), false);
    await page.check("#log-times");
    await page.locator("#log-lines details[open] .line .ts").first().waitFor({ state: "visible" });
    // A line's time is the log's own clock (UTC to the millisecond), not rewritten as the page's other times are.
    assert.match((await page.locator("#log-lines .line .ts").first().textContent()) ?? "", /^\d\d:\d\d:\d\d\.\d{3} $/);
    const colour = (selector: string) =>
      page
        .locator(selector)
        .first()
        .evaluate(
          (el) =>
            (globalThis as unknown as { getComputedStyle(e: unknown): { color: string } }).getComputedStyle(el).color,
        );
    assert.equal(await colour("#log-lines .ansi-fg-2"), "rgb(107, 214, 107)");
    assert.notEqual(await colour("#log-lines .line.stderr"), await colour("#log-lines .line.stdout"));
    assert.equal(await page.locator("#log-lines script, #log-lines img").count(), 0);
    assert.deepEqual(policyViolations, []);
  });

  it("jumps to the end of the finished log: its last page, its last line marked", async () => {
    await page.goto(`${demo.base}/jobs/${demo.failed}`);
    await page.click("#log-end");
    await page.waitForURL(new RegExp(`log_line=${demo.lastLine}#L${demo.lastLine}$`));
    const last = page.locator(`#L${demo.lastLine}`);
    await last.waitFor({ state: "visible" });
    assert.match((await last.textContent()) ?? "", /saved the lineage's cache/);
    assert.equal(await page.locator("#log-more").count(), 0, "nothing after the last page");
  });

  it("a running job shows its live log first, the step now, a ticking timer and each binary as it finishes", async () => {
    await page.goto(`${demo.base}/jobs/${demo.running}`);
    await page.waitForSelector('#log-lines[data-follow="true"]');
    const box = async (selector: string) => (await page.locator(selector).boundingBox())?.y ?? -1;
    assert.ok((await box("#live")) < (await box("#log-lines")), "the panel above the log");
    assert.ok((await box("#log-lines")) < (await box("#job-details")), "the job's facts below it");
    assert.equal(await page.getAttribute("#live-status", "aria-live"), "polite");
    assert.match((await page.textContent("#live-tests")) ?? "", /unittests src\/lib\.rs: ok\. 4 passed/);
    const started = await page.textContent("#live-elapsed");
    // The timer ticks in the page (waited for, not timed).
    await page.waitForFunction(
      (before) =>
        (
          globalThis as unknown as { document: { getElementById(id: string): { textContent: string | null } | null } }
        ).document.getElementById("live-elapsed")?.textContent !== before,
      started,
    );

    await demo.appendRunning([
      {
        stream: "stderr",
        text: "\u001b[1m\u001b[32m     Running\u001b[0m tests/replay.rs (target/debug/deps/replay-8be0f4a2)",
      },
      { stream: "stdout", text: "test replay::small_archive ... ok" },
      { stream: "stdout", text: "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out" },
    ]);
    await page.waitForSelector('#live-tests li:has-text("tests/replay.rs: ok. 1 passed")');
    await page.waitForSelector('#live-step:text-is("testing tests/replay.rs")');
    // The streamed lines carry their time as the server-rendered ones do, and the page built one
    // date formatter in all, however many lines and times it shows.
    const streamed = page.locator('#log-lines .chunk .line:has-text("replay::small_archive") .ts');
    assert.match((await streamed.textContent()) ?? "", /^\d\d:\d\d:\d\d\.\d{3} $/);
    assert.ok((await page.locator("time[data-local]").count()) > 1, "the page shows localized times");
    assert.equal(await page.evaluate(() => (globalThis as unknown as { formattersBuilt: number }).formattersBuilt), 1);
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(policyViolations, []);
  });
});
