import { type Static, type TSchema, Type } from "@sinclair/typebox";
import {
  HostFleetPoll,
  HostFleetWork,
  HostInitializationReport,
  HostInitializationReportAnswer,
  HostReadAnswer,
  HostReadAnswerAck,
} from "./records/host-fleet-protocol.js";
import {
  AppendAnswer,
  AttemptClaim,
  AttemptClaimAnswer,
  AttemptRef,
  FinishAnswer,
  HeartbeatAnswer,
  HeldRegistryCredential,
  HostEnrollment,
  LogLine,
  RegistryCredentialGrant,
} from "./records/host-protocol.js";
import { Sha256Hex } from "./records/sources.js";

/**
 * The host protocol over HTTP, for a remote `kiln-host`: one route per message, each body and
 * answer a contract schema (records/host-protocol.ts wrapped in an envelope), so the server's
 * routes (server/src/web/host-protocol/http-host-routes.ts) and the host's client
 * (host/src/remote/http-host-protocol.ts) are both read from this table and copy nothing.
 * These routes are internal: they are not tenant operations and are not in the catalogue or
 * the OpenAPI document. They are served only on the control plane's host listener, over HTTPS
 * with mutual TLS: every request but the enrollment and the CA certificate is authenticated by
 * the host's client certificate, issued by the control plane's own CA; the enrollment carries
 * the one-time enrollment token (`Authorization: Bearer kiln_enroll_…`) and the host's
 * certificate signing request.
 */
export const HOST_PROTOCOL_PREFIX = "/host/v1";

const HostId = () => Type.String({ minLength: 1, maxLength: 128, description: "The host's identity." });

/** The claim's body and answer are the protocol's own records (records/host-protocol.ts), unwrapped. */
export const HostClaimRequest = AttemptClaim;
export type HostClaimRequest = AttemptClaim;

export const HostClaimAnswer = AttemptClaimAnswer;
export type HostClaimAnswer = AttemptClaimAnswer;

export const HostHeartbeatAnswer = Type.Object({ answer: HeartbeatAnswer }, { additionalProperties: false });
export type HostHeartbeatAnswer = Static<typeof HostHeartbeatAnswer>;

export const HostLogAppend = Type.Object(
  { ref: AttemptRef, lines: Type.Array(LogLine) },
  { additionalProperties: false },
);
export type HostLogAppend = Static<typeof HostLogAppend>;

export const HostAppendAnswer = Type.Object({ answer: AppendAnswer }, { additionalProperties: false });
export type HostAppendAnswer = Static<typeof HostAppendAnswer>;

/**
 * The attempt's result. The envelope is checked here; the result itself is checked by the
 * host service against AttemptResult, which fails the job (cause infrastructure, naming the
 * violation) rather than leaving a refused report to a lapsed lease — as in-process.
 */
export const HostFinishReport = Type.Object(
  { ref: AttemptRef, result: Type.Object({}, { additionalProperties: true }) },
  { additionalProperties: false },
);
export type HostFinishReport = Static<typeof HostFinishReport>;

export const HostFinishAnswer = Type.Object({ answer: FinishAnswer }, { additionalProperties: false });
export type HostFinishAnswer = Static<typeof HostFinishAnswer>;

export const HostRegistryCredentialsAnswer = Type.Object(
  { grants: Type.Array(RegistryCredentialGrant) },
  { additionalProperties: false },
);
export type HostRegistryCredentialsAnswer = Static<typeof HostRegistryCredentialsAnswer>;

export const HostCredentialAcknowledgement = Type.Object(
  { hostId: HostId(), held: Type.Array(HeldRegistryCredential) },
  { additionalProperties: false },
);
export type HostCredentialAcknowledgement = Static<typeof HostCredentialAcknowledgement>;

