import type { Kysely } from "kysely";
import { executorOf, inTransaction, type StorageOrTransaction } from "../executor.js";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export type InstallationState = "active" | "suspended" | "deleted";

export interface InstallationRow {
  readonly installationId: number;
  readonly tenantId: string;
  readonly account: string;
  readonly state: InstallationState;
  readonly claimedBy: string;
  readonly claimedAt: string;
}

export type ClaimInstallationResult =
  | { readonly kind: "claimed"; readonly installation: InstallationRow; readonly created: boolean }
  | { readonly kind: "held_by_another_tenant"; readonly installation: InstallationRow };

/**
 * Binds a provider installation to the tenant, with the repositories it covers, each onboarded
 * for the tenant (onboarding twice keeps the first). One tenant per installation: the primary
 * key decides a race, and a claim of an installation another tenant holds changes nothing.
 * Claiming again by the same tenant refreshes the repository list and re-activates it.
 */
export async function claimInstallation(
  target: StorageOrTransaction,
  input: {
    installationId: number;
    tenantId: string;
    account: string;
    claimedBy: string;
    repositories: readonly string[];
  },
  at: Date,
): Promise<ClaimInstallationResult> {
  return inTransaction(target, async (db) => {
    const now = formatTimestamp(at);
    const id = String(input.installationId);
    const inserted = await db
      .insertInto("app_installations")
      .values({
        installation_id: id,
        tenant_id: input.tenantId,
        account: input.account,
        state: "active",
        claimed_by: input.claimedBy,
        claimed_at: now,
        updated_at: now,
      })
      .onConflict((c) => c.column("installation_id").doNothing())
      .executeTakeFirst();
    const row = await db
      .selectFrom("app_installations")
      .selectAll()
      .where("installation_id", "=", id)
      .executeTakeFirstOrThrow();
    const installation = installationOf(row);
    if (row.tenant_id !== input.tenantId) return { kind: "held_by_another_tenant", installation };
    if (inserted.numInsertedOrUpdatedRows !== 1n) {
      await db
        .updateTable("app_installations")
        .set({ state: "active", account: input.account, updated_at: now })
        .where("installation_id", "=", id)
        .execute();
    }
    await replaceRepositories(db, id, input.tenantId, input.repositories, input.claimedBy, now);
    return {
      kind: "claimed",
      installation: { ...installation, state: "active", account: input.account },
      created: inserted.numInsertedOrUpdatedRows === 1n,
    };
  });
}

/**
 * What the provider reports about a claimed installation (a webhook, a resync): its state and,
 * when given, its whole repository list (newly covered repositories are onboarded for the
 * holding tenant). Returns false when no tenant holds the installation.
 */
export async function syncInstallation(
  target: StorageOrTransaction,
  input: { installationId: number; state?: InstallationState; repositories?: readonly string[]; by: string },
  at: Date,
): Promise<boolean> {
  return inTransaction(target, async (db) => {
    const now = formatTimestamp(at);
    const id = String(input.installationId);
    const row = await db
      .selectFrom("app_installations")
      .select("tenant_id")
      .where("installation_id", "=", id)
      .executeTakeFirst();
    if (row === undefined) return false;
    if (input.state !== undefined) {
      await db
        .updateTable("app_installations")
        .set({ state: input.state, updated_at: now })
        .where("installation_id", "=", id)
        .execute();
    }
    if (input.repositories !== undefined) {
      await replaceRepositories(db, id, row.tenant_id, input.repositories, input.by, now);
    }
    return true;
  });
}

async function replaceRepositories(
  db: Kysely<Database>,
  installationId: string,
  tenantId: string,
  repositories: readonly string[],
  by: string,
  now: string,
): Promise<void> {
  await db.deleteFrom("installation_repositories").where("installation_id", "=", installationId).execute();
  for (const repository of new Set(repositories))
    await coverRepository(db, installationId, tenantId, repository, by, now);
}

/**
 * The installation covers `repository`, onboarded for its holding tenant (covering or onboarding
 * twice keeps the first).
 */
export async function coverRepository(
  db: Kysely<Database>,
  installationId: string,
  tenantId: string,
  repository: string,
  by: string,
  now: string,
): Promise<void> {
  await db
    .insertInto("installation_repositories")
    .values({ installation_id: installationId, repository })
    .onConflict((c) => c.columns(["installation_id", "repository"]).doNothing())
    .execute();
  await db
    .insertInto("repositories")
    .values({ tenant_id: tenantId, name: repository, onboarded_at: now, onboarded_by: by })
    .onConflict((c) => c.columns(["tenant_id", "name"]).doNothing())
    .execute();
}

/** The tenant's claimed installations, oldest claim first. */
export async function listTenantInstallations(
  target: StorageOrTransaction,
  input: { tenantId: string },
): Promise<InstallationRow[]> {
  const rows = await executorOf(target)
    .selectFrom("app_installations")
    .selectAll()
    .where("tenant_id", "=", input.tenantId)
    .orderBy("claimed_at")
    .orderBy("installation_id")
    .execute();
  return rows.map(installationOf);
}

/** The tenant's installation covering the repository (an active one first), or undefined. */
export async function findInstallationOfRepository(
  target: StorageOrTransaction,
  input: { tenantId: string; repository: string },
): Promise<InstallationRow | undefined> {
  const rows = await executorOf(target)
    .selectFrom("app_installations as i")
    .innerJoin("installation_repositories as r", "r.installation_id", "i.installation_id")
    .selectAll("i")
    .where("i.tenant_id", "=", input.tenantId)
    .where("r.repository", "=", input.repository)
    .orderBy("i.claimed_at")
    .execute();
  const all = rows.map(installationOf);
  return all.find((i) => i.state === "active") ?? all[0];
}

function installationOf(row: {
  installation_id: string;
  tenant_id: string;
  account: string;
  state: string;
  claimed_by: string;
  claimed_at: string;
}): InstallationRow {
  return {
    installationId: Number(row.installation_id),
    tenantId: row.tenant_id,
    account: row.account,
    state: row.state as InstallationState,
    claimedBy: row.claimed_by,
    claimedAt: row.claimed_at,
  };
}

/** How many jobs the tenant has and its newest (onboarding.surface's jobs_total and first_job). */
export async function readOnboardingJobs(
  target: StorageOrTransaction,
  input: { tenantId: string },
): Promise<{ total: number; newest: { id: string; repository: string } | null }> {
  const db = executorOf(target);
  const counted = await db
    .selectFrom("jobs")
    .select((eb) => eb.fn.countAll<string | number | bigint>().as("n"))
    .where("tenant_id", "=", input.tenantId)
    .executeTakeFirstOrThrow();
  const newest = await db
    .selectFrom("jobs")
    .select(["id", "repository"])
    .where("tenant_id", "=", input.tenantId)
    .orderBy("accepted_at", "desc")
    .orderBy("id", "desc")
    .limit(1)
    .executeTakeFirst();
  return { total: Number(counted.n), newest: newest ?? null };
}
