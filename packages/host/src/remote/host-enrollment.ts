import { type Clock, type Logger, systemClock } from "@kiln/contract";
import { certificateSha256, HostTlsIdentity, newKeyAndSigningRequest } from "./host-tls-identity.js";
import { fetchCaCertificate, HostProtocolRefusal, hostIdentityOf, requestEnrollment } from "./http-host-protocol.js";
import type { KilnHostConfig } from "./kiln-host-config.js";

/** Refusals after which a kept identity is given up for a new enrollment, when a token is at hand. */
const NO_LONGER_TAKEN = new Set(["credential_revoked", "credential_expired"]);

/**
 * The host's TLS identity: the one kept under `<data dir>/tls/`, else a new enrollment with the
 * one-time bootstrap credential (KILN_HOST_ENROLLMENT_TOKEN). A kept identity is given up only
 * when a token is configured and the control plane no longer takes the certificate (revoked or
 * expired), so an operator re-enrolls a host by handing it a new token; at every other restart
 * the spent token is never sent again.
 */
export async function loadHostIdentity(
  config: Pick<KilnHostConfig, "endpoint" | "enrollmentToken" | "caSha256" | "tlsFiles">,
  log: Logger,
  clock: Clock = systemClock,
): Promise<HostTlsIdentity> {
  const kept = await HostTlsIdentity.fromFiles(config.tlsFiles);
  if (kept !== undefined) {
    if (config.enrollmentToken === undefined) {
      if (kept.notAfter.getTime() <= clock.now().getTime()) {
        throw new Error(
          `the host certificate in ${config.tlsFiles.identity} expired at ${kept.notAfter.toISOString()}: enroll again with a new KILN_HOST_ENROLLMENT_TOKEN (\`kiln-server admin host enrollment-token ${kept.hostId}\`)`,
        );
      }
      return kept;
    }
    try {
      await hostIdentityOf(config.endpoint, kept);
      return kept;
    } catch (error) {
      if (!(error instanceof HostProtocolRefusal) || !NO_LONGER_TAKEN.has(error.code)) throw error;
      log.warn(
        { hostId: kept.hostId, refusal: error.code },
        `the kept host certificate is refused (${error.detail}); enrolling again`,
      );
    }
  }
  if (config.enrollmentToken === undefined) {
    throw new Error(
      `no host certificate in ${config.tlsFiles.identity}: set KILN_HOST_ENROLLMENT_TOKEN (from \`kiln-server admin host enrollment-token <host-id>\`) to enroll`,
    );
  }
  return enroll({ ...config, enrollmentToken: config.enrollmentToken }, log);
}

/**
 * Enrolls: reads the control plane's CA (checked against KILN_HOST_CA_SHA256 when given; else
 * trusted on first use and logged), makes a key pair here, and redeems the token with a signing
 * request over TLS that trusts only that CA. The key never leaves the host; the certificate and
 * the pinned CA are written before anything else happens.
 */
async function enroll(
  config: Pick<KilnHostConfig, "endpoint" | "caSha256" | "tlsFiles"> & { enrollmentToken: string },
  log: Logger,
): Promise<HostTlsIdentity> {
  const ca = await fetchCaCertificate(config.endpoint);
  const digest = certificateSha256(ca.caCertificate);
  if (digest !== ca.sha256)
    throw new Error(`the control plane answered a CA certificate whose digest is not ${ca.sha256}`);
  if (config.caSha256 !== undefined && digest !== config.caSha256) {
    throw new Error(
      `the control plane presents host CA ${digest}, not the one KILN_HOST_CA_SHA256 pins (${config.caSha256}): not enrolling`,
    );
  }
  if (config.caSha256 === undefined) {
    log.warn(
      { caSha256: digest },
      "KILN_HOST_CA_SHA256 is not set: pinning the host CA the control plane presented (compare its digest with `kiln-server admin host enrollment-token`'s)",
    );
  }
  const { keyPem, csrPem } = await newKeyAndSigningRequest();
  const issued = await requestEnrollment(config.endpoint, {
    token: config.enrollmentToken,
    csrPem,
    caCertificatePem: ca.caCertificate,
  });
  if (certificateSha256(issued.caCertificate) !== digest) {
    throw new Error("the enrollment answered another CA than the one the control plane presented");
  }
  const identity = await HostTlsIdentity.create(
    { keyPem, certificatePem: issued.certificate, caCertificatePem: ca.caCertificate },
    config.tlsFiles,
  );
  log.info({ hostId: identity.hostId, notAfter: issued.notAfter }, `enrolled as host ${identity.hostId}`);
  return identity;
}
