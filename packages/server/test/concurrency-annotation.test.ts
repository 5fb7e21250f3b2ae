import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { writeTenantControls } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { claimJob, finishJob, inlineFile, inlineSubmission } from "../src/testing/job-fixtures.js";

const submission = (name: string) =>
  inlineSubmission("acme/widget", "test", [
    inlineFile("Cargo.toml", `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n`),
    inlineFile("src/lib.rs", "pub fn f() {}\n"),
  ]);

/**
 * A job queued while its tenant is at its concurrency limit says why it waits from the start:
 * placement annotates the jobs queued when it takes the last slot, and a submission (or a
 * retry) that arrives after that is annotated in its own insert transaction, so "one runs and
 * the others wait with a queue annotation" holds however the submissions interleave with
 * placement.
 */
for (const dialect of DIALECTS) {
  describe(`the queue annotation of a job submitted to a held tenant (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let member: { tenant: string; token: string };

    before(async () => {
      ({ t, person: member } = await appWithTenant(dialect, { role: "member" }));
      await writeTenantControls(t.storage, {
        tenantId: member.tenant,
        expectedVersion: 0,
        changes: { maxRunningJobs: 1 },
        changedBy: "test",
        now: t.clock.now(),
      });
    });
    after(() => t.close());

    const post = (url: string, key: string, body?: unknown) =>
      t.app.inject({
        method: "POST",
        url,
        headers: {
          ...bearer(member.token),
          "idempotency-key": key,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
    const job = async (id: string) =>
      (await t.app.inject({ method: "GET", url: `/api/jobs/${id}`, headers: bearer(member.token) })).json() as {
        status: string;
        queue_annotation: string | null;
      };
    const atLimit = () =>
      new RegExp(
        `^waiting: tenant ${member.tenant} is at its concurrency limit \\(1 running of 1\\); placed when one of its jobs ends$`,
      );

    it("submitted after the only slot was taken: queued with the concurrency annotation; placed, it loses it", async () => {
      const first = (await post("/api/v4/jobs", "held-first", submission("first"))).json() as string;
      const queued = await job(first);
      assert.deepEqual([queued.status, queued.queue_annotation], ["queued", null]);
      const lease = await claimJob(t.storage, first, t.clock.now());
      assert.equal((await job(first)).status, "running");

      const second = await post("/api/v4/jobs", "held-second", submission("second"));
      assert.equal(second.statusCode, 200, second.body);
      const waiting = await job(second.json());
      assert.equal(waiting.status, "queued");
      assert.match(waiting.queue_annotation ?? "", atLimit());

      await t.clock.advance(30_000);
      await finishJob(t.storage, t.deps.blobs, lease, { now: t.clock.now() });
      await claimJob(t.storage, second.json(), t.clock.now());
      const placed = await job(second.json());
      assert.deepEqual([placed.status, placed.queue_annotation], ["running", null]);

      // A retry of the finished job, queued while the second holds the slot, is annotated too.
      const retried = await post(`/api/jobs/${first}/retry`, "held-retry");
      assert.equal(retried.statusCode, 200, retried.body);
      const retry = await job((retried.json() as { retry: string }).retry);
      assert.equal(retry.status, "queued");
      assert.match(retry.queue_annotation ?? "", atLimit());
    });

    it("submitted while a slot is free: no annotation", async () => {
      await writeTenantControls(t.storage, {
        tenantId: member.tenant,
        expectedVersion: 1,
        changes: { maxRunningJobs: 3 },
        changedBy: "test",
        now: t.clock.now(),
      });
      const free = (await post("/api/v4/jobs", "free-slot", submission("free"))).json() as string;
      assert.equal((await job(free)).queue_annotation, null);
    });
  });
}
