import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { findOnboardedRepository, listAuditEntries } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";

for (const dialect of DIALECTS) {
  describe(`repositories.onboard: a tenant admin onboards a repository itself (${dialect.name})`, {
    skip: dialect.skip,
  }, () => {
    let t: TestApp;
    let admin: { tenant: string; userId: string; token: string };
    let member: { token: string };
    let viewer: { token: string };
    let keys = 0;

    before(async () => {
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null }));
      member = await personWithToken(t.storage, { tenant: admin.tenant, role: "member" });
      viewer = await personWithToken(t.storage, { tenant: admin.tenant, role: "viewer" });
    });
    after(() => t.close());

    const onboard = async (repository: unknown, token = admin.token, key = `k-${++keys}`) => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/repositories",
        headers: { ...bearer(token), "idempotency-key": key, "content-type": "application/json" },
        payload: JSON.stringify({ repository }),
      });
      return { status: res.statusCode, body: res.json() };
    };

    it("a repository not onboarded is refused with the next step: the command that onboards it", async () => {
      const res = await t.app.inject({
        method: "GET",
        url: "/api/repositories/acme/widget",
        headers: bearer(member.token),
      });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, "not_found");
      assert.match(res.json().detail, /`kiln repos add acme\/widget`/);
    });

    it("an admin onboards it (audited); again, nothing changes and the first onboarding is answered", async () => {
      const first = await onboard("acme/widget");
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.repository, "acme/widget");
      assert.equal(first.body.created, true);
      assert.equal(first.body.onboarded_by, admin.userId);
      const stored = await findOnboardedRepository(t.storage.db, { tenantId: admin.tenant, repository: "acme/widget" });
      assert.ok(stored !== undefined, "jobs may name it now");

      const again = await onboard("acme/widget");
      assert.equal(again.status, 200);
      assert.equal(again.body.created, false);
      assert.equal(again.body.onboarded_at, first.body.onboarded_at);

      const audit = await listAuditEntries(t.storage, { tenantId: admin.tenant, limit: 50 });
      const entries = audit.entries.filter((e) => e.target === "repository:acme/widget");
      assert.equal(entries.length, 1, "one audit entry: the second call changed nothing");
      assert.equal(entries[0]?.actor, admin.userId);

      const page = await t.app.inject({
        method: "GET",
        url: "/api/repositories/acme/widget",
        headers: bearer(member.token),
      });
      assert.equal(page.statusCode, 200, "members now read it");
    });

    it("refuses a member and a viewer (out_of_scope), and a name that is not owner/name", async () => {
      for (const person of [member, viewer]) {
        const refused = await onboard("acme/other", person.token);
        assert.equal(refused.status, 403, JSON.stringify(refused.body));
        assert.equal(refused.body.code, "out_of_scope");
      }
      assert.equal(
        await findOnboardedRepository(t.storage.db, { tenantId: admin.tenant, repository: "acme/other" }),
        undefined,
      );
      for (const name of ["acme", "acme/widget/extra", "acme/wid get", ""]) {
        const refused = await onboard(name);
        assert.equal(refused.status, 400, name);
        assert.equal(refused.body.code, "invalid_request", name);
      }
    });
  });
}
