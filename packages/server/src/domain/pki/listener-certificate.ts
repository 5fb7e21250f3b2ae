import { findListenerCertificate, recordIssuedCertificate, type Storage } from "@kiln/storage";
import type { SecretBox } from "../secrets/secret-box.js";
import type { CertificateAuthority } from "./certificate-authority.js";

/** The host listener's server certificate and key, in PEM, for Node's TLS. */
export interface ListenerCertificate {
  readonly keyPem: string;
  readonly certificatePem: string;
  readonly notBefore: string;
  readonly notAfter: string;
}

/** Whether a certificate is past two thirds of its lifetime at `now`: the point it is renewed. */
export function dueForRenewal(window: { notBefore: string; notAfter: string }, now: Date): boolean {
  const start = Date.parse(window.notBefore);
  const end = Date.parse(window.notAfter);
  return now.getTime() >= start + ((end - start) * 2) / 3;
}

/**
 * The host listener's server certificate for `names`: the deployment's stored one while it is
 * short of two thirds of its lifetime (servers with the same names share it; its key is stored
 * sealed under the master key), else a new one issued by the CA and stored. Two servers renewing
 * at once each store one; both are valid, and later starts take the newest.
 */
export async function listenerCertificate(
  storage: Storage,
  ca: CertificateAuthority,
  secrets: SecretBox,
  input: { names: readonly string[]; lifetimeSeconds: number; now: Date },
): Promise<ListenerCertificate> {
  const stored = await findListenerCertificate(storage, { names: input.names, now: input.now });
  if (stored !== undefined && stored.sealedPrivateKey !== null && !dueForRenewal(stored, input.now)) {
    return {
      keyPem: secrets.open(stored.sealedPrivateKey),
      certificatePem: stored.certificatePem,
      notBefore: stored.notBefore,
      notAfter: stored.notAfter,
    };
  }
  const { issued, privateKeyPem } = await ca.issueListenerCertificate({
    names: input.names,
    lifetimeSeconds: input.lifetimeSeconds,
    now: input.now,
    secrets,
  });
  await recordIssuedCertificate(storage, { certificate: issued, now: input.now });
  return {
    keyPem: privateKeyPem,
    certificatePem: issued.certificatePem,
    notBefore: issued.notBefore,
    notAfter: issued.notAfter,
  };
}
