/**
 * The dashboard end to end in a real browser: Debian's chromium (playwright-core) signs in at a
 * real OpenID provider, approves a real `kiln login` device code, follows a job the real CLI
 * submits from queued to passed on its page without a reload (the embedded host and sandbox
 * run real cargo), finds a real failing test's output, mints a credential shown once, hits a
 * stale repository settings version, and reads the usage charts.
 *
 * With KILN_SCREENSHOT_DIR set it saves the job, repository and usage pages there
 * (`KILN_SCREENSHOT_DIR=docs/screenshots node --test packages/cli/dist/test/dashboard-browser-e2e.browser.test.js`
 * refreshes the README's screenshots).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import type { AppOrigin } from "@kiln/server/testing";
import {
  closeBrowserTest,
  type LocalOidcProvider,
  launchChromium,
  type ProviderAccount,
  signInAtProvider,
  startLocalOidcProvider,
  watchPageProblems,
} from "@kiln/server/testing/browser";
import type { Browser, Page } from "playwright-core";
import { freshConfigHome, REPO_ROOT, type RunningCli, serverTesting, startCli, until } from "./harness.js";

/** Deadlines for failing, never verdicts: a real build on a loaded 2-core machine can take minutes. */
const STEP_MS = 120_000;
const BUILD_MS = 900_000;
const SCREENSHOTS = process.env.KILN_SCREENSHOT_DIR;

const CALLBACK_PATH = "/auth/oidc/callback";

