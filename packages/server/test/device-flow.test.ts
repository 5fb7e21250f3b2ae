import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DIALECTS } from "@kiln/storage/testing";
import { mintSignInLink } from "../src/admin/mint-sign-in-link.js";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { signIn } from "../src/testing/sign-in.js";

for (const dialect of DIALECTS) {
  describe(`device authorization, sessions and tokens (${dialect.name})`, () => {
    let t: TestApp;
    let admin: { tenant: string; userId: string; token: string };
    let email: string;
    before(async () => {
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null }));
      const person = await t.storage.db
        .selectFrom("persons")
        .select("email")
        .where("id", "=", admin.userId)
        .executeTakeFirstOrThrow();
      email = person.email;
    });
    after(() => t.close());

    const withSession = (cookie: string, extra: Record<string, string> = {}) => ({
      cookie: `kiln_session=${cookie}`,
      ...extra,
    });
    const start = async () => {
      const res = await t.app.inject({ method: "POST", url: "/api/device/start" });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as {
        device_code: string;
        user_code: string;
        verification_uri: string;
        expires_at: string;
        interval_seconds: number;
        requesting_host: string;
      };
    };
    const poll = async (deviceCode: string) => {
      const res = await t.app.inject({
        method: "GET",
        url: `/api/device/poll?device_code=${encodeURIComponent(deviceCode)}`,
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as { state: string; token?: string; interval_seconds?: number };
    };

    it("end to end: approve in a signed-in session; the token is issued once; a revoked token is refused on its next use", async () => {
      const started = await start();
      assert.match(started.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
      assert.equal(started.verification_uri, `http://kiln.test/device?user_code=${started.user_code}`);
      assert.equal(started.expires_at, new Date(t.clock.now().getTime() + 600_000).toISOString());
      assert.equal(started.requesting_host, "127.0.0.1");

      assert.equal((await poll(started.device_code)).state, "pending");
      assert.equal((await poll(started.device_code)).state, "limited", "a poll inside the interval is limited");

      const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
      const page = await t.app.inject({
        method: "GET",
        url: `/device?user_code=${started.user_code}`,
        headers: withSession(cookie),
      });
      assert.equal(page.statusCode, 200);
      assert.match(page.body, new RegExp(started.user_code));
      assert.match(page.body, /127\.0\.0\.1/);
      assert.match(page.body, /Approve/);

      const pending = await t.app.inject({
        method: "GET",
        url: `/api/device/pending?user_code=${started.user_code.toLowerCase()}`,
        headers: withSession(cookie),
      });
      assert.deepEqual(pending.json(), {
        user_code: started.user_code,
        requesting_host: "127.0.0.1",
        expires_at: started.expires_at,
      });

      const approve = await t.app.inject({
        method: "POST",
        url: `/api/device/approve?user_code=${started.user_code}`,
        headers: withSession(cookie, { "idempotency-key": "approve-1", origin: "http://kiln.test" }),
      });
      assert.equal(approve.statusCode, 200, approve.body);
      assert.deepEqual(approve.json(), { user_code: started.user_code, approved_by: admin.userId });

      await t.clock.advance((started.interval_seconds + 5) * 1000);
      const approved = await poll(started.device_code);
      assert.equal(approved.state, "approved");
      assert.match(approved.token ?? "", /^kiln_cli_/);
      await t.clock.advance((started.interval_seconds + 5) * 1000);
      const again = await poll(started.device_code);
      assert.equal(again.state, "expired");
      assert.equal(again.token, undefined, "the token is issued exactly once");

      const token = approved.token ?? "";
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(token) });
      assert.equal(identity.statusCode, 200, identity.body);
      assert.equal(identity.json().principal, admin.userId);
      assert.equal(identity.json().role, "admin");
      assert.deepEqual(identity.json().memberships, [
        { tenant: admin.tenant, organization_id: admin.tenant, role: "admin" },
      ]);

      const tokens = await t.app.inject({ method: "GET", url: "/api/cli/tokens", headers: bearer(token) });
      const mine = (tokens.json() as { tokens: { id: string; requesting_host: string }[] }).tokens;
      const issued = mine.find((x) => x.requesting_host === "127.0.0.1");
      assert.ok(issued);
      const revoke = await t.app.inject({
        method: "POST",
        url: `/api/cli/tokens/${issued.id}/revocation`,
        headers: { ...bearer(admin.token), "idempotency-key": "revoke-device-token" },
      });
      assert.equal(revoke.statusCode, 200, revoke.body);
      const refused = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(token) });
      assert.equal(refused.statusCode, 401);
      assert.equal(refused.json().code, "credential_revoked");
      assert.equal(refused.json().revoked_at, revoke.json().revoked_at);

      const audit = await t.app.inject({ method: "GET", url: "/api/audit", headers: bearer(admin.token) });
      const targets = (audit.json() as { entries: { target: string; value: string }[] }).entries.map(
        (e) => `${e.target} ${e.value}`,
      );
      assert.ok(targets.some((x) => x.startsWith(`device:${started.user_code} approved`)));
      assert.ok(targets.some((x) => x === `cli-token:${issued.id} revoked`));
    });

    it("an unapproved device code expires; unknown codes look expired too", async () => {
      const started = await start();
      await t.clock.advance(601_000);
      assert.equal((await poll(started.device_code)).state, "expired");
      assert.equal((await poll("not-a-real-device-code")).state, "expired");
    });

    it("approval is session-only: bearer → session_required, nothing → unauthenticated, another site → refused", async () => {
      const started = await start();
      const url = `/api/device/approve?user_code=${started.user_code}`;
      const withBearer = await t.app.inject({
        method: "POST",
        url,
        headers: { ...bearer(admin.token), "idempotency-key": "a1" },
      });
      assert.equal(withBearer.json().code, "session_required");
      const nothing = await t.app.inject({ method: "POST", url, headers: { "idempotency-key": "a2" } });
      assert.equal(nothing.json().code, "unauthenticated");
      const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
      const crossSite = await t.app.inject({
        method: "POST",
        url,
        headers: withSession(cookie, { "idempotency-key": "a3", origin: "https://evil.example" }),
      });
      assert.equal(crossSite.statusCode, 401);
      assert.match(crossSite.json().detail, /cross-site/);
      const unknown = await t.app.inject({
        method: "POST",
        url: "/api/device/approve?user_code=BBBB-BBBB",
        headers: withSession(cookie, { "idempotency-key": "a4", origin: "http://kiln.test" }),
      });
      assert.equal(unknown.statusCode, 400);
      assert.equal(unknown.json().code, "invalid_request");
      assert.match(unknown.json().detail, /query\.user_code/);
    });

    it("a sign-in link works once; signing out ends the session", async () => {
      const link = new URL(await mintSignInLink(t.storage, "http://kiln.test", email, undefined, t.clock));
      const first = await t.app.inject({ method: "GET", url: `${link.pathname}${link.search}` });
      assert.equal(first.statusCode, 303);
      const second = await t.app.inject({ method: "GET", url: `${link.pathname}${link.search}` });
      assert.equal(second.statusCode, 400);
      const cookie = first.cookies.find((c) => c.name === "kiln_session")?.value ?? "";
      const home = await t.app.inject({ method: "GET", url: "/", headers: withSession(cookie) });
      assert.match(home.body, /Signed in as/);
      const out = await t.app.inject({
        method: "POST",
        url: "/auth/sign-out",
        headers: withSession(cookie, { origin: "http://kiln.test" }),
      });
      assert.equal(out.statusCode, 303);
      const pending = await t.app.inject({
        method: "GET",
        url: "/api/device/pending?user_code=BBBB-BBBB",
        headers: withSession(cookie),
      });
      assert.equal(pending.statusCode, 401);
      assert.equal(pending.json().code, "unauthenticated");
    });

    it("after sign-in, a link goes only to kiln's own paths: a backslash or another origin lands on /", async () => {
      const cases: [string, string][] = [
        ["/jobs/j1?tab=log", "/jobs/j1?tab=log"],
        ["/\\evil.example", "/"],
        ["//evil.example/x", "/"],
        ["https://evil.example/", "/"],
        ["/%5Cevil.example", "/%5Cevil.example"],
      ];
      for (const [next, expected] of cases) {
        const link = new URL(await mintSignInLink(t.storage, "http://kiln.test", email, undefined, t.clock));
        link.searchParams.set("next", next);
        const res = await t.app.inject({ method: "GET", url: `${link.pathname}${link.search}` });
        assert.equal(res.statusCode, 303, res.body);
        assert.equal(res.headers.location, expected, `next=${next}`);
      }
    });

    it("the approval page cannot be framed and runs no inline script; its script is served from kiln's origin", async () => {
      const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
      const started = await t.app.inject({ method: "POST", url: "/api/device/start" });
      const page = await t.app.inject({
        method: "GET",
        url: `/device?user_code=${started.json().user_code}`,
        headers: withSession(cookie),
      });
      assert.equal(page.statusCode, 200, page.body);
      assert.equal(page.headers["x-frame-options"], "DENY");
      assert.match(String(page.headers["content-security-policy"]), /frame-ancestors 'none'/);
      assert.match(String(page.headers["content-security-policy"]), /script-src 'self'(;|$)/);
      assert.doesNotMatch(page.body, /<script>/, "no inline script");
      assert.match(page.body, /<script src="\/assets\/device-approve\.js"><\/script>/);
      const script = await t.app.inject({ method: "GET", url: "/assets/device-approve.js" });
      assert.equal(script.statusCode, 200);
      assert.match(String(script.headers["content-type"]), /^text\/javascript/);
      assert.match(script.body, /\/api\/device\/approve/);
    });

    it("an expired agent credential is refused naming expired_at (injected clock); identity of an agent", async () => {
      const created = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { ...bearer(admin.token), "content-type": "application/json", "idempotency-key": "short-lived" },
        payload: JSON.stringify({ name: "short-lived", scopes: ["read", "submit"], expires_in_seconds: 60 }),
      });
      assert.equal(created.statusCode, 200, created.body);
      const value = created.json().credential as string;
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(value) });
      assert.deepEqual(identity.json(), {
        principal: "agent:short-lived",
        kind: "agent",
        user_id: null,
        display_name: "short-lived",
        tenant: admin.tenant,
        role: null,
        scopes: ["read", "submit"],
        memberships: [],
        installation_active: null,
        sign_out_available: false,
      });
      await t.clock.advance(61_000);
      const expired = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(value) });
      assert.equal(expired.statusCode, 401);
      assert.equal(expired.json().code, "credential_expired");
      assert.equal(expired.json().expired_at, created.json().view.expires_at);
      const tenant = await t.app.inject({ method: "GET", url: "/api/cli/tenant", headers: bearer(admin.token) });
      assert.deepEqual(tenant.json(), {
        tenant: admin.tenant,
        display_name: admin.tenant,
        principal: admin.userId,
        kind: "person",
      });
    });

    it("last_used_at is kept without a database write per request", async () => {
      const person = await personWithToken(t.storage, { role: "viewer" });
      const lastUsed = async () =>
        (
          await t.storage.db
            .selectFrom("cli_tokens")
            .select("last_used_at")
            .where("person_id", "=", person.userId)
            .executeTakeFirstOrThrow()
        ).last_used_at;
      for (let i = 0; i < 3; i++)
        await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(person.token) });
      assert.equal(await lastUsed(), null, "no write on the request path");
      await t.app.close(); // flushes the coalesced uses
      assert.equal(await lastUsed(), t.clock.now().toISOString());
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null }));
    });
  });
}
