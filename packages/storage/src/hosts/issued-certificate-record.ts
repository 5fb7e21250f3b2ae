import type { IssuedCertificatesTable } from "../schema.js";

/** A certificate the control plane's CA issued, as stored (issued_certificates, migration 0023). */
export interface IssuedCertificateRecord {
  /** Upper-case hexadecimal, as Node's X509Certificate.serialNumber reads it. */
  readonly serial: string;
  readonly role: "host" | "listener";
  readonly hostId: string | null;
  readonly subject: string;
  /** A listener's DNS names and addresses; empty for a host. */
  readonly names: readonly string[];
  readonly certificatePem: string;
  /** SHA-256 of the certificate's DER, lower-case hexadecimal. */
  readonly certificateSha256: string;
  /** A listener's key sealed under the master key; null for a host, whose key never leaves it. */
  readonly sealedPrivateKey: string | null;
  readonly issuedVia: "enrollment" | "renewal" | "listener";
  readonly enrollmentTokenHash: string | null;
  readonly renewedFrom: string | null;
  readonly notBefore: string;
  readonly notAfter: string;
  readonly issuedAt: string;
  readonly revokedAt: string | null;
}

/** What issuing writes: the record less what only a later revocation sets. */
export type IssuedCertificateInput = Omit<IssuedCertificateRecord, "revokedAt" | "issuedAt">;

export function issuedCertificateOf(row: IssuedCertificatesTable): IssuedCertificateRecord {
  return {
    serial: row.serial,
    role: row.role,
    hostId: row.host_id,
    subject: row.subject,
    names: row.names === null ? [] : (JSON.parse(row.names) as string[]),
    certificatePem: row.certificate_pem,
    certificateSha256: row.certificate_sha256,
    sealedPrivateKey: row.sealed_private_key,
    issuedVia: row.issued_via,
    enrollmentTokenHash: row.enrollment_token_hash,
    renewedFrom: row.renewed_from,
    notBefore: row.not_before,
    notAfter: row.not_after,
    issuedAt: row.issued_at,
    revokedAt: row.revoked_at,
  };
}

export function issuedCertificateRow(input: IssuedCertificateInput, issuedAt: string): IssuedCertificatesTable {
  return {
    serial: input.serial,
    role: input.role,
    host_id: input.hostId,
    subject: input.subject,
    names: input.role === "listener" ? JSON.stringify(input.names) : null,
    certificate_pem: input.certificatePem,
    certificate_sha256: input.certificateSha256,
    sealed_private_key: input.sealedPrivateKey,
    issued_via: input.issuedVia,
    enrollment_token_hash: input.enrollmentTokenHash,
    renewed_from: input.renewedFrom,
    not_before: input.notBefore,
    not_after: input.notAfter,
    issued_at: issuedAt,
    revoked_at: null,
  };
}
