import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import { type IssuedCertificateInput, issuedCertificateRow } from "./issued-certificate-record.js";

export type CertificateRenewal = { kind: "renewed" } | { kind: "revoked"; revokedAt: string } | { kind: "unknown" };

/**
 * Records a host's renewed certificate, issued over its current one (`renewedFrom`), unless that
 * one was revoked meanwhile. Ordered against revokeHostCertificates through the host's enrollment
 * token rows: both lock them first (FOR UPDATE on PostgreSQL; SQLite runs one writer at a time),
 * so a revocation either commits first — and the renewal, reading after the lock, finds the
 * current certificate revoked — or waits for the renewal and then revokes the new certificate too.
 * Without that order a renewal racing a revocation could leave the host a live certificate.
 */
export async function renewHostCertificate(
  storage: Storage,
  input: { renewedFrom: string; certificate: IssuedCertificateInput; now: Date },
): Promise<CertificateRenewal> {
  const now = formatTimestamp(input.now);
  const hostId = input.certificate.hostId;
  if (hostId === null) throw new Error("a host certificate names its host");
  return storage.transaction(async (trx) => {
    let tokens = trx.selectFrom("host_enrollment_tokens").select("token_hash").where("host_id", "=", hostId);
    if (storage.capabilities.rowLocks) tokens = tokens.forUpdate();
    await tokens.execute();
    const current = await trx
      .selectFrom("issued_certificates")
      .select(["host_id", "revoked_at", "enrollment_token_hash"])
      .where("serial", "=", input.renewedFrom)
      .where("role", "=", "host")
      .executeTakeFirst();
    if (current === undefined || current.host_id !== hostId) return { kind: "unknown" };
    if (current.revoked_at !== null) return { kind: "revoked", revokedAt: current.revoked_at };
    await trx
      .insertInto("issued_certificates")
      .values(
        issuedCertificateRow(
          { ...input.certificate, renewedFrom: input.renewedFrom, enrollmentTokenHash: current.enrollment_token_hash },
          now,
        ),
      )
      .execute();
    return { kind: "renewed" };
  });
}
