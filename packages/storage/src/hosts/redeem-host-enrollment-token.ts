import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";

export type EnrollmentRedemption =
  | { kind: "issued"; hostId: string }
  | { kind: "unknown" }
  | { kind: "redeemed"; redeemedAt: string }
  | { kind: "expired"; expiredAt: string };

/**
 * Redeems a one-time enrollment token for a host credential, in one transaction: the token is
 * marked redeemed by a conditional write (unredeemed and unexpired), so across processes it
 * gives exactly one credential, and the credential's digest is stored with it.
 */
export async function redeemHostEnrollmentToken(
  storage: Storage,
  input: { tokenHash: string; credentialHash: string; now: Date },
): Promise<EnrollmentRedemption> {
  const now = formatTimestamp(input.now);
  return storage.transaction(async (trx) => {
    const redeemed = await trx
      .updateTable("host_enrollment_tokens")
      .set({ redeemed_at: now })
      .where("token_hash", "=", input.tokenHash)
      .where("redeemed_at", "is", null)
      .where("expires_at", ">", now)
      .returning("host_id")
      .executeTakeFirst();
    if (redeemed === undefined) {
      const row = await trx
        .selectFrom("host_enrollment_tokens")
        .select(["redeemed_at", "expires_at"])
        .where("token_hash", "=", input.tokenHash)
        .executeTakeFirst();
      if (row === undefined) return { kind: "unknown" };
      if (row.redeemed_at !== null) return { kind: "redeemed", redeemedAt: row.redeemed_at };
      return { kind: "expired", expiredAt: row.expires_at };
    }
    await trx
      .insertInto("host_credentials")
      .values({
        token_hash: input.credentialHash,
        host_id: redeemed.host_id,
        enrollment_token_hash: input.tokenHash,
        issued_at: now,
        revoked_at: null,
      })
      .execute();
    return { kind: "issued", hostId: redeemed.host_id };
  });
}
