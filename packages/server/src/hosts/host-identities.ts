import type { HostCredentialIssued } from "@kiln/contract";
import {
  appendOperatorAuditEntry,
  createHostEnrollmentToken,
  findHostCredentialByHash,
  redeemHostEnrollmentToken,
  revokeHostCredentials,
  type Storage,
} from "@kiln/storage";
import { hashToken, mintToken, tokenKindOf } from "../auth/token-format.js";
import { operatorAuditValue } from "../handlers/operator-audit.js";

/** A host id: what HostEnrollment.id admits, restricted to characters safe in logs and paths. */
export const HOST_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The embedded host's id (local-host.ts); no remote host may take it. */
export const EMBEDDED_HOST_ID = "local";

/** How long an enrollment token waits to be redeemed unless the operator says otherwise. */
export const ENROLLMENT_TOKEN_SECONDS = 24 * 3600;

/** Why a host's request was not authenticated, in words the refusal carries. */
export class HostIdentityError extends Error {
  constructor(
    readonly reason: "malformed" | "unknown" | "revoked" | "redeemed" | "expired",
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

/**
 * Redeems an enrollment token for the host's credential (`kiln_host_…`), exactly once: a
 * redeemed, expired or unknown token is refused. The credential is stored as a digest only.
 */
export async function redeemHostEnrollment(storage: Storage, token: string, now: Date): Promise<HostCredentialIssued> {
  if (tokenKindOf(token) !== "enroll") throw new HostIdentityError("malformed", "not a kiln host enrollment token");
  const credential = mintToken("host");
  const redeemed = await redeemHostEnrollmentToken(storage, {
    tokenHash: hashToken(token),
    credentialHash: hashToken(credential),
    now,
  });
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
          value: operatorAuditValue("host.enroll", "performed", "enrollment token redeemed for a host credential"),
          changedAt: now,
        },
        now,
      );
      return { hostId: redeemed.hostId, credential };
  }
}

/** The host a credential names, or a HostIdentityError saying why it does not authenticate. */
export async function hostOfCredential(storage: Storage, credential: string): Promise<string> {
  if (tokenKindOf(credential) !== "host") throw new HostIdentityError("malformed", "not a kiln host credential");
  const row = await findHostCredentialByHash(storage, hashToken(credential));
  if (row === undefined) throw new HostIdentityError("unknown", "the host credential did not verify");
  if (row.revokedAt !== null) {
    throw new HostIdentityError("revoked", `the host credential was revoked at ${row.revokedAt}`, row.revokedAt);
  }
  return row.hostId;
}

/** Revokes every credential of a host (an operator act); its next request is refused. Audited. */
export async function revokeHost(
  storage: Storage,
  input: { hostId: string; revokedBy: string; now: Date },
): Promise<{ revoked: number }> {
  return storage.transaction(async (trx) => {
    const revoked = await revokeHostCredentials(trx, { hostId: input.hostId, now: input.now });
    await appendOperatorAuditEntry(
      trx,
      {
        actor: input.revokedBy,
        target: `host:${input.hostId}`,
        value: operatorAuditValue("host.credentials.revoke", "performed", `${revoked} credential(s) revoked`),
        changedAt: input.now,
      },
      input.now,
    );
    return { revoked };
  });
}
