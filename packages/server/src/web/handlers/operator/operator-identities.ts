import { X509Certificate } from "node:crypto";
import type { ResponseDocumentOf } from "@kiln/contract";
import { type IssuedCertificateRecord, listHostIdentityRecords, listHostRecords } from "@kiln/storage";
import { EMBEDDED_HOST_ID } from "../../../domain/hosts/host-identities.js";
import { CertificateAuthority } from "../../../domain/pki/certificate-authority.js";
import type { Handler } from "../../http/handler.js";

/** An inventory entry; IdentityInventory's items are open, and kiln adds what says more (serial, names, …). */
type Identity = ResponseDocumentOf<"operator.identities.list">["identities"][number] & Record<string, unknown>;

const noWindow = (reason: string) => ({
  certificate_sha256: null,
  issuer: null,
  not_before: null,
  not_after: null,
  remaining_seconds: null,
  remaining_fraction: null,
  no_window_reason: reason,
});

const noRecoveryKey = {
  recovery_key_sha256: null,
  no_recovery_key_reason: "kiln's enrollment records no recovery key",
};

/** A validity window at `now`: seconds left (negative once past) and the fraction of it left, in [0, 1]. */
function windowAt(notBefore: string, notAfter: string, now: Date) {
  const start = Date.parse(notBefore);
  const end = Date.parse(notAfter);
  const remaining = Math.floor((end - now.getTime()) / 1000);
  const span = (end - start) / 1000;
  return {
    not_before: notBefore,
    not_after: notAfter,
    remaining_seconds: remaining,
    remaining_fraction: span > 0 ? Math.min(1, Math.max(0, remaining / span)) : 0,
    no_window_reason: null,
  };
}

/** A certificate the CA issued, as an inventory entry's certificate members. */
function certificateMembers(record: Omit<IssuedCertificateRecord, "sealedPrivateKey">, now: Date) {
  const certificate = new X509Certificate(record.certificatePem);
  return {
    subject: certificate.subject,
    certificate_sha256: record.certificateSha256,
    issuer: certificate.issuer,
    ...windowAt(record.notBefore, record.notAfter, now),
    serial: record.serial,
  };
}

/**
 * operator.identities.list: the identities kiln's hosts and control plane hold, digests only —
 * never a key, a certificate's private part or a credential's value.
 *
 * - `host`, per host: its newest client certificate from kiln's CA (subject CN = the host id,
 *   SHA-256 of its DER, issuer, window, remaining seconds and fraction), how it was issued, when
 *   it was revoked if it was, and how many of its certificates are live and revoked; the named
 *   reason there is none for a host never enrolled and for the embedded host (no certificate:
 *   it runs in the control plane's process).
 * - `bootstrap`: each outstanding enrollment token (the one-time bootstrap credential) with its
 *   window, who minted it, and the SHA-256 the control plane keeps of it.
 * - `controller`: the host CA, and the host listener's server certificate (per set of names),
 *   or why there is none yet.
 * - `provisioner`: kiln has none (hosts enroll with operator-minted tokens).
 */
export const listIdentities: Handler<"operator.identities.list"> = async (ctx) => {
  const now = ctx.now;
  const hosts = await listHostRecords(ctx.db);
  const records = await listHostIdentityRecords(ctx.db, { now });
  const certified = new Map(records.hosts.map((h) => [h.hostId, h]));
  const hostIds = [...new Set([...hosts.map((h) => h.id), ...certified.keys()])].sort();
  const identities: Identity[] = [];
  for (const hostId of hostIds) {
    const base = { role: "host" as const, host: hostId };
    const held = certified.get(hostId);
    if (hostId === EMBEDDED_HOST_ID) {
      identities.push({
        ...base,
        subject: `host:${hostId}`,
        ...noWindow("the embedded host runs in the control plane's process and presents no certificate"),
        ...noRecoveryKey,
      });
    } else if (held === undefined) {
      identities.push({
        ...base,
        subject: `host:${hostId}`,
        ...noWindow("never enrolled: the host holds no certificate from kiln's host CA"),
        ...noRecoveryKey,
      });
    } else {
      identities.push({
        ...base,
        ...certificateMembers(held.newest, now),
        ...noRecoveryKey,
        issued_via: held.newest.issuedVia,
        revoked_at: held.newest.revokedAt,
        certificates_live: held.live,
        certificates_revoked: held.revoked,
      });
    }
  }
  for (const token of records.outstandingEnrollments) {
    identities.push({
      role: "bootstrap",
      host: token.hostId,
      subject: `enrollment-token:${token.hostId}`,
      certificate_sha256: null,
      issuer: `operator ${token.createdBy}`,
      ...windowAt(token.createdAt, token.expiresAt, now),
      credential_sha256: token.tokenHash,
    });
  }
  const ca = await CertificateAuthority.read(ctx.deps.storage);
  if (ca === undefined) {
    identities.push({
      role: "controller",
      host: null,
      subject: "kiln host CA",
      ...noWindow(
        "no host CA yet: kiln-server makes it when its host listener first starts (KILN_HOST_LISTEN) or an enrollment token is minted by the admin CLI",
      ),
    });
  } else {
    const certificate = new X509Certificate(ca.certificatePem);
    identities.push({
      role: "controller",
      host: null,
      subject: certificate.subject,
      certificate_sha256: ca.certificateSha256,
      issuer: certificate.issuer,
      ...windowAt(new Date(certificate.validFrom).toISOString(), new Date(certificate.validTo).toISOString(), now),
      serial: certificate.serialNumber,
      purpose: "host CA: signs hosts' client certificates and the host listener's server certificate",
    });
  }
  if (records.listeners.length === 0) {
    identities.push({
      role: "controller",
      host: null,
      subject: "kiln host listener",
      ...noWindow("no host listener certificate: no kiln-server serves the host protocol (KILN_HOST_LISTEN is unset)"),
    });
  }
  for (const listener of records.listeners) {
    identities.push({
      role: "controller",
      host: null,
      ...certificateMembers(listener, now),
      names: [...listener.names],
      purpose: "host listener: the server certificate remote kiln-hosts verify against the pinned CA",
    });
  }
  identities.push({
    role: "provisioner",
    host: null,
    subject: "none",
    ...noWindow("kiln has no provisioner identity: hosts enroll with operator-minted one-time tokens"),
  });
  return { computed_at: now.toISOString(), identities };
};
