import { addPersonToTenant, anyTenantExists, createTenant, type Storage } from "@kiln/storage";

const FIRST_TENANT = "default";
const FIRST_OWNER = "owner@localhost";

/**
 * On the very first start (no tenant at all) kiln creates a tenant and an owner so
 * a newcomer has someone to sign in as. Returns what it created, or null.
 */
export async function ensureFirstStartTenant(
  storage: Storage,
  now: Date,
): Promise<{ tenant: string; email: string } | null> {
  if (await anyTenantExists(storage)) return null;
  const clock = { now: () => now };
  // Two servers starting at once on an empty database: only one creates the tenant.
  const { created } = await createTenant(storage, { id: FIRST_TENANT, displayName: "Default tenant" }, clock.now());
  if (!created) return null;
  await addPersonToTenant(
    storage,
    { tenantId: FIRST_TENANT, email: FIRST_OWNER, displayName: "Owner", role: "owner" },
    clock.now(),
  );
  return { tenant: FIRST_TENANT, email: FIRST_OWNER };
}
