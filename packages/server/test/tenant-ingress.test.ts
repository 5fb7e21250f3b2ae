/**
 * A tenant's request bodies are read at its ingress rate (web/http/tenant-ingress-shaper.ts) through
 * the app's routes, with the deployment's unshared tenants (config.ts, DEFAULT_TENANT_INGRESS):
 * alone (the platform's canary tenant aside), a tenant's bodies are read at once; once another
 * tenant makes a request, past its burst its next body waits for the rate's clock while the
 * other tenant's body is read and answered at once.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import { createTenant } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { DEFAULT_TENANT_INGRESS } from "../src/config.js";
import { CANARY_TENANT } from "../src/domain/platform/platform-tenants.js";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { largeBodiesOf } from "../src/web/http/body-parsers.js";

const MiB = 2 ** 20;

for (const dialect of DIALECTS) {
  describe(`each tenant's bodies are read at its ingress rate (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    /** The shaper's clock: its waits end only when the test moves it. */
    const rateClock = new ManualClock();
    let noisy: { tenant: string; token: string };
    let quiet: { tenant: string; token: string };
    let keys = 0;

    before(async () => {
      const large = largeBodiesOf({
        bodyWorkers: 0,
        tenantIngress: { ...DEFAULT_TENANT_INGRESS, bytesPerSecond: MiB, burstBytes: MiB },
        clock: rateClock,
      });
      ({ t, person: noisy } = await appWithTenant(dialect, {
        role: "member",
        repository: null,
        deps: { largeBodies: large },
      }));
      quiet = await personWithToken(t.storage, { role: "member" });
      assert.notEqual(noisy.tenant, quiet.tenant);
    });
    after(async () => {
      await t.close();
    });

    /** jobs.submit with a body of about `bytes` that its schema refuses once read. */
    const submit = (token: string, bytes: number) =>
      t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": `ingress-${++keys}` },
        payload: JSON.stringify({ schema_version: 1, filler: "x".repeat(bytes) }),
      });

    it("reads a tenant's bodies at once while no other tenant makes requests (the platform's canaries do not count)", async () => {
      await createTenant(t.storage, { id: CANARY_TENANT, displayName: "canaries" }, new Date());
      const canary = await personWithToken(t.storage, { tenant: CANARY_TENANT, role: "member" });
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(canary.token) });
      assert.equal(identity.statusCode, 200);
      for (let i = 0; i < 3; i++) {
        const alone = await submit(noisy.token, 3 * MiB);
        assert.equal(alone.statusCode, 400, "read whole without waiting, and refused by its schema");
        assert.equal(rateClock.pending, 0, "nothing waits on the rate's clock");
      }
    });

    it("once another tenant is served, reads a burst at once, holds the tenant's next body until its bytes are paid, and reads the other's meanwhile", async () => {
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(quiet.token) });
      assert.equal(identity.statusCode, 200);
      const first = await submit(noisy.token, 3 * MiB);
      assert.equal(first.statusCode, 400, "the burst's body is read at once and refused by its schema");
      assert.equal(rateClock.pending, 0);

      let answered = false;
      const held = submit(noisy.token, 3 * MiB).then((res) => {
        answered = true;
        return res;
      });
      while (rateClock.pending === 0 && !answered) await new Promise((resolve) => setImmediate(resolve));
      assert.equal(answered, false, "the noisy tenant's second body was read past its burst without waiting");

      const other = await submit(quiet.token, 3 * MiB);
      assert.equal(other.statusCode, 400, "another tenant's body is read without waiting");
      assert.equal(answered, false, "the noisy tenant's second body waits for its rate");

      // The body is 3 MiB and a few bytes of JSON: it waits a little over two seconds.
      await rateClock.advance(1990);
      assert.equal(answered, false, "3 MiB at 1 MiB/s past a 1 MiB burst: two seconds");
      await rateClock.advance(20);
      const second = await held;
      assert.equal(second.statusCode, 400);
      const refusal = JSON.parse(second.body) as { code: string };
      assert.equal(refusal.code, "invalid_request", "read whole and refused as any body is");
    });
  });
}
