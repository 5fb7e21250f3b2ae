import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { addPersonToTenant, createTenant, readInstallation } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { GitHubApp, gitHubAppConfigFromEnv } from "../src/domain/source-hosting/github-app.js";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { signIn } from "../src/testing/sign-in.js";
import { GitHubSimulator } from "./github-simulator.js";

describe("provider-authorized claim configuration", () => {
  const base = {
    KILN_GITHUB_APP_ID: "1",
    KILN_GITHUB_APP_PRIVATE_KEY: "-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----",
    KILN_GITHUB_WEBHOOK_SECRET: "s",
    KILN_GITHUB_APP_SLUG: "kiln",
  };
  it("needs the OAuth client id and secret together, never naming the secret; the web origin defaults from the API", () => {
    assert.throws(
      () => gitHubAppConfigFromEnv({ ...base, KILN_GITHUB_CLIENT_ID: "Iv1.x" }),
      /KILN_GITHUB_CLIENT_SECRET/,
    );
    assert.throws(
      () => gitHubAppConfigFromEnv({ ...base, KILN_GITHUB_CLIENT_SECRET: "very-secret" }),
      (error: Error) => /KILN_GITHUB_CLIENT_ID/.test(error.message) && !error.message.includes("very-secret"),
    );
    const config = gitHubAppConfigFromEnv({ ...base, KILN_GITHUB_CLIENT_ID: "Iv1.x", KILN_GITHUB_CLIENT_SECRET: "y" });
    assert.equal(config?.webBaseUrl, "https://github.com");
    assert.deepEqual(config?.oauthClient, { clientId: "Iv1.x", clientSecret: "y" });
    assert.equal(gitHubAppConfigFromEnv(base)?.oauthClient, null);
    assert.equal(
      gitHubAppConfigFromEnv({ ...base, KILN_GITHUB_WEB_URL: "https://ghe.example.com/" })?.webBaseUrl,
      "https://ghe.example.com",
    );
  });
});

let tenants = 0;

