import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addPersonToTenant,
  createTenant,
  findPersonByEmail,
  findTenant,
  type MembershipRole,
  onboardRepository,
  type Storage,
  UnknownTenantError,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-22T07:10:13.123Z") };

for (const dialect of DIALECTS) {
  describe(`tenants, people and repositories [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    before(async () => {
      storage = await dialect.openFresh();
      await createTenant(storage, { id: "acme", displayName: "Acme Corp" }, clock.now());
      await createTenant(storage, { id: "globex" }, clock.now());
    });
    after(async () => {
      await storage?.close();
    });

    it("creates a tenant once; creating it again returns the existing one", async () => {
      const again = await createTenant(storage, { id: "acme", displayName: "Other" }, clock.now());
      assert.deepEqual(again, {
        tenant: { id: "acme", displayName: "Acme Corp", createdAt: "2026-11-22T07:10:13.123Z" },
        created: false,
      });
      assert.equal((await findTenant(storage, "globex"))?.displayName, "globex");
      assert.equal(await findTenant(storage, "initech"), undefined);
    });

    it("adds a new person with a membership, and reuses the person for another tenant", async () => {
      const added = await addPersonToTenant(
        storage,
        { tenantId: "acme", email: "  Ann@Example.COM ", role: "owner", displayName: "Ann" },
        clock.now(),
      );
      assert.equal(added.personCreated, true);
      assert.equal(added.membershipChange, "created");
      assert.match(added.person.id, /^usr_[0-9a-f]{20}$/);
      assert.equal(added.person.email, "ann@example.com");
      assert.deepEqual(added.membership, {
        tenantId: "acme",
        personId: added.person.id,
        role: "owner",
        organizationId: "acme",
        createdAt: "2026-11-22T07:10:13.123Z",
      });

      const elsewhere = await addPersonToTenant(
        storage,
        {
          tenantId: "globex",
          email: "ann@example.com",
          role: "viewer",
          displayName: "Not Ann",
          organizationId: "org_9",
        },
        clock.now(),
      );
      assert.equal(elsewhere.personCreated, false);
      assert.deepEqual(elsewhere.person, added.person);
      assert.equal(elsewhere.membership.organizationId, "org_9");
      assert.deepEqual(await findPersonByEmail(storage, "ANN@example.com"), added.person);
    });

    it("adding an existing member changes the role", async () => {
      const email = "bob@example.com";
      await addPersonToTenant(storage, { tenantId: "acme", email, role: "member" }, clock.now());
      const promoted = await addPersonToTenant(storage, { tenantId: "acme", email, role: "admin" }, clock.now());
      assert.equal(promoted.membershipChange, "role_changed");
      assert.equal(promoted.membership.role, "admin");
      const same = await addPersonToTenant(storage, { tenantId: "acme", email, role: "admin" }, clock.now());
      assert.equal(same.membershipChange, "unchanged");
      const memberships = await storage.db
        .selectFrom("memberships")
        .select(["tenant_id", "role"])
        .where("person_id", "=", promoted.person.id)
        .execute();
      assert.deepEqual(memberships, [{ tenant_id: "acme", role: "admin" }]);
    });

    it("concurrent additions of one new email converge on one person", async () => {
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          addPersonToTenant(
            storage,
            { tenantId: "acme", email: "carol@example.com", role: "member" },
            clock.now(),
          ).catch((error: unknown) => {
            throw new Error(`caller ${i} failed: ${String(error)}`);
          }),
        ),
      );
      assert.equal(new Set(results.map((result) => result.person.id)).size, 1);
      assert.equal(results.filter((result) => result.personCreated).length, 1);
    });

    it("refuses an unknown tenant and a role outside owner/admin/member/viewer", async () => {
      await assert.rejects(
        addPersonToTenant(storage, { tenantId: "initech", email: "dan@example.com", role: "member" }, clock.now()),
        (error: unknown) => error instanceof UnknownTenantError && error.tenantId === "initech",
      );
      assert.equal(await findPersonByEmail(storage, "dan@example.com"), undefined, "nothing half-done");
      await assert.rejects(
        addPersonToTenant(
          storage,
          { tenantId: "acme", email: "eve@example.com", role: "superuser" as MembershipRole },
          clock.now(),
        ),
      );
    });

    it("onboards a repository once per tenant", async () => {
      const first = await onboardRepository(
        storage,
        { tenantId: "acme", name: "acme/widgets", onboardedBy: "usr_1" },
        clock.now(),
      );
      assert.deepEqual(first, {
        repository: {
          tenantId: "acme",
          name: "acme/widgets",
          onboardedAt: "2026-11-22T07:10:13.123Z",
          onboardedBy: "usr_1",
        },
        created: true,
      });
      const again = await onboardRepository(
        storage,
        { tenantId: "acme", name: "acme/widgets", onboardedBy: "usr_2" },
        new Date(),
      );
      assert.deepEqual(again, { repository: first.repository, created: false });
      const otherTenant = await onboardRepository(
        storage,
        {
          tenantId: "globex",
          name: "acme/widgets",
          onboardedBy: "x",
        },
        new Date(),
      );
      assert.equal(otherTenant.created, true);
      await assert.rejects(
        onboardRepository(storage, { tenantId: "initech", name: "a/b", onboardedBy: "x" }, new Date()),
        UnknownTenantError,
      );
    });
  });
}
