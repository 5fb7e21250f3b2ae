/**
 * Cookie-authenticated mutations come only from kiln's own pages (issue 22, L2): a browser
 * names the page's Origin on every POST and Sec-Fetch-Site on every request, so a mutation
 * carrying neither, or naming another site, is refused — sign-out included.
 */
import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type PersonWithToken, personWithToken, type TestApp } from "../src/testing/harness.js";
import { signIn } from "../src/testing/sign-in.js";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";

const OWN = "http://kiln.test";

for (const dialect of DIALECTS) {
  describe(`session mutations need kiln's own origin (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let email: string;
    before(async () => {
      let admin: PersonWithToken;
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null }));
      const person = await t.storage.db
        .selectFrom("persons")
        .select("email")
        .where("id", "=", admin.userId)
        .executeTakeFirstOrThrow();
      email = person.email;
    });
    after(() => t.close());

    const signedIn = async (cookie: string) =>
      /Signed in as/.test(
        (await t.app.inject({ method: "GET", url: "/", headers: { cookie: `kiln_session=${cookie}` } })).body,
      );

    it("device approval with the session cookie: no Origin and no Sec-Fetch-Site is refused; same-origin passes", async () => {
      const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
      let key = 0;
      const approve = (headers: Record<string, string>) =>
        t.app.inject({
          method: "POST",
          // An unknown user code: a request past the cross-site check is refused invalid_request for it.
          url: "/api/device/approve?user_code=BBBB-BBBB",
          headers: { cookie: `kiln_session=${cookie}`, "idempotency-key": `approve-${++key}`, ...headers },
        });
      const bare = await approve({});
      assert.equal(bare.statusCode, 401, bare.body);
      assert.equal(bare.json().code, "unauthenticated");
      assert.match(bare.json().detail, /neither its Origin nor Sec-Fetch-Site: same-origin/);
      const refused: Record<string, string>[] = [
        { origin: "https://evil.example" },
        { origin: "null" },
        { "sec-fetch-site": "cross-site" },
        { "sec-fetch-site": "same-site" },
        { "sec-fetch-site": "none" },
        { origin: OWN, "sec-fetch-site": "cross-site" },
      ];
      for (const headers of refused) {
        const res = await approve(headers);
        assert.equal(res.statusCode, 401, `${JSON.stringify(headers)}: ${res.body}`);
        assert.equal(res.json().code, "unauthenticated");
      }
      const admitted: Record<string, string>[] = [
        { origin: OWN },
        { "sec-fetch-site": "same-origin" },
        { origin: OWN, "sec-fetch-site": "same-origin" },
      ];
      for (const headers of admitted) {
        const res = await approve(headers);
        assert.equal(res.statusCode, 400, `${JSON.stringify(headers)}: ${res.body}`);
        assert.match(res.json().detail, /query\.user_code|BBBB/);
      }
      // A bearer credential is no ambient authority: no Origin needed.
      const admin = await personWithToken(t.storage, { role: "admin" });
      const withBearer = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { ...bearer(admin.token), "content-type": "application/json", "idempotency-key": "bearer-1" },
        payload: JSON.stringify({ name: "ci", scopes: ["read"] }),
      });
      assert.notEqual(withBearer.statusCode, 401, withBearer.body);
    });

    it("sign-out from another site, or naming no origin, is refused and leaves the session signed in", async () => {
      const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
      const signOut = (headers: Record<string, string>) =>
        t.app.inject({
          method: "POST",
          url: "/auth/sign-out",
          headers: { cookie: `kiln_session=${cookie}`, ...headers },
        });
      const refused: Record<string, string>[] = [
        {},
        { origin: "https://evil.example" },
        { "sec-fetch-site": "cross-site" },
      ];
      for (const headers of refused) {
        const res = await signOut(headers);
        assert.equal(res.statusCode, 401, `${JSON.stringify(headers)}: ${res.body}`);
        assert.equal(res.json().code, "unauthenticated");
        assert.ok(await signedIn(cookie), `${JSON.stringify(headers)} signed the person out`);
      }
      const own = await signOut({ origin: OWN });
      assert.equal(own.statusCode, 303);
      assert.equal(await signedIn(cookie), false);
    });

    it("the operator surface answers a mutation without its origin as it answers no session", async () => {
      const credential = await operatorCredential(
        t.storage,
        masterKey(await mkdtemp(join(tmpdir(), "kiln-key-"))),
        false,
        t.clock.now(),
      );
      const opened = await t.app.inject({ method: "POST", url: "/operator/auth/session", headers: bearer(credential) });
      assert.equal(opened.statusCode, 204, opened.body);
      const value = opened.cookies.find((c) => c.name === "kiln_operator_session")?.value ?? "";
      const cookie = { cookie: `kiln_operator_session=${value}` };
      const bare = await t.app.inject({ method: "DELETE", url: "/operator/auth/session", headers: cookie });
      assert.equal(bare.statusCode, 404, bare.body);
      assert.equal(bare.json().code, "operator_not_found");
      const stillOpen = await t.app.inject({ method: "GET", url: "/operator/api/audit", headers: cookie });
      assert.equal(stillOpen.statusCode, 200, stillOpen.body);
      const closed = await t.app.inject({
        method: "DELETE",
        url: "/operator/auth/session",
        headers: { ...cookie, origin: OWN },
      });
      assert.equal(closed.statusCode, 204, closed.body);
    });
  });
}
