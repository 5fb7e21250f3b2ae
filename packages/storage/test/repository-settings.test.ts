import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  createTenant,
  onboardRepository,
  readRepositorySettings,
  type Storage,
  writeRepositorySettings,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-22T07:00:00.000Z") };
const later = new Date("2026-11-22T08:00:00.000Z");

for (const dialect of DIALECTS) {
  describe(`repository settings [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    const write = (
      expectedVersion: number,
      changes: Parameters<typeof writeRepositorySettings>[1]["changes"],
      by = "usr_a",
    ) =>
      writeRepositorySettings(storage, {
        tenantId: "acme",
        repository: "acme/app",
        expectedVersion,
        changes,
        changedBy: by,
        now: later,
      });

    before(async () => {
      storage = await dialect.openFresh();
      await createTenant(storage, { id: "acme" }, clock.now());
      await createTenant(storage, { id: "globex" }, clock.now());
      await onboardRepository(
        storage,
        { tenantId: "acme", name: "acme/app", onboardedBy: "usr_onboarder" },
        clock.now(),
      );
    });
    after(async () => {
      await storage?.close();
    });

    it("reads version 0 with platform defaults and the onboarding as the last change", async () => {
      assert.deepEqual(await readRepositorySettings(storage, { tenantId: "acme", repository: "acme/app" }), {
        repository: "acme/app",
        version: 0,
        affectedTests: null,
        totalInjectionOptOut: null,
        wallClockCeilingSeconds: null,
        lineageSeeding: null,
        flakyRetries: null,
        flakyPolicy: null,
        changedBy: "usr_onboarder",
        changedAt: "2026-11-22T07:00:00.000Z",
      });
      assert.equal(await readRepositorySettings(storage, { tenantId: "globex", repository: "acme/app" }), undefined);
    });

    it("writes by compare-and-set: the named version moves by one; a moved-past version is stale", async () => {
      assert.deepEqual(await write(0, { totalInjectionOptOut: true }), {
        kind: "written",
        version: 1,
        changedAt: "2026-11-22T08:00:00.000Z",
      });
      assert.deepEqual(await write(0, { affectedTests: true }), { kind: "stale", currentVersion: 1 });
      assert.equal((await write(1, { wallClockCeilingSeconds: 600, lineageSeeding: false }, "usr_b")).kind, "written");
      const read = await readRepositorySettings(storage, { tenantId: "acme", repository: "acme/app" });
      assert.equal(read?.version, 2);
      assert.equal(read?.lineageSeeding, false);
      assert.equal(read?.totalInjectionOptOut, true, "an earlier write's value survives a later write of another");
      assert.equal(read?.wallClockCeilingSeconds, 600);
      assert.equal(read?.affectedTests, null);
      assert.equal(read?.changedBy, "usr_b");
    });

    it("lets exactly one of two concurrent writers naming the same version win", async () => {
      const results = await Promise.all([write(2, { affectedTests: true }), write(2, { affectedTests: false })]);
      assert.deepEqual(results.map((r) => r.kind).sort(), ["stale", "written"]);
      assert.deepEqual(
        results.find((r) => r.kind === "stale"),
        { kind: "stale", currentVersion: 3 },
      );
    });

    it("answers not_found for a repository the tenant has not onboarded", async () => {
      const result = await writeRepositorySettings(storage, {
        tenantId: "globex",
        repository: "acme/app",
        expectedVersion: 0,
        changes: { affectedTests: true },
        changedBy: "usr_x",
        now: later,
      });
      assert.deepEqual(result, { kind: "not_found" });
    });
  });
}
