import { inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import type { AgentCredentialRow } from "./agent-credential.js";

/**
 * Mints an agent credential row, or returns undefined when a live credential of the tenant
 * already has the name. Uniqueness among live credentials is the unique index on
 * (tenant_id, live_name); an expired, unrevoked namesake is first retired (live_name NULL),
 * since it is no longer live. The insert uses ON CONFLICT DO NOTHING so a collision never
 * aborts the caller's transaction (PostgreSQL would abort it on a raised violation).
 */
export async function createAgentCredential(
  target: StorageOrTransaction,
  input: {
    tenantId: string;
    name: string;
    tokenHash: string;
    scopes: readonly string[];
    createdBy: string;
    expiresAt: string;
    requestsPerMinute: number;
  },
  at: Date,
): Promise<AgentCredentialRow | undefined> {
  const now = formatTimestamp(at);
  return inTransaction(target, async (db) => {
    await db
      .updateTable("agent_credentials")
      .set({ live_name: null })
      .where("tenant_id", "=", input.tenantId)
      .where("live_name", "=", input.name)
      .where("expires_at", "<=", now)
      .execute();
    return db
      .insertInto("agent_credentials")
      .values({
        tenant_id: input.tenantId,
        name: input.name,
        live_name: input.name,
        token_hash: input.tokenHash,
        scopes: JSON.stringify(input.scopes),
        created_by: input.createdBy,
        created_at: now,
        expires_at: input.expiresAt,
        last_used_at: null,
        revoked_at: null,
        revoked_by: null,
        requests_per_minute: input.requestsPerMinute,
      })
      .onConflict((conflict) => conflict.columns(["tenant_id", "live_name"]).doNothing())
      .returningAll()
      .executeTakeFirst();
  });
}
