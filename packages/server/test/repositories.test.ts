import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { AttemptReport } from "@kiln/contract";
import { onboardRepository } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { PLATFORM_STORAGE_QUOTA_BYTES } from "../src/domain/repositories/storage-quota.js";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { submitAndPlace } from "../src/testing/job-fixtures.js";

const MB = 1_000_000;

/** The evidence a host reports for an attempt that saved its lineage. */
const report = (
  lineage: string,
  saved: { bytes: number; generation: number; root: number; warm?: boolean },
): AttemptReport => ({
  phases: [],
  crates: [],
  tests: [],
  unit: null,
  // The dependency gateway's crate cache listed first: what the quota counts is the result's
  // lineageSave, whatever order the evidence lists its caches in.
  caches: [
    {
      lineage: "crates:local",
      class: "dependencies",
      outcome: "warm" as const,
      reason: null,
      restored_bytes: 0,
      saved_bytes: 4096,
      saved_generation: 9,
      root_generation: 9,
    },
    {
      lineage,
      class: "build/dev/stable",
      outcome: saved.warm === true ? ("warm" as const) : ("cold" as const),
      reason: saved.warm === true ? null : "first job of the class",
      restored_bytes: 0,
      saved_bytes: saved.bytes,
      saved_generation: saved.generation,
      root_generation: saved.root,
    },
  ],
});

