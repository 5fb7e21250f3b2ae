import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  createTenant,
  findLineageSeeds,
  type LineageSave,
  onboardRepository,
  purgeLineage,
  recordLineageSave,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-29T07:00:00.000Z") };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 29, 8, minute));
const GiB = 2 ** 30;
const CONTEXT = "ctx-build-dev-stable";

for (const dialect of DIALECTS) {
  describe(`lineage seeds [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    const save = (over: Partial<LineageSave> & Pick<LineageSave, "lineage" | "repository" | "tenantId">) =>
      recordLineageSave(storage, {
        class: "build/dev/stable",
        host: "host-a",
        bytes: GiB,
        generation: 1,
        rootGeneration: 1,
        seedContext: CONTEXT,
        now: at(0),
        quotaBytes: 100 * GiB,
        ...over,
      });
    const seeds = (over: Partial<Parameters<typeof findLineageSeeds>[1]> = {}) =>
      findLineageSeeds(storage, {
        tenantId: "acme",
        repository: "acme/new",
        class: "build/dev/stable",
        host: "host-a",
        seedContext: CONTEXT,
        ...over,
      }).then((rows) => rows.map((r) => r.lineage));

    before(async () => {
      storage = await dialect.openFresh();
      for (const tenant of ["acme", "globex"]) await createTenant(storage, { id: tenant }, clock.now());
      for (const [tenantId, name] of [
        ["acme", "acme/a"],
        ["acme", "acme/b"],
        ["acme", "acme/c"],
        ["acme", "acme/new"],
        ["globex", "globex/a"],
      ] as const) {
        await onboardRepository(storage, { tenantId, name, onboardedBy: "test" }, clock.now());
      }
      await save({ tenantId: "acme", lineage: "lin_a", repository: "acme/a", now: at(1) });
      await save({ tenantId: "acme", lineage: "lin_b", repository: "acme/b", now: at(3) });
      // Another tenant's lineage, most recently used and with the same context: never offered.
      await save({ tenantId: "globex", lineage: "lin_g", repository: "globex/a", now: at(9) });
      // Same tenant, other context (another toolchain, injected setting or target), other host, no context.
      await save({ tenantId: "acme", lineage: "lin_ctx", repository: "acme/c", seedContext: "other", now: at(4) });
      await save({
        tenantId: "acme",
        lineage: "lin_c_check",
        repository: "acme/c",
        class: "check/dev/stable",
        host: "host-b",
        now: at(5),
      });
      await save({
        tenantId: "acme",
        lineage: "lin_c_old",
        repository: "acme/c",
        class: "doc/dev/stable",
        seedContext: null,
        now: at(6),
      });
    });
    after(async () => {
      await storage?.close();
    });

    it("offers the tenant's live lineages on the host with the same context, most recently used first", async () => {
      assert.deepEqual(await seeds(), ["lin_b", "lin_a"]);
      assert.deepEqual(await seeds({ limit: 1 }), ["lin_b"]);
    });

    it("never offers another tenant's lineage, whatever it shares", async () => {
      assert.deepEqual(
        await seeds({ tenantId: "globex", repository: "globex/new" }),
        ["lin_g"],
        "globex sees only its own lineage",
      );
      assert.ok(!(await seeds()).includes("lin_g"));
    });

    it("offers none to a job whose own lineage is live on the host, and never the job's own lineage", async () => {
      assert.deepEqual(await seeds({ repository: "acme/a" }), []);
      // Its own lineage lives on another host: it starts there warm, or here seeded from the others.
      assert.deepEqual(await seeds({ repository: "acme/c", class: "check/dev/stable" }), ["lin_b", "lin_a"]);
    });

    it("stops offering a purged lineage", async () => {
      await purgeLineage(storage, { tenantId: "acme", repository: "acme/b", lineage: "lin_b", now: at(10) });
      assert.deepEqual(await seeds(), ["lin_a"]);
    });
  });
}
