import type { Server as HttpsServer } from "node:https";
import { type Clock, type Logger, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import { startJobNotifications } from "@kiln/storage";
import Fastify, { type FastifyInstance } from "fastify";
import type { HostServiceEvent } from "../../domain/hosts/host-service.js";
import { CertificateAuthority } from "../../domain/pki/certificate-authority.js";
import { dueForRenewal, type ListenerCertificate, listenerCertificate } from "../../domain/pki/listener-certificate.js";
import type { AppDeps } from "../http/app-deps.js";
import { installBodyParsers } from "../http/body-parsers.js";
import { installErrorBoundary } from "../http/error-boundary.js";
import { clientErrorHandler, frameworkErrors } from "../http/framework-errors.js";
import { installRequestValidators } from "../http/request-validators.js";
import { registerHostProtocolRoutes } from "./http-host-routes.js";

/** How long the listener's own server certificate is valid; it is replaced at two thirds of it. */
export const LISTENER_CERTIFICATE_SECONDS = 30 * 24 * 3600;
/** How often the listener checks whether its server certificate is due for renewal. */
const LISTENER_RENEWAL_CHECK_MS = 3600_000;
/**
 * How long an idle kept-alive connection stays open between requests. A waiting claim is a
 * request in progress (it sends nothing for up to CLAIM_MAX_WAIT_MS), which no timeout of this
 * listener cuts short: it sets no socket inactivity timeout, since a blob put may also be silent
 * while its bytes are stored. A TCP proxy in front must allow more idle time than
 * CLAIM_MAX_WAIT_MS (docs/scale-out.md).
 */
export const HOST_LISTENER_KEEP_ALIVE_MS = 72_000;

export interface HostListenerOptions {
  /** KILN_HOST_LISTEN: where it listens (port 0: any free port). */
  readonly host: string;
  readonly port: number;
  /** KILN_HOST_TLS_NAMES: the DNS names and IP addresses its server certificate is valid for. */
  readonly names: readonly string[];
  /** KILN_HOST_CERTIFICATE_SECONDS: how long a host's client certificate is valid. */
  readonly certificateLifetimeSeconds: number;
  /** How long the listener's own certificate is valid (default LISTENER_CERTIFICATE_SECONDS). */
  readonly listenerLifetimeSeconds?: number;
  /** The clock hosts' certificates (and enrollment tokens) are issued and judged by (default: the app's). */
  readonly clock?: Clock;
  /**
   * The clock the listener's own server certificate is issued and renewed by (default: `clock`).
   * Hosts' TLS judges that certificate by their machines' time, never by kiln's clock, so a test
   * whose clock is set apart from the machine's passes the machine's here; in a deployment both
   * are the machine's.
   */
  readonly serverCertificateClock?: Clock;
  readonly log: Logger;
  /** Hears the host service's events (claims answered and waiting, jobs it could not place). */
  readonly onEvent?: (event: HostServiceEvent) => void;
}

export interface HostListener {
  /** `https://<host>:<port>`, what a kiln-host's KILN_ENDPOINT names. */
  readonly origin: string;
  readonly port: number;
  readonly ca: CertificateAuthority;
  /** The server certificate in use, for the inventory and tests. */
  current(): ListenerCertificate;
  close(): Promise<void>;
}

/**
 * The host protocol's own listener: HTTPS with mutual TLS, serving only the `/host/v1` routes
 * (http-host-routes.ts). Its server certificate is issued by the deployment's CA (created on
 * first need) for the configured names, and every connection is asked for a client certificate
 * (`requestCert`). The handshake does not reject a connection without one — the enrollment and
 * the CA certificate need none, and the routes refuse with a typed Refusal document rather than
 * a reset — so each route authenticates the presented certificate itself, at every request. The
 * server certificate is replaced before it expires without a restart (`setSecureContext`).
 */
export async function startHostListener(deps: AppDeps, options: HostListenerOptions): Promise<HostListener> {
  if (deps.secrets === undefined)
    throw new Error("the host listener needs the master key (the CA's key is sealed under it)");
  const secrets = deps.secrets;
  const clock = options.clock ?? deps.clock;
  const serverClock = options.serverCertificateClock ?? clock;
  const ca = await CertificateAuthority.load(deps.storage, secrets, serverClock.now());
  const lifetimeSeconds = options.listenerLifetimeSeconds ?? LISTENER_CERTIFICATE_SECONDS;
  const obtain = () =>
    listenerCertificate(deps.storage, ca, secrets, { names: options.names, lifetimeSeconds, now: serverClock.now() });
  let current = await obtain();
  const context = (certificate: ListenerCertificate) => ({
    key: certificate.keyPem,
    cert: certificate.certificatePem,
    ca: [ca.certificatePem],
  });
  const app = Fastify({
    https: { ...context(current), requestCert: true, rejectUnauthorized: false, minVersion: "TLSv1.2" },
    logger: false,
    routerOptions: { ignoreTrailingSlash: false },
    frameworkErrors,
    clientErrorHandler,
    return503OnClosing: true,
    keepAliveTimeout: HOST_LISTENER_KEEP_ALIVE_MS,
    connectionTimeout: 0,
  });
  const plain = app as unknown as FastifyInstance;
  installErrorBoundary(plain);
  installRequestValidators(plain);
  installBodyParsers(plain);
  // Waiting claims wake on storage notifications: the process's own port (main.ts shares one),
  // else one of the listener's, stopped with it.
  const own =
    deps.notifications === undefined
      ? startJobNotifications(deps.storage, { clock: deps.clock, log: options.log })
      : null;
  const service = registerHostProtocolRoutes(
    plain,
    { ...deps, ...(own === null ? {} : { notifications: own }) },
    { ca, clock, certificateLifetimeSeconds: options.certificateLifetimeSeconds },
    { log: options.log, ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }) },
  );
  // Waiting claims end (answered nothing) before the server closes, rather than holding it up.
  plain.addHook("preClose", async () => {
    service.close();
  });
  plain.addHook("onClose", async () => {
    await own?.stop();
  });
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  if (address === null || typeof address === "string") throw new Error("the host listener has no port");
  const renewal: PeriodicLoop = startPeriodicLoop({
    name: "host listener certificate",
    clock: serverClock,
    everyMs: LISTENER_RENEWAL_CHECK_MS,
    log: options.log,
    run: async () => {
      if (!dueForRenewal(current, serverClock.now())) return;
      const next = await obtain();
      (app.server as HttpsServer).setSecureContext(context(next));
      current = next;
      options.log.info({ notAfter: next.notAfter }, "host listener certificate renewed");
    },
  });
  const hostPart = options.host.includes(":") ? `[${options.host}]` : options.host;
  return {
    origin: `https://${hostPart}:${address.port}`,
    port: address.port,
    ca,
    current: () => current,
    close: async () => {
      await renewal.stop();
      await app.close();
    },
  };
}
