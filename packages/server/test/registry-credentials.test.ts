/**
 * tenant.registry_credential.replace: sealed versions, the confirmation, scope and input
 * refusals, and the host protocol's hand-over of the current value only to an attempt of the
 * tenant that holds its lease.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { listAuditEntries, listRegistryCredentialVersions } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, hostProtocolOf, personWithToken, type TestApp } from "../src/testing/harness.js";
import { acceptJob, claimJob } from "../src/testing/job-fixtures.js";

for (const dialect of DIALECTS) {
  describe(`tenant.registry_credential.replace (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let admin: { tenant: string; userId: string; token: string };
    let keys = 0;
    before(async () => {
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null }));
    });
    after(() => t.close());

    const replace = (token: string, body: unknown) =>
      t.app.inject({
        method: "POST",
        url: "/api/tenant/registry-credentials",
        headers: { ...bearer(token), "idempotency-key": `registry-${++keys}`, "content-type": "application/json" },
        payload: JSON.stringify(body),
      });

    it("replaces: each replacement is the next version, the receipt names it and who, never the value; audited without it", async () => {
      const first = await replace(admin.token, {
        registry: "Registry.Acme.Test:8443",
        authorization: "Bearer first-secret-value",
        confirm: "registry.acme.test:8443",
      });
      assert.equal(first.statusCode, 200, first.body);
      assert.deepEqual(first.json(), { registry: "registry.acme.test:8443", version: 1, replaced_by: admin.userId });
      const second = await replace(admin.token, {
        registry: "registry.acme.test:8443",
        authorization: "Bearer second-secret-value",
        confirm: "registry.acme.test:8443",
      });
      assert.deepEqual(second.json(), { registry: "registry.acme.test:8443", version: 2, replaced_by: admin.userId });
      const versions = await listRegistryCredentialVersions(t.storage, { tenantId: admin.tenant });
      assert.deepEqual(
        versions.map((v) => [v.version, v.supersededAt === null]),
        [
          [2, true],
          [1, false],
        ],
      );
      const audit = await listAuditEntries(t.storage, { tenantId: admin.tenant, limit: 10 });
      const entry = audit.entries.find((e) => e.target === "registry-credential:registry.acme.test:8443");
      assert.ok(entry !== undefined);
      assert.doesNotMatch(JSON.stringify(audit), /secret-value/);
    });

    it("refuses a confirmation that is not the registry, naming what it must be", async () => {
      const res = await replace(admin.token, {
        registry: "registry.acme.test",
        authorization: "Bearer x",
        confirm: "yes",
      });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().code, "confirmation_required");
      assert.match(res.json().detail, /registry\.acme\.test/);
      assert.doesNotMatch(res.body, /Bearer x/);
    });

    it("refuses a member (no credentials scope) and a malformed registry host", async () => {
      const member = await personWithToken(t.storage, { role: "member", tenant: admin.tenant });
      const res = await replace(member.token, { registry: "r.test", authorization: "Bearer y", confirm: "r.test" });
      assert.equal(res.statusCode, 403, res.body);
      assert.equal(res.json().code, "out_of_scope");
      const bad = await replace(admin.token, { registry: "https://r.test/", authorization: "Bearer y", confirm: "x" });
      assert.equal(bad.statusCode, 400, bad.body);
      assert.equal(bad.json().code, "invalid_request");
      assert.match(bad.json().detail, /registry/);
    });

    it("the host protocol hands the current value only to a leased attempt of the tenant", async () => {
      const protocol = hostProtocolOf(t.deps);
      const own = await acceptJob(t.storage, { tenant: admin.tenant, now: t.clock.now() });
      const lease = await claimJob(t.storage, own.id, t.clock.now());
      assert.deepEqual(await protocol.registryCredentials(lease), [
        { registry: "registry.acme.test:8443", version: 2, authorization: "Bearer second-secret-value" },
      ]);
      assert.deepEqual(await protocol.registryCredentials({ ...lease, leaseToken: "stale" }), []);
      const other = await personWithToken(t.storage, { role: "admin" });
      const theirs = await acceptJob(t.storage, { tenant: other.tenant, now: t.clock.now() });
      const theirLease = await claimJob(t.storage, theirs.id, t.clock.now());
      assert.deepEqual(await protocol.registryCredentials(theirLease), []);
    });
  });
}
