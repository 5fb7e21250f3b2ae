import {
  appendOperatorAuditEntry,
  createHostEnrollmentToken,
  findHostEnrollmentToken,
  redeemHostEnrollmentToken,
  renewHostCertificate,
  revokeHostCertificates,
  type Storage,
} from "@kiln/storage";
import { hashToken, mintToken, tokenKindOf } from "../identity/token-format.js";
import type { CertificateAuthority } from "../pki/certificate-authority.js";
import { operatorAuditValue } from "../platform/operator-audit-value.js";

/** A host id: what HostEnrollment.id admits, restricted to characters safe in logs and paths. */
export const HOST_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The embedded host's id (local-host.ts); no remote host may take it. */
export const EMBEDDED_HOST_ID = "local";

/** How long an enrollment token waits to be redeemed unless the operator says otherwise. */
export const ENROLLMENT_TOKEN_SECONDS = 24 * 3600;

/** Why a host's request was not authenticated, in words the refusal carries. */
export class HostIdentityError extends Error {
  constructor(
    readonly reason:
      | "malformed"
      | "unknown"
      | "revoked"
      | "redeemed"
      | "expired"
      | "no_certificate"
      | "foreign"
      | "not_yet_valid",
    message: string,
    readonly at?: string,
  ) {
    super(message);
    this.name = "HostIdentityError";
  }
}

/**
 * Mints a one-time enrollment token for `hostId` (an operator act: `kiln-server admin host
 * enrollment-token`). Only its digest is stored; the value is shown once. Audited.
 */
export async function mintHostEnrollmentToken(
  storage: Storage,
  input: { hostId: string; createdBy: string; ttlSeconds?: number; now: Date },
): Promise<{ hostId: string; token: string; expiresAt: string }> {
  if (!HOST_ID_PATTERN.test(input.hostId)) {
    throw new Error(`a host id must match ${HOST_ID_PATTERN.source}, got ${JSON.stringify(input.hostId)}`);
  }
  if (input.hostId === EMBEDDED_HOST_ID) {
    throw new Error(`host id ${EMBEDDED_HOST_ID} is the embedded host's; a remote host needs another`);
  }
  const token = mintToken("enroll");
  const ttlSeconds = input.ttlSeconds ?? ENROLLMENT_TOKEN_SECONDS;
  const { expiresAt } = await storage.transaction(async (trx) => {
    const created = await createHostEnrollmentToken(trx, {
      tokenHash: hashToken(token),
      hostId: input.hostId,
      createdBy: input.createdBy,
      ttlSeconds,
      now: input.now,
    });
    await appendOperatorAuditEntry(
      trx,
      {
        actor: input.createdBy,
        target: `host:${input.hostId}`,
        value: operatorAuditValue("host.enrollment_token.create", "performed", `expires ${created.expiresAt}`),
        changedAt: input.now,
      },
      input.now,
    );
    return created;
  });
  return { hostId: input.hostId, token, expiresAt };
}

/** A host's certificate as the enrollment and the renewal answer it. */
export interface IssuedHostCertificate {
  readonly hostId: string;
  readonly certificatePem: string;
  readonly notAfter: string;
}

/**
 * Redeems an enrollment token (the one-time bootstrap credential) for the host's first client
 * certificate, signed from the host's own certificate signing request: exactly once across
 * processes (a conditional write); a redeemed, expired or unknown token is refused. Audited.
 */
