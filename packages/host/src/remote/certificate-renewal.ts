import { type Clock, type Logger, messageOf, type Timer } from "@kiln/contract";
import type { HostTlsIdentity } from "./host-tls-identity.js";
import { newKeyAndSigningRequest } from "./host-tls-identity.js";
import { requestRenewal } from "./http-host-protocol.js";

/** How long a failed renewal waits before the next try. */
export const RENEWAL_RETRY_MS = 60_000;
/** The longest single wait scheduled (a timer beyond ~24.8 days would fire at once); it re-checks then. */
const LONGEST_WAIT_MS = 24 * 3600_000;

/** When a certificate is renewed: at two thirds of its lifetime. */
export function renewalDueAt(identity: Pick<HostTlsIdentity, "notBefore" | "notAfter">): Date {
  const start = identity.notBefore.getTime();
  return new Date(start + ((identity.notAfter.getTime() - start) * 2) / 3);
}

/** What the renewal loop reports: each renewed certificate and each failed try. */
export type RenewalEvent =
  | { type: "certificate:renewed"; serial: string; notAfter: string }
  | { type: "certificate:renewal_failed"; error: unknown };

export interface CertificateRenewal {
  stop(): void;
}

/**
 * Renews the host's client certificate at two thirds of its lifetime, on the injected clock (so
 * a test moves time instead of waiting): a new key made here, its signing request sent over the
 * current certificate, and the answer put in place (HostTlsIdentity.replace: persisted, then used
 * by every new request; nothing restarts). A failed try is logged and reported, and tried again
 * after RENEWAL_RETRY_MS; a revoked or expired certificate keeps failing, visibly, until an
 * operator enrolls the host again.
 */
export function startCertificateRenewal(options: {
  endpoint: string;
  identity: HostTlsIdentity;
  clock: Clock;
  log: Logger;
  onEvent?: (event: RenewalEvent) => void;
}): CertificateRenewal {
  const { identity, clock, log } = options;
  let timer: Timer | null = null;
  let stopped = false;
  const schedule = (ms: number) => {
    if (stopped) return;
    timer = clock.after(Math.min(Math.max(0, ms), LONGEST_WAIT_MS), () => void tick());
  };
  const tick = async () => {
    const due = renewalDueAt(identity).getTime() - clock.now().getTime();
    if (due > 0) {
      schedule(due);
      return;
    }
    try {
      const { keyPem, csrPem } = await newKeyAndSigningRequest(identity.hostId);
      const issued = await requestRenewal(options.endpoint, identity, csrPem);
      if (stopped) return;
      // The pinned CA stays pinned: the new certificate must chain to it (replace checks).
      await identity.replace({
        keyPem,
        certificatePem: issued.certificate,
        caCertificatePem: identity.material.caCertificatePem,
      });
      log.info(
        { hostId: identity.hostId, serial: identity.serial, notAfter: issued.notAfter },
        "host certificate renewed",
      );
      options.onEvent?.({ type: "certificate:renewed", serial: identity.serial, notAfter: issued.notAfter });
      // A certificate already due when it arrives means the clocks disagree by more than a third
      // of the lifetime: try again after the retry wait, never in a loop.
      schedule(Math.max(renewalDueAt(identity).getTime() - clock.now().getTime(), RENEWAL_RETRY_MS));
    } catch (error) {
      log.error(
        { hostId: identity.hostId, err: error },
        `host certificate renewal failed (expires ${identity.notAfter.toISOString()}): ${messageOf(error)}`,
      );
      options.onEvent?.({ type: "certificate:renewal_failed", error });
      schedule(RENEWAL_RETRY_MS);
    }
  };
  schedule(renewalDueAt(identity).getTime() - clock.now().getTime());
  return {
    stop: () => {
      stopped = true;
      timer?.cancel();
    },
  };
}
