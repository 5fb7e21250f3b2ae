#!/usr/bin/env node
// Regenerates the job page's screenshots in docs/screenshots (linked from the README): the
// failure banner, the log viewer (a search hit on page 6 of a 20,000-line log; kiln's lines and
// a passing test binary folded, cargo's colours, the timestamps shown) and a running job's view.
//
//   npm run build && npm run screenshots      (the project's Node.js runtime, as npm scripts run)
//
// kiln runs in this process on a fresh SQLite data dir (packages/server/test/log-viewer-demo.ts,
// the fixture the log viewer's browser test opens too), in Debian's chromium via playwright-core.
// Not part of the gate: it writes files and judges nothing.
import { join } from "node:path";
import { dist, requireBuilt, root } from "../bench/support/built-packages.mjs";

const demoModule = dist("test/log-viewer-demo.js");
requireBuilt(demoModule);
const { NEEDLE, startLogViewerDemo } = await import(demoModule);
const { chromium } = await import("playwright-core");

const out = (name) => join(root, "docs", "screenshots", name);
const demo = await startLogViewerDemo();
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, deviceScaleFactor: 1 });
  await context.addCookies([{ name: "kiln_session", value: demo.cookie, url: demo.base }]);
  const page = await context.newPage();

  // 1. The failure banner: what failed, first, with its location and log line.
  await page.goto(`${demo.base}/jobs/${demo.failed}`);
  await page.locator("#failures").waitFor();
  await page.screenshot({ path: out("failure-banner.png") });

  // 2. The log viewer: its first page, the timestamps on, kiln's preamble and the passing
  //    binary folded, the failing one open in cargo's colours.
  await page.check("#log-times");
  await page.locator("#log-view").scrollIntoViewIfNeeded();
  await page.locator("#log-view").screenshot({ path: out("log-viewer-folds.png") });

  // 3. A search across the whole log: the hit on page 6, opened at its line, marked.
  await page.goto(`${demo.base}/jobs/${demo.failed}?log_search=${encodeURIComponent(NEEDLE)}#log-search`);
  await page.click("a.search-hit");
  await page.locator(`#L${demo.needleLine}`).waitFor({ state: "visible" });
  await page.locator("#log-view").screenshot({ path: out("log-viewer-search.png") });

  // 4. A running job: its status panel and live log first.
  await page.goto(`${demo.base}/jobs/${demo.running}`);
  await page.locator('#log-lines[data-follow="true"]').waitFor();
  await demo.appendRunning([
    {
      stream: "stderr",
      text: "\u001b[1m\u001b[32m     Running\u001b[0m tests/replay.rs (target/debug/deps/replay-8be0f4a2)",
    },
    { stream: "stdout", text: "" },
    { stream: "stdout", text: "running 2 tests" },
    { stream: "stdout", text: "test replay::small_archive ... \u001b[32mok\u001b[0m" },
  ]);
  await page.locator('#live-step:text-is("testing tests/replay.rs")').waitFor();
  await page.screenshot({ path: out("running-job.png") });
  for (const name of ["failure-banner.png", "log-viewer-folds.png", "log-viewer-search.png", "running-job.png"])
    process.stdout.write(`wrote docs/screenshots/${name}\n`);
} finally {
  await browser.close();
  await demo.close();
}
