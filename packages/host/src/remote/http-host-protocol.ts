import { createHash } from "node:crypto";
import { Agent } from "node:https";
import {
  CLAIM_MAX_WAIT_MS,
  HOST_PROTOCOL_PATHS,
  HOST_PROTOCOL_ROUTES,
  type HostAppendAnswer,
  type HostCaCertificate,
  type HostCertificateIssued,
  type HostClaimAnswer,
  type HostFinishAnswer,
  type HostFleetWork,
  type HostHeartbeatAnswer,
  type HostIdentity,
  type HostInitializationReportAnswer,
  type HostReadAnswerAck,
  type HostRegistryCredentialsAnswer,
  type HostStoredBlob,
} from "@kiln/contract";
import type { HostProtocol } from "../agent/host-protocol.js";
import type { HostTlsIdentity } from "./host-tls-identity.js";
import { type HostFetch, httpsFetch } from "./https-fetch.js";

/** A request the control plane answered with a refusal (its Refusal document's code and detail). */
export class HostProtocolRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(`the control plane refused (${status} ${code}): ${detail}`);
    this.name = "HostProtocolRefusal";
  }
}

export interface HttpHostProtocolOptions {
  /** The control plane's host listener (KILN_ENDPOINT), e.g. `https://kiln.example:7443`. */
  readonly endpoint: string;
  /** The host's key, client certificate and pinned CA: every request is mutual TLS. */
  readonly identity: Pick<HostTlsIdentity, "fetch">;
  /** Gives up on a request the control plane does not answer within this long (default 120 s). */
  readonly timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 120_000;

const sha256Of = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/**
 * The host protocol over HTTP (contract/src/host-protocol-http.ts), for a `kiln-host` on
 * another machine than its control plane. Like the in-process binding it only moves messages:
 * each method is one mutual-TLS request under the host's certificate, JSON bodies and answers as the
 * contract defines them, blobs as raw bytes — a fetched blob is checked against the digest it
 * was asked by, a put one against the digest the control plane answers. A refusal is thrown
 * as HostProtocolRefusal; the agent reports it as it reports any failed message.
 */
export function httpHostProtocol(options: HttpHostProtocolOptions): HostProtocol {
  const call = requester(options.endpoint, options.identity.fetch, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const json = async <T>(
    route: { path: string },
    body: unknown,
    more: { withdraw?: AbortSignal; waitMs?: number } = {},
  ): Promise<T> => {
    const response = await call(
      route.path,
      {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        ...(more.withdraw === undefined ? {} : { withdraw: more.withdraw }),
      },
      more.waitMs ?? 0,
    );
    return (response.status === 204 ? undefined : await response.json()) as T;
  };
  const routes = HOST_PROTOCOL_ROUTES;
  return {
    enroll: (host) => json<void>(routes.enroll, host),
    claim: async (hostId, freeVcpus, freeDiskBytes) =>
      (await json<HostClaimAnswer>(routes.claim, { hostId, freeVcpus, freeDiskBytes })).placement,
    // The long-poll: the request may be held for the wait, so its timeout is the wait's on top.
    claimWaiting: (request, withdraw) =>
      json<HostClaimAnswer>(routes.claim, request, {
        withdraw,
        waitMs: Math.min(request.waitMs ?? 0, CLAIM_MAX_WAIT_MS),
      }),
    heartbeat: async (ref) => (await json<HostHeartbeatAnswer>(routes.heartbeat, ref)).answer,
    appendLogs: async (ref, lines) => (await json<HostAppendAnswer>(routes.appendLogs, { ref, lines })).answer,
    finish: async (ref, result) => (await json<HostFinishAnswer>(routes.finish, { ref, result })).answer,
    registryCredentials: async (ref) =>
      (await json<HostRegistryCredentialsAnswer>(routes.registryCredentials, ref)).grants,
    acknowledgeCredentials: (hostId, held) => json<void>(routes.acknowledgeCredentials, { hostId, held }),
    fleetPoll: (poll) => json<HostFleetWork>(routes.fleetPoll, poll),
    reportInitialization: async (report) =>
      (await json<HostInitializationReportAnswer>(routes.reportInitialization, report)).answer,
    answerRead: async (answer) => (await json<HostReadAnswerAck>(routes.answerRead, answer)).answer,
    fetchBlob: async (sha256) => {
      const response = await call(HOST_PROTOCOL_PATHS.blob.replace(":sha256", sha256), {});
      const bytes = Buffer.from(await response.arrayBuffer());
      const got = sha256Of(bytes);
      if (got !== sha256) throw new Error(`blob ${sha256} arrived with the content of ${got}`);
      return bytes;
    },
    putBlob: async (bytes) => {
      const response = await call(HOST_PROTOCOL_PATHS.blobs, {
        method: "PUT",
        headers: { "content-type": "application/octet-stream" },
        body: bytes,
      });
      const stored = (await response.json()) as HostStoredBlob;
      const sent = sha256Of(bytes);
      if (stored.sha256 !== sent || stored.bytes !== bytes.byteLength) {
        throw new Error(`the control plane stored ${stored.sha256} (${stored.bytes} bytes) for a blob ${sent}`);
      }
      return stored;
    },
  };
}

/**
 * The control plane's host CA certificate, read before the host trusts anything: over TLS that
 * verifies nothing yet (there is nothing to verify against) and carries no secret. The caller
 * checks it against the operator's pin (KILN_HOST_CA_SHA256) where one is given.
 */
export async function fetchCaCertificate(endpoint: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<HostCaCertificate> {
  const unverified = new Agent({ rejectUnauthorized: false });
  try {
    const response = await requester(
      endpoint,
      httpsFetch(() => unverified),
      timeoutMs,
    )(HOST_PROTOCOL_PATHS.ca, {});
    return (await response.json()) as HostCaCertificate;
  } finally {
    unverified.destroy();
  }
}

/**
 * Redeems a one-time enrollment token (`kiln_enroll_…`: `kiln-server admin host enrollment-token`,
 * or the bootstrap credential operator.hosts.initialization.start answers) with a signing request
 * for the host's own key, over TLS that trusts only `caCertificatePem` (the pinned CA). Answers
 * the host's first certificate, once.
 */
export async function requestEnrollment(
  endpoint: string,
  input: { token: string; csrPem: string; caCertificatePem: string },
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<HostCertificateIssued> {
  const pinned = new Agent({ ca: [input.caCertificatePem], minVersion: "TLSv1.2" });
  try {
    const response = await requester(
      endpoint,
      httpsFetch(() => pinned),
      timeoutMs,
    )(HOST_PROTOCOL_PATHS.enrollment, {
      method: "POST",
      headers: { authorization: `Bearer ${input.token}`, "content-type": "application/json" },
      body: JSON.stringify({ csr: input.csrPem }),
    });
    return (await response.json()) as HostCertificateIssued;
  } finally {
    pinned.destroy();
  }
}

/** A new certificate for a new key's signing request, over the host's current certificate. */
export async function requestRenewal(
  endpoint: string,
  identity: Pick<HostTlsIdentity, "fetch">,
  csrPem: string,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<HostCertificateIssued> {
  const response = await requester(
    endpoint,
    identity.fetch,
    timeoutMs,
  )(HOST_PROTOCOL_PATHS.certificate, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ csr: csrPem }),
  });
  return (await response.json()) as HostCertificateIssued;
}

/** The host a certificate belongs to, as the control plane knows it (and a check it is still taken). */
export async function hostIdentityOf(
  endpoint: string,
  identity: Pick<HostTlsIdentity, "fetch">,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<string> {
  const response = await requester(endpoint, identity.fetch, timeoutMs)(HOST_PROTOCOL_PATHS.identity, {});
  return ((await response.json()) as HostIdentity).hostId;
}

/**
 * One request to the control plane; a non-2xx answer is thrown as a HostProtocolRefusal. It gives
 * up after `timeoutMs`, plus `heldMs` for a request the control plane may hold (a waiting claim).
 */
export function requester(endpoint: string, fetchImpl: HostFetch, timeoutMs: number) {
  const origin = endpoint.replace(/\/+$/, "");
  return async (path: string, init: NonNullable<Parameters<HostFetch>[1]>, heldMs = 0): Promise<Response> => {
    const response = await fetchImpl(`${origin}${path}`, { ...init, signal: AbortSignal.timeout(timeoutMs + heldMs) });
    if (response.ok) return response;
    const text = await response.text();
    let code = "unknown";
    let detail = text.slice(0, 500);
    try {
      const document = JSON.parse(text) as { code?: unknown; detail?: unknown };
      if (typeof document.code === "string") code = document.code;
      if (typeof document.detail === "string") detail = document.detail;
    } catch {
      // Not a Refusal document (a proxy's page): its text is the detail.
    }
    throw new HostProtocolRefusal(response.status, code, detail);
  };
}
