import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { readJobStatus, type Storage } from "@kiln/storage";
import { DIALECTS, type TestDatabase } from "@kiln/storage/testing";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { acceptJob } from "../src/testing/job-fixtures.js";

for (const dialect of DIALECTS) {
  describe(`the scheduler is woken after the mutation commits (${dialect.name})`, () => {
    let database: TestDatabase;
    let observer: Storage;
    let t: TestApp;
    let owner: { tenant: string; token: string };
    // What another connection (a host's claim) saw of the job at the moment of each wake.
    const seenAtWake: Promise<string | undefined>[] = [];
    let watched = "";

    before(async () => {
      database = await dialect.createDatabase();
      const storage = await database.open();
      observer = await database.open();
      t = await testApp(storage, {
        wakeScheduler: () => {
          seenAtWake.push(readJobStatus(observer, { tenantId: owner.tenant, jobId: watched }));
        },
      });
      owner = await personWithToken(t.storage, { role: "owner" });
    });
    after(async () => {
      await t.close();
      await observer.close();
      await database.dispose();
    });

    it("a cancellation's wake finds the job cancelled from another connection", async () => {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      watched = job.id;
      const res = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${job.id}/cancel`,
        headers: { ...bearer(owner.token), "idempotency-key": `cancel-${job.id}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(seenAtWake.length, 1);
      assert.equal(await seenAtWake[0], "cancelled");
    });
  });
}