function workspace(name: string, test: string): string {
  const root = mkdtempSync(join(tmpdir(), "kiln-dashboard-ws-"));
  const files = {
    "Cargo.toml": `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n`,
    "src/lib.rs": `pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n${test}\n}\n`,
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

describe("the dashboard in chromium with the real CLI, host and OpenID provider", () => {
  let origin: AppOrigin;
  let base: string;
  let provider: LocalOidcProvider;
  let embedded: Awaited<ReturnType<Awaited<ReturnType<typeof serverTesting>>["startEmbedded"]>>;
  let browser: Browser;
  let page: Page;
  let configHome: string;
  const scratch: string[] = [];
  const clis: RunningCli[] = [];
  const pageErrors: string[] = [];
  const policyViolations: string[] = [];
  /** The provider's people, filled once the tenant exists (it reads them at sign-in). */
  const accounts: Record<string, ProviderAccount> = {};

  const shoot = async (name: string) => {
    if (SCREENSHOTS === undefined) return;
    mkdirSync(resolve(REPO_ROOT, SCREENSHOTS), { recursive: true });
    // The log paints only its visible chunks (content-visibility: auto); a full-page picture shows them all.
    await page.evaluate(() => {
      type Chunk = { style: { contentVisibility: string } };
      const { document } = globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<Chunk> } };
      for (const chunk of document.querySelectorAll("#log-lines .chunk")) chunk.style.contentVisibility = "visible";
    });
    await page.screenshot({ path: resolve(REPO_ROOT, SCREENSHOTS, `${name}.png`), fullPage: true });
  };

  /** `kiln cargo test` in `dir` as the signed-in CLI; resolves with the job id it announces. */
  const submit = async (dir: string): Promise<{ cli: RunningCli; job: string }> => {
    const cli = startCli(["cargo", "test", "--repository", "acme/widget"], {
      cwd: dir,
      env: { XDG_CONFIG_HOME: configHome },
    });
    clis.push(cli);
    let job = "";
    await until(
      () => {
        job = /job (\S+) submitted/.exec(cli.stderr())?.[1] ?? "";
        return job !== "";
      },
      STEP_MS,
      () => `no job announced: ${cli.stderr()}`,
    );
    return { cli, job };
  };

  before(async () => {
    const { listenBeforeTheApp, startEmbedded } = await serverTesting();
    // The browser's origin must be known before the app is built (callback URL, Origin checks).
    origin = await listenBeforeTheApp();
    base = origin.base;
    provider = await startLocalOidcProvider(`${base}${CALLBACK_PATH}`, accounts);
    embedded = await startEmbedded({
      publicOrigin: base,
      holdHost: true,
      oidc: provider.settings(false),
    });
    accounts.ann = { email: "ann@acme.example", name: "Ann Example", groups: [`kiln:${embedded.tenant}:admin`] };
    await origin.serve(embedded.app);
    configHome = freshConfigHome();

    browser = await launchChromium();
    // A context of its own (not browser.newPage's), so a second tab shares the session.
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    page.setDefaultTimeout(STEP_MS);
    watchPageProblems(page, { pageErrors, policyViolations });
  });

  after(async () => {
    for (const cli of clis) cli.child.kill("SIGKILL");
    await closeBrowserTest(browser, origin, provider, embedded);
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  });

  it("signs in at the identity provider as an admin of the tenant", async () => {
    await page.goto(`${base}/jobs`);
    await page.click("#sign-in-oidc");
    await signInAtProvider(page, provider.issuer, "ann");
    await page.waitForURL(`${base}/jobs`);
    assert.match((await page.textContent("#signed-in-as")) ?? "", /^Ann Example · admin of /);
  });

  it("approves a `kiln login` device code on the page its verification URL opens", async () => {
    const login = startCli(["login"], { env: { XDG_CONFIG_HOME: configHome, KILN_ENDPOINT: base } });
    clis.push(login);
    let url = "";
    await until(
      () => {
        url = /(http:\/\/\S+\/device\?user_code=[A-Z]{4}-[A-Z]{4})/.exec(login.stderr())?.[1] ?? "";
        return url !== "";
      },
      STEP_MS,
      () => `no verification URL in: ${login.stderr()}`,
    );
    const code = new URL(url).searchParams.get("user_code") ?? "";
    await page.goto(url);
    assert.equal(await page.textContent("#user-code"), code, "the page shows the code the terminal shows");
    assert.ok(((await page.textContent("#host")) ?? "") !== "", "and the requesting host");
    await page.click("#approve");
    await page.waitForSelector('#result:has-text("Approved")');
    const finished = await login.done;
    assert.equal(finished.code, 0, finished.stderr);
    assert.match(finished.stdout, /Logged in to/);
    // Her new CLI token is on her tokens page.
    await page.goto(`${base}/cli-tokens`);
    assert.equal(await page.locator("#tokens tbody tr").count(), 1);
  });

  it("follows a job the CLI submits from queued to passed on its page, without a reload", async () => {
    const dir = workspace("widget", "    #[test]\n    fn adds() {\n        assert_eq!(add(2, 2), 4);\n    }");
    scratch.push(dir);
    const { cli, job } = await submit(dir);
    await page.goto(`${base}/jobs/${job}`);
    await page.waitForSelector('#job-status[data-status="queued"]');
    await page.evaluate(() => {
      (globalThis as { kilnMark?: string }).kilnMark = "same document";
    });
    // The host starts only now: the page saw the job queued, and follows it from here.
    await embedded.startHost();
    await page.waitForSelector('#job-status[data-status="running"], #job-status[data-status="passed"]', {
      timeout: BUILD_MS,
    });
    await page.waitForSelector('#job-status[data-status="passed"]', { timeout: BUILD_MS });
    await page.waitForSelector('#tests tr[data-outcome="passed"]', { timeout: STEP_MS });
    assert.match((await page.textContent("#tests")) ?? "", /tests::adds/);
    assert.match((await page.textContent("#log-lines")) ?? "", /test result: ok\. 1 passed/);
    assert.equal(await page.evaluate(() => (globalThis as { kilnMark?: string }).kilnMark), "same document");
    const run = await cli.done;
    assert.equal(run.code, 0, run.stderr);
    await shoot("job-page");
  });

  it("opens a failed job and finds the failing test and its output", async () => {
    const dir = workspace(
      "widget",
      '    #[test]\n    fn adds() {\n        assert_eq!(add(2, 2), 4);\n    }\n\n    #[test]\n    fn carries() {\n        assert_eq!(add(2, 2), 5, "two and two");\n    }',
    );
    scratch.push(dir);
    const { cli, job } = await submit(dir);
    const run = await cli.done;
    assert.notEqual(run.code, 0, "a failing test fails the CLI run");
    await page.goto(`${base}/jobs?status=failed`);
    await page.click(`tr[data-job="${job}"] a`);
    await page.waitForURL(`${base}/jobs/${job}`);
    assert.match((await page.textContent("#failure")) ?? "", /test failure/);
    assert.match((await page.textContent("#tests tbody tr:first-child")) ?? "", /carries/);
    await page.click('a.test-output[data-test="tests::carries"]');
    await page.waitForSelector("#log-lines .line.found");
    assert.match((await page.textContent("#log-lines .line.found")) ?? "", /tests::carries/);
    assert.match((await page.textContent("#log-lines")) ?? "", /two and two/);
  });

  it("mints an agent credential whose value is shown once", async () => {
    await page.goto(`${base}/credentials`);
    await page.fill('input[name="name"]', "ci-bot");
    await page.check('input[name="scopes"][value="submit"]');
    await page.click("#mint");
    await page.waitForSelector("#credential-value");
    const value = await page.inputValue("#credential-value");
    assert.match(value, /^kiln_agent_/);
    await page.goto(`${base}/credentials`);
    assert.equal(await page.locator('tr[data-credential="ci-bot"]').count(), 1);
    assert.ok(!(await page.content()).includes(value), "the list never shows the value");
  });

  it("edits a repository setting, and a second tab's stale version is told so with the current value", async () => {
    const stale = await page.context().newPage();
    stale.setDefaultTimeout(STEP_MS);
    try {
      await page.goto(`${base}/repositories/acme/widget`);
      await stale.goto(`${base}/repositories/acme/widget`);
      const version = Number(await page.textContent("#settings-version"));
      await page.click('input[name="affected_tests"]');
      await page.click("#save-settings");
      await page.waitForSelector("#notice");
      assert.equal(Number(await page.textContent("#settings-version")), version + 1);
      const turnedOn = await page.isChecked('input[name="affected_tests"]');

      // The other tab still holds the old version.
      await stale.fill('input[name="wall_clock_ceiling_seconds"]', "600");
      await stale.click("#save-settings");
      await stale.waitForSelector("#stale-version");
      assert.equal(await stale.getAttribute("#stale-version", "data-current-version"), String(version + 1));
      assert.equal(await stale.isChecked('input[name="affected_tests"]'), turnedOn, "it shows the current value");
      assert.equal(Number(await stale.textContent("#settings-version")), version + 1);
      // The repository's real lineage from the jobs above is listed against the quota.
      assert.ok((await page.locator("#lineages tbody tr").count()) >= 1);
      await shoot("repository-page");
    } finally {
      await stale.close();
    }
  });

  it("reads the month's usage as charts per day and per repository", async () => {
    await page.goto(`${base}/usage`);
    assert.ok((await page.locator("#chart-days .bar-row").count()) >= 1);
    assert.equal(await page.locator('#chart-repositories .bar-row[data-label="acme/widget"]').count(), 1);
    assert.ok(Number((await page.textContent("#total-jobs")) ?? "0") >= 2);
    await shoot("usage-page");
    assert.deepEqual(policyViolations, []);
    assert.deepEqual(pageErrors, []);
  });
});