for (const dialect of DIALECTS) {
  describe(`repositories: lineages, totals, quota and purge (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; userId: string; token: string };
    let keys = 0;
    const quota = 25 * MB;

    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", deps: { storageQuotaBytes: quota } }));
      for (const name of ["acme/gadget", "acme/idle"]) {
        await onboardRepository(t.storage, { tenantId: owner.tenant, name, onboardedBy: "test" }, t.clock.now());
      }
    });
    after(() => t.close());

    const get = async (url: string) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(owner.token) });
      return { status: res.statusCode, body: res.json() };
    };
    const purge = async (repository: string, body: unknown) => {
      const res = await t.app.inject({
        method: "POST",
        url: `/api/repositories/${repository}/purges`,
        headers: { ...bearer(owner.token), "idempotency-key": `purge-${++keys}`, "content-type": "application/json" },
        payload: JSON.stringify(body),
      });
      return { status: res.statusCode, body: res.json() };
    };
    /** Submits a job of the repository, places it through the host protocol and finishes it with `saved`. */
    const runJob = async (repository: string, lineage: string, saved: Parameters<typeof report>[1]) => {
      const { protocol, placement } = await submitAndPlace(t, { token: owner.token, repository, key: `job-${++keys}` });
      const finished = await protocol.finish(placement, {
        outcome: "passed",
        exitCode: 0,
        failure: null,
        report: report(lineage, saved),
        cargoOutput: null,
        lineageSave: { lineage, bytes: saved.bytes, generation: saved.generation, rootGeneration: saved.root },
        artifacts: [],
      });
      assert.equal(finished, "finished");
      return placement;
    };

    it("a repository with no lineages yet: zero bytes, the platform quota by default", async () => {
      const { t: plain, person: someone } = await appWithTenant(dialect, { role: "viewer" });
      const res = await plain.app.inject({ method: "GET", url: "/api/repositories", headers: bearer(someone.token) });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), {
        repositories: [{ repository: "acme/widget", total_bytes: 0 }],
        lineages: [],
        total_bytes: 0,
        storage_quota_bytes: PLATFORM_STORAGE_QUOTA_BYTES,
        advisories: [],
        next_cursor: null,
      });
      await plain.close();
    });

    it("finished attempts' saves are accounted per repository and per tenant", async () => {
      const first = await runJob("acme/widget", "lin_widget", { bytes: 10 * MB, generation: 1, root: 1 });
      assert.equal(first.lineageDrop, null);
      await runJob("acme/gadget", "lin_gadget", { bytes: 8 * MB, generation: 1, root: 1 });

      const list = await get("/api/repositories?limit=2");
      assert.equal(list.status, 200, JSON.stringify(list.body));
      assert.deepEqual(list.body.repositories, [
        { repository: "acme/gadget", total_bytes: 8 * MB },
        { repository: "acme/idle", total_bytes: 0 },
      ]);
      assert.deepEqual(
        list.body.lineages.map((l: { lineage: string; class: string; bytes: number }) => [l.lineage, l.class, l.bytes]),
        [["lin_gadget", "build/dev/stable", 8 * MB]],
      );
      assert.equal(list.body.total_bytes, 18 * MB);
      assert.equal(list.body.storage_quota_bytes, quota);
      const rest = await get(`/api/repositories?limit=2&cursor=${list.body.next_cursor}`);
      assert.deepEqual(rest.body.repositories, [{ repository: "acme/widget", total_bytes: 10 * MB }]);
      assert.equal(rest.body.next_cursor, null);

      const widget = await get("/api/repositories/acme/widget");
      assert.equal(widget.status, 200);
      assert.deepEqual(widget.body, {
        repository: "acme/widget",
        lineages: [
          {
            repository: "acme/widget",
            class: "build/dev/stable",
            lineage: "lin_widget",
            bytes: 10 * MB,
            last_used_at: "2026-11-22T08:01:00.000Z",
          },
        ],
        total_bytes: 10 * MB,
        storage_quota_bytes: quota,
        advisories: [],
      });
      const missing = await get("/api/repositories/acme/nothing");
      assert.equal(missing.status, 404);
      assert.equal(missing.body.code, "not_found");
    });

    it("purge needs the lineage named in confirm; unknown lineages are not found; a purge reaches the next placement", async () => {
      const unconfirmed = await purge("acme/widget", { lineage: "lin_widget", confirm: "yes" });
      assert.equal(unconfirmed.status, 400, JSON.stringify(unconfirmed.body));
      assert.equal(unconfirmed.body.code, "confirmation_required");
      const unknown = await purge("acme/widget", { lineage: "lin_gadget", confirm: "lin_gadget" });
      assert.equal(unknown.body.code, "not_found");

      const done = await purge("acme/widget", { lineage: "lin_widget", confirm: "lin_widget" });
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.deepEqual(done.body, {
        lineage: "lin_widget",
        consequence: "the next matching job starts cold",
        purged_by: owner.userId,
      });
      const widget = await get("/api/repositories/acme/widget");
      assert.deepEqual(widget.body.lineages, []);
      assert.equal(widget.body.total_bytes, 0);
      assert.equal((await get("/api/repositories")).body.total_bytes, 8 * MB);
      const audit = await get("/api/audit");
      assert.equal(audit.body.entries[0].target, "lineage:lin_widget");

      // The next placement of the class says so; a warm save descending from the purged state stays purged.
      const next = await runJob("acme/widget", "lin_widget", { bytes: 10 * MB, generation: 2, root: 1, warm: true });
      assert.deepEqual(next.lineageDrop, { reason: "purged", throughGeneration: 1 });
      assert.deepEqual((await get("/api/repositories/acme/widget")).body.lineages, []);
      const cold = await runJob("acme/widget", "lin_widget", { bytes: 9 * MB, generation: 3, root: 3 });
      assert.deepEqual(cold.lineageDrop, { reason: "purged", throughGeneration: 2 });
      assert.equal((await get("/api/repositories/acme/widget")).body.total_bytes, 9 * MB);
    });

    it("over the tenant quota, the least recently used lineage is evicted and its next placement says so", async () => {
      // Live: gadget 8 MB (08:02), widget 9 MB (08:05); quota 25 MB. A third lineage of 10 MB → 27 MB.
      await runJob("acme/idle", "lin_idle", { bytes: 10 * MB, generation: 1, root: 1 });
      const list = await get("/api/repositories");
      assert.deepEqual(
        list.body.lineages.map((l: { lineage: string }) => l.lineage),
        ["lin_idle", "lin_widget"],
      );
      assert.equal(list.body.total_bytes, 19 * MB);
      const next = await runJob("acme/gadget", "lin_gadget", { bytes: 8 * MB, generation: 2, root: 2 });
      assert.deepEqual(next.lineageDrop, { reason: "evicted", throughGeneration: 1 });
    });
  });
}
