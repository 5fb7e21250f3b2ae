import { randomBytes } from "node:crypto";
import { appendAuditEntry, createAgentCredential, createTenant, onboardRepository, type Storage } from "@kiln/storage";
import { hashToken, mintToken } from "../../identity/token-format.js";
import { CANARY_TENANT } from "../platform-tenants.js";
import { CANARY_REPOSITORY } from "./canary-crate.js";

/** A canary credential lives a day; a fresh one is minted once less than an hour is left. */
const LIFETIME_SECONDS = 24 * 3600;
const RENEW_BEFORE_SECONDS = 3600;

/**
 * The platform credential canaries submit with: an agent credential of the canary tenant
 * (scopes read and submit), stored as a digest like every credential, its value held only in
 * this process's memory. Each kiln-server mints its own (named `canary-<random>`) and renews it
 * before it expires; expired ones stay in the tenant's inventory, attributed to `platform`.
 * The canary tenant and its repository are created on first use.
 */
export class CanaryCredential {
  #held: { value: string; expiresAt: number } | null = null;
  #prepared = false;

  constructor(private readonly storage: Storage) {}

  async value(now: Date): Promise<string> {
    if (!this.#prepared) {
      await createTenant(this.storage, { id: CANARY_TENANT, displayName: "kiln canaries" }, now);
      await onboardRepository(
        this.storage,
        { tenantId: CANARY_TENANT, name: CANARY_REPOSITORY, onboardedBy: "platform" },
        now,
      );
      this.#prepared = true;
    }
    if (this.#held !== null && this.#held.expiresAt - now.getTime() > RENEW_BEFORE_SECONDS * 1000) {
      return this.#held.value;
    }
    const value = mintToken("agent");
    const name = `canary-${randomBytes(6).toString("hex")}`;
    const expiresAt = new Date(now.getTime() + LIFETIME_SECONDS * 1000).toISOString();
    await this.storage.transaction(async (trx) => {
      const row = await createAgentCredential(
        trx,
        {
          tenantId: CANARY_TENANT,
          name,
          tokenHash: hashToken(value),
          scopes: ["read", "submit"],
          createdBy: "platform",
          expiresAt,
          requestsPerMinute: 600,
        },
        now,
      );
      if (row === undefined) throw new Error(`a live canary credential named ${name} exists already`);
      await appendAuditEntry(
        trx,
        {
          tenantId: CANARY_TENANT,
          actor: "platform",
          target: `credential:${name}`,
          value: `canary credential minted with scopes read,submit, expires ${expiresAt}`,
        },
        now,
      );
    });
    this.#held = { value, expiresAt: Date.parse(expiresAt) };
    return value;
  }
}
