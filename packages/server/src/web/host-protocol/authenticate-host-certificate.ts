import type { X509Certificate } from "node:crypto";
import type { TLSSocket } from "node:tls";
import { findIssuedCertificate, type Storage } from "@kiln/storage";
import { HostIdentityError } from "../../domain/hosts/host-identities.js";
import { type CertificateAuthority, certificateSha256 } from "../../domain/pki/certificate-authority.js";

/**
 * What TLS may report about a certificate kiln's CA did issue. The handshake checks validity
 * against the machine's time; kiln checks it against the control plane's clock below (the one
 * every other expiry is judged by, and the one tests move), so only these are left to it.
 */
const JUDGED_BY_THE_CLOCK = new Set(["CERT_HAS_EXPIRED", "CERT_NOT_YET_VALID"]);

/** The certificate's CN: the host id the CA wrote there. */
function commonNameOf(certificate: X509Certificate): string | undefined {
  return /(?:^|\n)CN=([^\n]*)/.exec(certificate.subject)?.[1];
}

/**
 * The host a request's client certificate authenticates, or a HostIdentityError saying why it
 * does not: none presented; not issued by this deployment's CA (signature and issuer, and TLS's
 * own chain verdict); outside its validity window at `now`; a serial the CA never recorded (or
 * whose recorded digest differs); revoked. The host id is the certificate's recorded host, which
 * its subject CN must name.
 */
export async function authenticateHostCertificate(
  storage: Storage,
  ca: CertificateAuthority,
  socket: TLSSocket,
  now: Date,
): Promise<{ hostId: string; serial: string }> {
  const presented = socket.getPeerX509Certificate?.();
  if (presented === undefined) {
    throw new HostIdentityError(
      "no_certificate",
      "the host protocol needs the host's client certificate (mutual TLS): enroll with a bootstrap credential first",
    );
  }
  const tlsVerdict = socket.authorized ? null : String(socket.authorizationError ?? "unverified");
  if (!ca.issued(presented) || (tlsVerdict !== null && !JUDGED_BY_THE_CLOCK.has(tlsVerdict))) {
    throw new HostIdentityError(
      "foreign",
      `the client certificate was not issued by this kiln's host CA${tlsVerdict === null ? "" : ` (${tlsVerdict})`}`,
    );
  }
  const serial = presented.serialNumber.toUpperCase();
  const recorded = await findIssuedCertificate(storage, serial);
  if (
    recorded === undefined ||
    recorded.role !== "host" ||
    recorded.hostId === null ||
    recorded.certificateSha256 !== certificateSha256(presented)
  ) {
    throw new HostIdentityError("unknown", `the client certificate ${serial} was not issued to a host`);
  }
  if (commonNameOf(presented) !== recorded.hostId) {
    throw new HostIdentityError("unknown", `the client certificate ${serial} does not name its host`);
  }
  if (recorded.revokedAt !== null) {
    throw new HostIdentityError(
      "revoked",
      `the host certificate ${serial} was revoked at ${recorded.revokedAt}`,
      recorded.revokedAt,
    );
  }
  if (now.getTime() >= Date.parse(recorded.notAfter)) {
    throw new HostIdentityError(
      "expired",
      `the host certificate ${serial} expired at ${recorded.notAfter}`,
      recorded.notAfter,
    );
  }
  if (now.getTime() < Date.parse(recorded.notBefore)) {
    throw new HostIdentityError("not_yet_valid", `the host certificate ${serial} is valid from ${recorded.notBefore}`);
  }
  return { hostId: recorded.hostId, serial };
}
