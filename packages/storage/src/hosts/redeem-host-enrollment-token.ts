import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import { type IssuedCertificateInput, issuedCertificateRow } from "./issued-certificate-record.js";

export type EnrollmentRedemption =
  | { kind: "issued"; hostId: string }
  | { kind: "unknown" }
  | { kind: "redeemed"; redeemedAt: string }
  | { kind: "expired"; expiredAt: string };

/**
 * Redeems a one-time enrollment token for the host's first certificate, in one transaction: the
 * token is marked redeemed by a conditional write (unredeemed and unexpired), so across processes
 * it gives exactly one certificate, and the certificate is recorded with it. The caller issued
 * the certificate for the host the token names (findHostEnrollmentToken); a certificate naming
 * another host is an error, never stored.
 */
export async function redeemHostEnrollmentToken(
  storage: Storage,
  input: { tokenHash: string; certificate: IssuedCertificateInput; now: Date },
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
    if (input.certificate.hostId !== redeemed.host_id) {
      throw new Error(
        `a certificate for host ${input.certificate.hostId} cannot redeem host ${redeemed.host_id}'s token`,
      );
    }
    await trx
      .insertInto("issued_certificates")
      .values(issuedCertificateRow({ ...input.certificate, enrollmentTokenHash: input.tokenHash }, now))
      .execute();
    return { kind: "issued", hostId: redeemed.host_id };
  });
}
