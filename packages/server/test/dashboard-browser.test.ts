/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core signs in through a
 * real OpenID provider running locally (its login and consent pages), lands on the jobs page,
 * opens a seeded job and signs out.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { createTenant, findPersonByEmail, listMembershipsOfPerson, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { type Browser, chromium, type Page } from "playwright-core";
import { buildApp } from "../src/build-app.js";
import { OIDC_CALLBACK_PATH } from "../src/pages/oidc-sign-in.js";
import { type SeededJobs, seedDashboardJobs } from "./dashboard-fixtures.js";
import { TestClock, testBlobs } from "./harness.js";
import { type LocalOidcProvider, startLocalOidcProvider } from "./local-oidc-provider.js";

/** Debian's chromium (scripts/ensure-setup.mjs installs it for `npm test`). */
const CHROMIUM = "/usr/bin/chromium";
export const SCREENSHOT = "/tmp/kiln-job-page.png";

describe("the dashboard in chromium, signed in through OpenID Connect", () => {
  const tenant = `acme${process.pid}`;
  let storage: Storage;
  let app: FastifyInstance;
  let server: Server;
  let base: string;
  let provider: LocalOidcProvider;
  let browser: Browser;
  let page: Page;
  let jobs: SeededJobs;
  const dialogs: string[] = [];

  before(async () => {
    storage = await openSqliteForTest();
    const clock = new TestClock(new Date());
    const blobs = testBlobs();
    await createTenant(storage, { id: tenant, displayName: "Acme Widgets" }, clock.now());
    jobs = await seedDashboardJobs(storage, blobs, tenant, clock.now());

    // kiln's origin must be known before the app is built (callback URL, Origin checks): the
    // server listens first and hands its requests to the app once it is ready.
    server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
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
      oidc: {
        issuer: provider.issuer,
        clientId: provider.clientId,
        clientSecret: provider.clientSecret,
        groupsClaim: "groups",
      },
    });
    await app.ready();
    server.on("request", (request, response) => app.routing(request, response));

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    // Nothing on these pages may run script the server did not serve from /assets.
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
  });

  after(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => {
      server?.closeAllConnections();
      server?.close(() => resolve());
    });
    await provider?.close();
    await app?.close();
    await storage?.close();
  });

  it("signs in at the identity provider and lands on the jobs page as a member of the tenant", async () => {
    await page.goto(`${base}/jobs`);
    await page.waitForURL(`${base}/?next=%2Fjobs`);
    await page.click("#sign-in-oidc");

    // The provider's own login page, then its consent page.
    await page.waitForURL(`${provider.issuer}/interaction/**`);
    await page.fill('input[name="login"]', "ann");
    await page.fill('input[name="password"]', "any password");
    await page.click('button[type="submit"]');
    await page.waitForSelector('input[name="prompt"][value="consent"]', { state: "attached" });
    await page.click('button[type="submit"]');

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
    // The log's markup is shown, not run.
    assert.match((await page.textContent("#log-lines")) ?? "", /assertion failed <script>alert\('x'\)<\/script>/);
    assert.deepEqual(dialogs, []);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
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