/** What a blob put stored: its SHA-256 and length. */
export const HostStoredBlob = Type.Object(
  { sha256: Sha256Hex(), bytes: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);
export type HostStoredBlob = Static<typeof HostStoredBlob>;

/**
 * A certificate signing request (PKCS #10, PEM) for a key the host made itself, which never
 * leaves the host: the body of the enrollment and of a renewal.
 */
export const HostCertificateRequest = Type.Object(
  {
    csr: Type.String({
      minLength: 1,
      maxLength: 16384,
      description: "PEM `CERTIFICATE REQUEST` for an ECDSA P-256 key; its subject is ignored.",
    }),
  },
  { additionalProperties: false },
);
export type HostCertificateRequest = Static<typeof HostCertificateRequest>;

/** The host's client certificate, as an enrollment or a renewal answers it, with the CA it pins. */
export const HostCertificateIssued = Type.Object(
  {
    hostId: HostId(),
    certificate: Type.String({ description: "PEM certificate; subject CN = the host id." }),
    caCertificate: Type.String({ description: "PEM certificate of the control plane's host CA." }),
    notAfter: Type.String({ format: "date-time", description: "When the certificate expires." }),
  },
  { additionalProperties: false },
);
export type HostCertificateIssued = Static<typeof HostCertificateIssued>;

/** The control plane's host CA certificate (public; a host pins it before sending a secret). */
export const HostCaCertificate = Type.Object(
  {
    caCertificate: Type.String({ description: "PEM certificate of the control plane's host CA." }),
    sha256: Sha256Hex(),
  },
  { additionalProperties: false },
);
export type HostCaCertificate = Static<typeof HostCaCertificate>;

/** Which host a client certificate belongs to. */
export const HostIdentity = Type.Object({ hostId: HostId() }, { additionalProperties: false });
export type HostIdentity = Static<typeof HostIdentity>;

/** One JSON message of the protocol: its route, body schema and answer schema (null: 204). */
export interface HostJsonRoute {
  readonly method: "POST";
  readonly path: string;
  readonly body: TSchema;
  readonly answer: TSchema | null;
}

/** The JSON messages, by the HostProtocol method each binds. */
export const HOST_PROTOCOL_ROUTES = {
  enroll: { method: "POST", path: `${HOST_PROTOCOL_PREFIX}/enroll`, body: HostEnrollment, answer: null },
  claim: { method: "POST", path: `${HOST_PROTOCOL_PREFIX}/claim`, body: HostClaimRequest, answer: HostClaimAnswer },
  heartbeat: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/heartbeat`,
    body: AttemptRef,
    answer: HostHeartbeatAnswer,
  },
  appendLogs: { method: "POST", path: `${HOST_PROTOCOL_PREFIX}/logs`, body: HostLogAppend, answer: HostAppendAnswer },
  finish: { method: "POST", path: `${HOST_PROTOCOL_PREFIX}/finish`, body: HostFinishReport, answer: HostFinishAnswer },
  registryCredentials: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/registry-credentials`,
    body: AttemptRef,
    answer: HostRegistryCredentialsAnswer,
  },
  acknowledgeCredentials: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/credential-acknowledgements`,
    body: HostCredentialAcknowledgement,
    answer: null,
  },
  fleetPoll: { method: "POST", path: `${HOST_PROTOCOL_PREFIX}/fleet/poll`, body: HostFleetPoll, answer: HostFleetWork },
  reportInitialization: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/fleet/initialization`,
    body: HostInitializationReport,
    answer: HostInitializationReportAnswer,
  },
  answerRead: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/fleet/reads`,
    body: HostReadAnswer,
    answer: HostReadAnswerAck,
  },
} as const satisfies Record<string, HostJsonRoute>;

/**
 * Blobs travel as raw bytes (`application/octet-stream`), never inside JSON: GET
 * `…/blobs/<sha256>` answers the blob's bytes; PUT `…/blobs` takes them and answers
 * HostStoredBlob. The enrollment (POST, enrollment token, HostCertificateRequest) and the
 * renewal (POST `…/certificate`, the current client certificate, HostCertificateRequest) answer
 * HostCertificateIssued; GET `…/ca` (no authentication) answers HostCaCertificate; GET
 * `…/identity` answers HostIdentity.
 */
export const HOST_PROTOCOL_PATHS = {
  blob: `${HOST_PROTOCOL_PREFIX}/blobs/:sha256`,
  blobs: `${HOST_PROTOCOL_PREFIX}/blobs`,
  enrollment: `${HOST_PROTOCOL_PREFIX}/enrollment`,
  certificate: `${HOST_PROTOCOL_PREFIX}/certificate`,
  ca: `${HOST_PROTOCOL_PREFIX}/ca`,
  identity: `${HOST_PROTOCOL_PREFIX}/identity`,
} as const;

/** The largest blob a host may put in one request (artifacts, raw cargo output). */
export const MAX_HOST_BLOB_BYTES = 4 * 2 ** 30;
/** The largest JSON message (a finish report of a very large test suite; a log batch). */
export const MAX_HOST_MESSAGE_BYTES = 64 * 2 ** 20;
