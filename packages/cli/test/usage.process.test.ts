import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { CLI_DIALECTS, freshConfigHome, runCli, serverTesting } from "./harness.js";

/** `kiln usage` against a real server on each engine (SQLite and PostgreSQL). */
for (const dialect of CLI_DIALECTS) {
  describe(`kiln usage against a real server (${dialect.name})`, { skip: dialect.skip }, () => {
    let endpoint: string;
    let close: () => Promise<void>;
    let env: Record<string, string>;
    let submitterEnv: Record<string, string>;

    before(async () => {
      const { testApp, personWithToken, acceptJob, claimJob, finishJob } = await serverTesting();
      const t = await testApp(await dialect.openFresh());
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      endpoint = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
      close = t.close;
      const viewer = await personWithToken(t.storage, { role: "viewer" });
      // One passed job on 2026-11-03 (the fixture meters 60 vCPU-seconds on kiln2-cpu).
      const now = new Date("2026-11-03T10:00:00.000Z");
      const job = await acceptJob(t.storage, { tenant: viewer.tenant, now, repository: "acme/widget" });
      const lease = await claimJob(t.storage, job.id, now);
      await finishJob(t.storage, t.deps.blobs, lease, { now: new Date("2026-11-03T10:00:30.000Z"), cargoOutput: null });
      env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: viewer.token };
      // An agent credential with the submit scope only (minted by an admin through the API).
      const admin = await personWithToken(t.storage, { tenant: viewer.tenant, role: "admin" });
      const minted = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: {
          authorization: `Bearer ${admin.token}`,
          "content-type": "application/json",
          "idempotency-key": "usage-cli-submitter",
        },
        payload: JSON.stringify({ name: "submitter", scopes: ["submit"], expires_in_seconds: 3600 }),
      });
      assert.equal(minted.statusCode, 200, minted.body);
      const submitter = (minted.json() as { credential: string }).credential;
      submitterEnv = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: submitter };
    });
    after(() => close());

    it("prints a table per day and repository with the totals; --json prints the Usage document", async () => {
      const text = await runCli(["usage", "--period", "2026-11"], { env });
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /usage of .* in 2026-11/);
      assert.match(text.stdout, /^DAY\s+VCPU-SECONDS\s+JOBS\s+ATTEMPTS\s+UPLOADED\s+AMOUNT$/m);
      assert.match(text.stdout, /^2026-11-03\s+60\s+1\s+1\s+0 B\s+-$/m);
      assert.match(text.stdout, /^acme\/widget\s+60\s+1\s+1\s+0 B\s+-$/m);
      assert.match(text.stdout, /total: 60 vCPU-seconds charged \(60 metered: kiln2-cpu 60; 0 adjusted\)/);
      assert.match(text.stdout, /no rate card is set/);
      assert.match(text.stdout, /lineage storage: 0\.00 GiB-hours \(0 byte-hours\)/);

      const json = await runCli(["usage", "--period", "2026-11", "--json"], { env });
      assert.equal(json.code, 0, json.stderr);
      const doc = JSON.parse(json.stdout) as { period: string; totals: { vcpu_seconds: number; attempts: number } };
      assert.equal(doc.period, "2026-11");
      assert.equal(doc.totals.vcpu_seconds, 60);
      assert.equal(doc.totals.attempts, 1);

      const october = await runCli(["usage", "--period", "2026-10"], { env });
      assert.equal(october.code, 0, october.stderr);
      assert.match(october.stdout, /no usage this period/);
    });

    it("refuses a period that is not a month before asking the service", async () => {
      const bad = await runCli(["usage", "--period", "2026-13"], { env });
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--period must be a calendar month YYYY-MM/);
    });

    it("a credential without the read scope is the service's out_of_scope refusal", async () => {
      const refused = await runCli(["usage", "--period", "2026-11", "--json"], { env: submitterEnv });
      assert.equal(refused.code, 2, refused.stderr);
      const refusal = JSON.parse(refused.stdout) as { code: string; scope: string };
      assert.equal(refusal.code, "out_of_scope");
      assert.equal(refusal.scope, "read");
    });
  });
}