export async function enrollHost(
  storage: Storage,
  ca: CertificateAuthority,
  input: { token: string; csrPem: string; lifetimeSeconds: number; now: Date },
): Promise<IssuedHostCertificate> {
  if (tokenKindOf(input.token) !== "enroll")
    throw new HostIdentityError("malformed", "not a kiln host enrollment token");
  const tokenHash = hashToken(input.token);
  const token = await findHostEnrollmentToken(storage, tokenHash);
  if (token === undefined) throw new HostIdentityError("unknown", "the enrollment token did not verify");
  const certificate = await ca.issueHostCertificate({
    hostId: token.hostId,
    csrPem: input.csrPem,
    lifetimeSeconds: input.lifetimeSeconds,
    now: input.now,
    via: "enrollment",
  });
  const redeemed = await redeemHostEnrollmentToken(storage, { tokenHash, certificate, now: input.now });
  switch (redeemed.kind) {
    case "unknown":
      throw new HostIdentityError("unknown", "the enrollment token did not verify");
    case "redeemed":
      throw new HostIdentityError(
        "redeemed",
        `the enrollment token was already redeemed at ${redeemed.redeemedAt}`,
        redeemed.redeemedAt,
      );
    case "expired":
      throw new HostIdentityError(
        "expired",
        `the enrollment token expired at ${redeemed.expiredAt}`,
        redeemed.expiredAt,
      );
    case "issued":
      await appendOperatorAuditEntry(
        storage,
        {
          actor: `host:${redeemed.hostId}`,
          target: `host:${redeemed.hostId}`,
          value: operatorAuditValue(
            "host.enroll",
            "performed",
            `enrollment token redeemed for certificate ${certificate.serial} (sha256 ${certificate.certificateSha256}), valid until ${certificate.notAfter}`,
          ),
          changedAt: input.now,
        },
        input.now,
      );
      return { hostId: redeemed.hostId, certificatePem: certificate.certificatePem, notAfter: certificate.notAfter };
  }
}

/**
 * A new certificate for an authenticated host, over its current one (`serial`), for the key of
 * its new signing request. Refused when the current one was revoked meanwhile. Audited.
 */
export async function renewHost(
  storage: Storage,
  ca: CertificateAuthority,
  input: { hostId: string; serial: string; csrPem: string; lifetimeSeconds: number; now: Date },
): Promise<IssuedHostCertificate> {
  const certificate = await ca.issueHostCertificate({
    hostId: input.hostId,
    csrPem: input.csrPem,
    lifetimeSeconds: input.lifetimeSeconds,
    now: input.now,
    via: "renewal",
  });
  const renewed = await renewHostCertificate(storage, { renewedFrom: input.serial, certificate, now: input.now });
  if (renewed.kind === "revoked") {
    throw new HostIdentityError(
      "revoked",
      `the host certificate was revoked at ${renewed.revokedAt}`,
      renewed.revokedAt,
    );
  }
  if (renewed.kind === "unknown") throw new HostIdentityError("unknown", "the host certificate did not verify");
  await appendOperatorAuditEntry(
    storage,
    {
      actor: `host:${input.hostId}`,
      target: `host:${input.hostId}`,
      value: operatorAuditValue(
        "host.certificate.renew",
        "performed",
        `certificate ${certificate.serial} (sha256 ${certificate.certificateSha256}) over ${input.serial}, valid until ${certificate.notAfter}`,
      ),
      changedAt: input.now,
    },
    input.now,
  );
  return { hostId: input.hostId, certificatePem: certificate.certificatePem, notAfter: certificate.notAfter };
}

/** Revokes every certificate of a host (an operator act); its next request is refused. Audited. */
export async function revokeHost(
  storage: Storage,
  input: { hostId: string; revokedBy: string; now: Date },
): Promise<{ revoked: number }> {
  return storage.transaction(async (trx) => {
    const revoked = await revokeHostCertificates(trx, {
      hostId: input.hostId,
      now: input.now,
      rowLocks: storage.capabilities.rowLocks,
    });
    await appendOperatorAuditEntry(
      trx,
      {
        actor: input.revokedBy,
        target: `host:${input.hostId}`,
        value: operatorAuditValue("host.credentials.revoke", "performed", `${revoked} certificate(s) revoked`),
        changedAt: input.now,
      },
      input.now,
    );
    return { revoked };
  });
}
