import { join } from "node:path";
import { type Clock, silentLogger, systemClock } from "@kiln/contract";
import {
  DEFAULT_CRATES_IO_INDEX,
  HostTlsIdentity,
  type KilnHostConfig,
  newKeyAndSigningRequest,
  requestEnrollment,
  tlsFilesIn,
} from "@kiln/host";
import { mintHostEnrollmentToken } from "../src/domain/hosts/host-identities.js";
import type { HostServiceEvent } from "../src/domain/hosts/host-service.js";
import type { TestApp } from "../src/testing/harness.js";
import { type HostListener, startHostListener } from "../src/web/host-protocol/host-listener.js";

/** A week: the default client certificate lifetime (KILN_HOST_CERTIFICATE_SECONDS). */
export const WEEK_SECONDS = 7 * 24 * 3600;

export interface TestHostListener {
  readonly listener: HostListener;
  /** `https://127.0.0.1:<port>`: what a kiln-host's KILN_ENDPOINT names. */
  readonly origin: string;
  /** A one-time enrollment token for `hostId`, minted at the listener's clock. */
  token(hostId: string, ttlSeconds?: number): Promise<string>;
  /** Enrolls `hostId` over HTTPS as a kiln-host does (its own key, a signing request): its identity, in memory. */
  enroll(hostId: string): Promise<HostTlsIdentity>;
  /** Redeems `token` (a bootstrap credential) over HTTPS as a kiln-host does: its identity, in memory. */
  enrollWith(token: string): Promise<HostTlsIdentity>;
  /**
   * A kiln-host's configuration enrolling `hostId` here with a fresh token: 2 vCPUs, the sandbox
   * executor, its TLS files and data in `dataDir`.
   */
  hostConfig(hostId: string, dataDir: string): Promise<KilnHostConfig>;
}

/**
 * The app's host listener (mutual TLS, web/host-protocol/host-listener.ts) on 127.0.0.1, closed
 * with the app. Hosts' certificates and enrollment tokens are issued and judged by `clock` (the
 * app's by default); the listener's own certificate by the machine's time, which the hosts' TLS
 * checks it against (the test apps' settable clock is days before it).
 */
export async function listenForHosts(
  t: TestApp,
  options: { clock?: Clock; certificateLifetimeSeconds?: number; onEvent?: (event: HostServiceEvent) => void } = {},
): Promise<TestHostListener> {
  const clock = options.clock ?? t.clock;
  const listener = await startHostListener(t.deps, {
    host: "127.0.0.1",
    port: 0,
    names: ["127.0.0.1", "localhost"],
    certificateLifetimeSeconds: options.certificateLifetimeSeconds ?? WEEK_SECONDS,
    clock,
    serverCertificateClock: systemClock,
    log: silentLogger,
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
  });
  const closeApp = t.close;
  t.close = async () => {
    await listener.close();
    await closeApp();
  };
  const token = async (hostId: string, ttlSeconds?: number) =>
    (
      await mintHostEnrollmentToken(t.storage, {
        hostId,
        createdBy: "test",
        now: clock.now(),
        ...(ttlSeconds === undefined ? {} : { ttlSeconds }),
      })
    ).token;
  const enrollWith = async (bootstrap: string) => {
    const { keyPem, csrPem } = await newKeyAndSigningRequest();
    const issued = await requestEnrollment(listener.origin, {
      token: bootstrap,
      csrPem,
      caCertificatePem: listener.ca.certificatePem,
    });
    return HostTlsIdentity.inMemory({
      keyPem,
      certificatePem: issued.certificate,
      caCertificatePem: issued.caCertificate,
    });
  };
  return {
    listener,
    origin: listener.origin,
    token,
    enrollWith,
    enroll: async (hostId) => enrollWith(await token(hostId)),
    hostConfig: async (hostId, dataDir) => ({
      endpoint: listener.origin,
      enrollmentToken: await token(hostId),
      caSha256: listener.ca.certificateSha256,
      tlsFiles: tlsFilesIn(dataDir),
      dataDir,
      vcpus: 2,
      cratesIoIndex: DEFAULT_CRATES_IO_INDEX,
      isolation: { executor: "sandbox", microvmAccel: "kvm", guestDirectory: join(dataDir, "guest"), probeSeconds: 5 },
    }),
  };
}
