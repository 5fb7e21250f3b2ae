import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  createTenant,
  findLineageDrop,
  type LineageSave,
  listRepositoryStorage,
  onboardRepository,
  purgeLineage,
  readRepositoryStorage,
  recordLineageSave,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-22T07:00:00.000Z") };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 22, 8, minute));
const GiB = 2 ** 30;

for (const dialect of DIALECTS) {
  describe(`lineage accounting [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    const save = (over: Partial<LineageSave> & Pick<LineageSave, "lineage" | "repository">) =>
      recordLineageSave(storage, {
        tenantId: "acme",
        class: "build/dev/stable",
        host: "local",
        bytes: GiB,
        generation: 1,
        rootGeneration: 1,
        now: at(0),
        quotaBytes: 10 * GiB,
        ...over,
      });

    before(async () => {
      storage = await dialect.openFresh();
      await createTenant(storage, { id: "acme" }, clock.now());
      await createTenant(storage, { id: "globex" }, clock.now());
      for (const name of ["acme/a", "acme/b", "acme/c", "acme/empty"]) {
        await onboardRepository(storage, { tenantId: "acme", name, onboardedBy: "test" }, clock.now());
      }
    });
    after(async () => {
      await storage?.close();
    });

    it("records saves and derives totals per repository and per tenant", async () => {
      assert.deepEqual(await save({ lineage: "lin_a1", repository: "acme/a", bytes: 3 * GiB }), {
        state: "live",
        evicted: [],
      });
      await save({ lineage: "lin_a2", repository: "acme/a", class: "check/dev/stable", bytes: GiB, now: at(1) });
      await save({ lineage: "lin_b1", repository: "acme/b", bytes: 2 * GiB, now: at(2) });
      // A newer generation replaces the bytes; a stale report (older generation) only touches last use.
      await save({ lineage: "lin_a1", repository: "acme/a", bytes: 4 * GiB, generation: 2, now: at(3) });
      await save({ lineage: "lin_a1", repository: "acme/a", bytes: 9 * GiB, generation: 2, now: at(4) });

      const a = await readRepositoryStorage(storage, { tenantId: "acme", repository: "acme/a" });
      assert.equal(a?.totalBytes, 5 * GiB);
      assert.deepEqual(
        a?.lineages.map((l) => [l.lineage, l.class, l.bytes, l.last_used_at, l.generation]),
        [
          ["lin_a1", "build/dev/stable", 4 * GiB, "2026-11-22T08:04:00.000Z", 2],
          ["lin_a2", "check/dev/stable", GiB, "2026-11-22T08:01:00.000Z", 1],
        ],
      );
      assert.equal(await readRepositoryStorage(storage, { tenantId: "globex", repository: "acme/a" }), undefined);
      assert.deepEqual(await readRepositoryStorage(storage, { tenantId: "acme", repository: "acme/empty" }), {
        lineages: [],
        totalBytes: 0,
      });

      const first = await listRepositoryStorage(storage, { tenantId: "acme", limit: 2, cursor: null });
      assert.deepEqual(first.repositories, [
        { repository: "acme/a", totalBytes: 5 * GiB },
        { repository: "acme/b", totalBytes: 2 * GiB },
      ]);
      assert.deepEqual(
        first.lineages.map((l) => l.lineage),
        ["lin_a1", "lin_a2", "lin_b1"],
      );
      assert.equal(first.tenantBytes, 7 * GiB);
      assert.notEqual(first.nextCursor, null);
      const second = await listRepositoryStorage(storage, { tenantId: "acme", limit: 2, cursor: first.nextCursor });
      assert.deepEqual(second.repositories, [
        { repository: "acme/c", totalBytes: 0 },
        { repository: "acme/empty", totalBytes: 0 },
      ]);
      assert.deepEqual(second.lineages, []);
      assert.equal(second.nextCursor, null);
    });

    it("purges: not counted, a drop order for the next placement; unknown lineages are not found", async () => {
      assert.equal(
        await findLineageDrop(storage, { tenantId: "acme", repository: "acme/b", class: "build/dev/stable" }),
        undefined,
      );
      const purged = await purgeLineage(storage, {
        tenantId: "acme",
        repository: "acme/b",
        lineage: "lin_b1",
        now: at(5),
      });
      assert.equal(purged.kind, "purged");
      assert.deepEqual(
        await findLineageDrop(storage, { tenantId: "acme", repository: "acme/b", class: "build/dev/stable" }),
        { lineage: "lin_b1", reason: "purged", throughGeneration: 1 },
      );
      assert.equal(
        (await listRepositoryStorage(storage, { tenantId: "acme", limit: 10, cursor: null })).tenantBytes,
        5 * GiB,
      );
      for (const wrong of [
        { tenantId: "acme", repository: "acme/b", lineage: "lin_nope" },
        { tenantId: "acme", repository: "acme/a", lineage: "lin_b1" },
        { tenantId: "globex", repository: "acme/b", lineage: "lin_b1" },
      ]) {
        assert.deepEqual(await purgeLineage(storage, { ...wrong, now: at(5) }), { kind: "not_found" });
      }
    });

    it("a save descending from the purged generation stays purged; one whose chain started cold after it revives", async () => {
      // An attempt that restored generation 1 before the purge saves generation 2 (root 1).
      assert.equal(
        (await save({ lineage: "lin_b1", repository: "acme/b", generation: 2, rootGeneration: 1, now: at(6) })).state,
        "purged",
      );
      assert.deepEqual(
        await findLineageDrop(storage, { tenantId: "acme", repository: "acme/b", class: "build/dev/stable" }),
        { lineage: "lin_b1", reason: "purged", throughGeneration: 2 },
      );
      // The next job ran cold (the host dropped generation 2) and saved generation 3, a new chain.
      assert.equal(
        (await save({ lineage: "lin_b1", repository: "acme/b", generation: 3, rootGeneration: 3, now: at(7) })).state,
        "live",
      );
      assert.equal(
        await findLineageDrop(storage, { tenantId: "acme", repository: "acme/b", class: "build/dev/stable" }),
        undefined,
      );
    });

    it("over quota, evicts the least recently used lineages until under it", async () => {
      // Live now: a1 4 GiB (08:04), a2 1 GiB (08:01), b1 1 GiB (08:07) = 6 GiB; quota 10 GiB.
      const result = await save({ lineage: "lin_c1", repository: "acme/c", bytes: 5 * GiB, now: at(8) });
      assert.equal(result.state, "live");
      // 11 GiB > 10: a2 (08:01) goes first and is enough.
      assert.deepEqual(
        result.evicted.map((l) => [l.lineage, l.state]),
        [["lin_a2", "evicted"]],
      );
      assert.deepEqual(
        await findLineageDrop(storage, { tenantId: "acme", repository: "acme/a", class: "check/dev/stable" }),
        { lineage: "lin_a2", reason: "evicted", throughGeneration: 1 },
      );
      // A lineage alone over the quota is evicted too, after every older one.
      const huge = await save({ lineage: "lin_c2", repository: "acme/c", class: "x", bytes: 11 * GiB, now: at(9) });
      assert.deepEqual(
        huge.evicted.map((l) => l.lineage),
        ["lin_a1", "lin_b1", "lin_c1", "lin_c2"],
      );
      assert.equal(huge.state, "evicted");
      const page = await listRepositoryStorage(storage, { tenantId: "acme", limit: 10, cursor: null });
      assert.equal(page.tenantBytes, 0);
      assert.deepEqual(page.lineages, []);
    });
  });
}
