import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  acknowledgeRegistryCredentials,
  createTenant,
  listRegistryCredentialVersions,
  readCurrentRegistryCredentials,
  registerHost,
  replaceRegistryCredential,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-24T07:00:00.000Z") };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 24, 8, minute));

for (const dialect of DIALECTS) {
  describe(`registry credentials [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    before(async () => {
      storage = await dialect.openFresh();
      await createTenant(storage, { id: "acme" }, clock.now());
      await createTenant(storage, { id: "globex" }, clock.now());
      for (const id of ["host-a", "host-b"]) {
        await registerHost(storage, { id, vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: at(0) });
      }
    });
    after(() => storage.close());

    const replace = (tenantId: string, registry: string, ciphertext: string, minute: number) =>
      replaceRegistryCredential(storage, { tenantId, registry, ciphertext, replacedBy: "usr_admin", now: at(minute) });

    it("versions count up per tenant and registry; only the newest is current, and only the tenant's own", async () => {
      assert.deepEqual(await replace("acme", "registry.acme.test", "sealed-1", 1), { version: 1 });
      assert.deepEqual(await replace("acme", "registry.acme.test", "sealed-2", 2), { version: 2 });
      assert.deepEqual(await replace("acme", "other.test:8443", "sealed-o", 3), { version: 1 });
      assert.deepEqual(await replace("globex", "registry.acme.test", "sealed-g", 4), { version: 1 });
      assert.deepEqual(await readCurrentRegistryCredentials(storage, { tenantId: "acme" }), [
        { registry: "other.test:8443", version: 1, ciphertext: "sealed-o" },
        { registry: "registry.acme.test", version: 2, ciphertext: "sealed-2" },
      ]);
      assert.deepEqual(await readCurrentRegistryCredentials(storage, { tenantId: "globex" }), [
        { registry: "registry.acme.test", version: 1, ciphertext: "sealed-g" },
      ]);
    });

    it("the prior value is removed only once every host has acknowledged a newer version", async () => {
      const priorKept = async () =>
        (await listRegistryCredentialVersions(storage, { tenantId: "acme" })).find(
          (v) => v.registry === "registry.acme.test" && v.version === 1,
        )?.removedAt === null;
      assert.equal(await acknowledgeRegistryCredentials(storage, { hostId: "host-a", held: [], now: at(5) }), 0);
      assert.equal(await priorKept(), true, "host-b has not acknowledged yet");
      // host-b still runs an attempt that fetched version 1: it acknowledges only that far.
      const held = [{ tenantId: "acme", registry: "registry.acme.test", version: 1 }];
      assert.equal(await acknowledgeRegistryCredentials(storage, { hostId: "host-b", held, now: at(6) }), 0);
      assert.equal(await priorKept(), true, "an attempt on host-b still holds version 1");
      assert.equal(await acknowledgeRegistryCredentials(storage, { hostId: "host-b", held: [], now: at(7) }), 1);
      assert.equal(await priorKept(), false);
      const versions = await listRegistryCredentialVersions(storage, { tenantId: "acme" });
      assert.deepEqual(
        versions.filter((v) => v.registry === "registry.acme.test").map((v) => [v.version, v.removedAt]),
        [
          [2, null],
          [1, at(7).toISOString()],
        ],
      );
      assert.equal(await replace("acme", "registry.acme.test", "sealed-3", 8).then((r) => r.version), 3);
    });

    it("a host enrolled after a replacement holds the removal back until it has acknowledged", async () => {
      await registerHost(storage, { id: "host-c", vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: at(9) });
      await acknowledgeRegistryCredentials(storage, { hostId: "host-a", held: [], now: at(10) });
      await acknowledgeRegistryCredentials(storage, { hostId: "host-b", held: [], now: at(10) });
      const v2 = async () =>
        (await listRegistryCredentialVersions(storage, { tenantId: "acme" })).find(
          (v) => v.registry === "registry.acme.test" && v.version === 2,
        )?.removedAt;
      assert.equal(await v2(), null);
      await acknowledgeRegistryCredentials(storage, { hostId: "host-c", held: [], now: at(11) });
      assert.equal(await v2(), at(11).toISOString());
      assert.deepEqual(
        (await readCurrentRegistryCredentials(storage, { tenantId: "acme" })).map((c) => [c.registry, c.version]),
        [
          ["other.test:8443", 1],
          ["registry.acme.test", 3],
        ],
      );
    });
  });
}