for (const dialect of DIALECTS) {
  describe(`claiming through the provider's authorization (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let sim: GitHubSimulator;
    let tenantA: string;
    let tenantB: string;
    let alice: string;
    let bob: string;
    let member: string;
    before(async () => {
      sim = new GitHubSimulator();
      sim.installations.set(101, { account: "acme", suspended: false, repositories: ["acme/widget", "acme/gadget"] });
      sim.installations.set(202, { account: "other", suspended: false, repositories: ["other/thing"] });
      sim.users.set("alice", { installations: [101] });
      // bob can reach acme's installation on the provider too (an org member) but is in another tenant.
      sim.users.set("bob", { installations: [101, 202] });
      await sim.start();
      const app = new GitHubApp(
        {
          appId: sim.appId,
          privateKey: sim.privateKey,
          webhookSecret: sim.webhookSecret,
          slug: "kiln-test",
          apiBaseUrl: sim.url,
          webBaseUrl: sim.url,
          oauthClient: { clientId: sim.clientId, clientSecret: sim.clientSecret },
          allowUnverifiedClaims: false,
        },
        silentLogger,
      );
      t = await testApp(await dialect.openFresh(), { gitHubApp: app });
      tenants += 1;
      tenantA = `claims${process.pid}x${tenants}a`;
      tenantB = `claims${process.pid}x${tenants}b`;
      for (const id of [tenantA, tenantB]) await createTenant(t.storage, { id }, t.clock.now());
      const people: [string, string, "owner" | "member"][] = [
        [tenantA, "alice", "owner"],
        [tenantB, "bob", "owner"],
        [tenantA, "member", "member"],
      ];
      for (const [tenantId, name, role] of people) {
        await addPersonToTenant(t.storage, { tenantId, email: `${name}@${tenantId}.example`, role }, t.clock.now());
      }
      alice = await signIn(t.app, t.storage, `alice@${tenantA}.example`, tenantA, t.clock);
      bob = await signIn(t.app, t.storage, `bob@${tenantB}.example`, tenantB, t.clock);
      member = await signIn(t.app, t.storage, `member@${tenantA}.example`, tenantA, t.clock);
    });
    after(async () => {
      await t.close();
      await sim.stop();
    });

    /** The app's setup redirect, the provider's authorization as `login`, and kiln's callback. */
    const claimThroughProvider = async (session: string, installationId: number, login: string) => {
      sim.signedIn = login;
      const setup = await t.app.inject({
        method: "GET",
        url: `/onboarding/github/setup?installation_id=${installationId}&setup_action=install`,
        cookies: { kiln_session: session },
      });
      assert.equal(setup.statusCode, 303, setup.body);
      const authorize = new URL(String(setup.headers.location));
      assert.equal(`${authorize.origin}${authorize.pathname}`, `${sim.url}/login/oauth/authorize`);
      assert.equal(authorize.searchParams.get("redirect_uri"), "http://kiln.test/onboarding/github/callback");
      const pending = setup.cookies.find((c) => c.name === "kiln_github_claim");
      assert.ok(pending?.httpOnly && pending.path === "/onboarding/github" && pending.maxAge === 600);
      const atProvider = await fetch(authorize, { redirect: "manual" });
      assert.equal(atProvider.status, 302);
      const back = new URL(String(atProvider.headers.get("location")));
      return {
        back,
        pending: pending.value,
        callback: (overrides: { state?: string; cookie?: string } = {}) => {
          if (overrides.state !== undefined) back.searchParams.set("state", overrides.state);
          return t.app.inject({
            method: "GET",
            url: `${back.pathname}${back.search}`,
            cookies: { kiln_session: session, kiln_github_claim: overrides.cookie ?? pending.value },
          });
        },
      };
    };
    const repositoriesOf = async (tenant: string) => {
      const reader = await personWithToken(t.storage, { tenant, role: "viewer" });
      const res = await t.app.inject({ method: "GET", url: "/api/repositories", headers: bearer(reader.token) });
      return res
        .json()
        .repositories.map((r: { repository: string }) => r.repository)
        .sort();
    };

    it("offers the setup route as claim_url, and the API's claim by id alone points there", async () => {
      const admin = await personWithToken(t.storage, { tenant: tenantA, role: "admin" });
      const surface = await t.app.inject({ method: "GET", url: "/api/onboarding", headers: bearer(admin.token) });
      assert.equal(surface.json().claim_url, "http://kiln.test/onboarding/github/setup");
      const res = await t.app.inject({
        method: "POST",
        url: "/api/onboarding/claims",
        headers: { ...bearer(admin.token), "idempotency-key": "by-id" },
        payload: { installation_id: 101 },
      });
      assert.equal(res.json().code, "upstream_failed");
      assert.match(res.json().detail, /onboarding\/github\/setup\?installation_id=101/);
      assert.equal(await readInstallation(t.storage, { installationId: 101 }), undefined);
    });

    it("refuses to start without a signed-in admin", async () => {
      const anonymous = await t.app.inject({ method: "GET", url: "/onboarding/github/setup?installation_id=101" });
      assert.equal(anonymous.statusCode, 401);
      const notAdmin = await t.app.inject({
        method: "GET",
        url: "/onboarding/github/setup?installation_id=101",
        cookies: { kiln_session: member },
      });
      assert.equal(notAdmin.statusCode, 403);
      assert.match(notAdmin.body, /role_required/);
      const noId = await t.app.inject({
        method: "GET",
        url: "/onboarding/github/setup",
        cookies: { kiln_session: alice },
      });
      assert.equal(noId.statusCode, 400);
    });

    it("a forged installation id not among the person's installations is refused and nothing is bound", async () => {
      const flow = await claimThroughProvider(alice, 202, "alice");
      const res = await flow.callback();
      assert.equal(res.statusCode, 502, res.body);
      assert.match(res.body, /upstream_failed/);
      assert.match(res.body, /not among the installations the provider lists for your account/);
      assert.equal(await readInstallation(t.storage, { installationId: 202 }), undefined);
      assert.deepEqual(await repositoriesOf(tenantA), []);
    });

    it("a callback whose state does not match the cookie's claims nothing", async () => {
      const flow = await claimThroughProvider(alice, 101, "alice");
      const res = await flow.callback({ state: "forged-state" });
      assert.equal(res.statusCode, 400);
      assert.equal(await readInstallation(t.storage, { installationId: 101 }), undefined);
    });

    it("the person's own installation is claimed; its repositories appear in repositories.list; the token is not kept", async () => {
      const flow = await claimThroughProvider(alice, 101, "alice");
      const res = await flow.callback();
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.body, /Installation 101 is claimed/);
      assert.ok(
        res.cookies.some((c) => c.name === "kiln_github_claim" && c.value === ""),
        "the pending claim is cleared",
      );
      const held = await readInstallation(t.storage, { installationId: 101 });
      assert.equal(held?.tenantId, tenantA);
      assert.match(held?.claimedBy ?? "", /^u_|./);
      assert.deepEqual(await repositoriesOf(tenantA), ["acme/gadget", "acme/widget"]);
      // The code was redeemed once: the same callback again is refused by the provider.
      const again = await flow.callback();
      assert.equal(again.statusCode, 502);
      assert.match(again.body, /refused the authorization code/);
      // The user-to-server token is stored nowhere: no table holds it.
      const token = sim.userTokensIssued.at(-1) ?? "";
      for (const table of ["audit_entries", "app_installations", "sessions", "webhook_deliveries"] as const) {
        const rows = await t.storage.db.selectFrom(table).selectAll().execute();
        assert.ok(!JSON.stringify(rows).includes(token), `${table} holds the user token`);
      }
    });

    it("a second tenant's claim of the same installation is conflict", async () => {
      const flow = await claimThroughProvider(bob, 101, "bob");
      const res = await flow.callback();
      assert.equal(res.statusCode, 409, res.body);
      assert.match(res.body, /conflict/);
      assert.match(res.body, /already claimed by another tenant/);
      assert.equal((await readInstallation(t.storage, { installationId: 101 }))?.tenantId, tenantA);
      assert.deepEqual(await repositoriesOf(tenantB), []);
      // bob's own installation is claimed for bob's tenant.
      const own = await (await claimThroughProvider(bob, 202, "bob")).callback();
      assert.equal(own.statusCode, 200, own.body);
      assert.deepEqual(await repositoriesOf(tenantB), ["other/thing"]);
    });
  });
}
