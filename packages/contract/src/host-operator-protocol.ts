import { type Static, Type } from "@sinclair/typebox";
import { HOST_PROTOCOL_PREFIX, type HostJsonRoute } from "./host-protocol-http.js";
import { Nullable } from "./schema-helpers.js";

/**
 * Host health and recovery messages of the host protocol over HTTP (issue 18): a `kiln-host`'s
 * health report, and the host operator's messages — readiness, claiming a recorded recovery,
 * recording its plan, beginning and ending each step, finishing it. Recovery steps run on the
 * host's side, in the host operator; the control plane only records and answers. Both sides
 * read this table (server/src/web/host-protocol/http-host-operator-routes.ts and
 * host/src/operator/host-operator-client.ts). Each request carries the host's credential.
 */

const HostId = () => Type.String({ minLength: 1, maxLength: 128, description: "The host's identity." });
const Operation = () => Type.String({ pattern: "^[a-z0-9][a-z0-9-]{0,39}$", description: "A recovery operation." });
const StepName = () => Type.String({ pattern: "^[a-z][a-z0-9_]{0,63}$", description: "A recovery step's name." });
const Detail = () => Type.String({ maxLength: 4000 });
const Iso = () => Type.String({ minLength: 20, maxLength: 40, description: "An ISO-8601 UTC instant." });

/** A kiln-host's health: its liveness, the disk under its data dir, a failed initialization step. */
export const HostHealthReport = Type.Object(
  {
    hostId: HostId(),
    diskFreeBytes: Type.Integer({ minimum: 0 }),
    diskTotalBytes: Type.Integer({ minimum: 0 }),
    failedInitializationStep: Nullable(StepName(), "An initialization step that failed on this host; null when none."),
  },
  { additionalProperties: false },
);
export type HostHealthReport = Static<typeof HostHealthReport>;

/**
 * One step the host operator ran as it started (its activation): loading the provisioning
 * bundle, loading the recovery binding, checking the bound provider identity is readable.
 */
export const HostActivationStep = Type.Object(
  {
    step: StepName(),
    outcome: Type.Union([Type.Literal("succeeded"), Type.Literal("failed"), Type.Literal("skipped")]),
    startedAt: Iso(),
    finishedAt: Iso(),
    detail: Nullable(Detail()),
  },
  { additionalProperties: false },
);
export type HostActivationStep = Static<typeof HostActivationStep>;

/** The host operator's readiness. The bound provider identity itself is never sent. */
export const HostOperatorReadiness = Type.Object(
  {
    hostId: HostId(),
    instance: Type.String({ minLength: 1, maxLength: 128 }),
    startedAt: Iso(),
    environment: Type.String({ minLength: 1, maxLength: 128 }),
    provisioningBundleSha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
    recoveryBindingLoaded: Type.Boolean(),
    installation: Nullable(Type.String({ maxLength: 256 }), "The installation the recovery binding configures."),
    providerIdentityReadable: Type.Boolean(),
    provider: Type.Union([Type.Literal("local"), Type.Literal("bare-metal")]),
    providerServiceName: Type.String({ pattern: "^[a-z0-9][a-z0-9-]*$", maxLength: 128 }),
    boot: Type.String({ minLength: 1, maxLength: 128, description: "The boot the operator runs in." }),
    // Optional so that a host operator from before activations were recorded still reports
    // readiness; the control plane then derives the ledger from the readiness fields.
    activation: Type.Optional(
      Type.Object(
        { steps: Type.Array(HostActivationStep, { maxItems: 16 }) },
        { additionalProperties: false, description: "The steps this start of the host operator ran, in order." },
      ),
    ),
  },
  { additionalProperties: false },
);
export type HostOperatorReadiness = Static<typeof HostOperatorReadiness>;

export const HostRecoveryClaimRequest = Type.Object(
  { hostId: HostId(), instance: Type.String({ minLength: 1, maxLength: 128 }) },
  { additionalProperties: false },
);
export type HostRecoveryClaimRequest = Static<typeof HostRecoveryClaimRequest>;

/** A recovery for the host operator to run: its plan so far, and which steps already ended. */
export const ClaimedHostRecovery = Type.Object(
  {
    operation: Operation(),
    incident: Nullable(Type.String()),
    rescueRead: Type.Boolean(),
    rescueSshPublicKey: Nullable(Type.String()),
    steps: Type.Array(
      Type.Object(
        { position: Type.Integer({ minimum: 0 }), step: StepName(), state: Type.String() },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type ClaimedHostRecovery = Static<typeof ClaimedHostRecovery>;

export const HostRecoveryClaimAnswer = Type.Object(
  { recovery: Nullable(ClaimedHostRecovery, "The recovery to run, or null when none is recorded.") },
  { additionalProperties: false },
);
export type HostRecoveryClaimAnswer = Static<typeof HostRecoveryClaimAnswer>;

export const HostRecoveryPlan = Type.Object(
  { hostId: HostId(), operation: Operation(), steps: Type.Array(StepName(), { maxItems: 32 }) },
  { additionalProperties: false },
);
export type HostRecoveryPlan = Static<typeof HostRecoveryPlan>;

export const HostRecoveryStepBegin = Type.Object(
  { hostId: HostId(), operation: Operation(), position: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);
export type HostRecoveryStepBegin = Static<typeof HostRecoveryStepBegin>;

/** `proceed`: run the step; `await_approval`: a destructive step no approval names yet — ask later. */
export const HostRecoveryStepAnswer = Type.Object(
  {
    answer: Type.Union([Type.Literal("proceed"), Type.Literal("await_approval")]),
    reason: Type.Optional(Detail()),
  },
  { additionalProperties: false },
);
export type HostRecoveryStepAnswer = Static<typeof HostRecoveryStepAnswer>;

export const HostRecoveryStepEnd = Type.Object(
  {
    hostId: HostId(),
    operation: Operation(),
    position: Type.Integer({ minimum: 0 }),
    outcome: Type.Union([Type.Literal("succeeded"), Type.Literal("failed"), Type.Literal("skipped")]),
    detail: Nullable(Detail()),
  },
  { additionalProperties: false },
);
export type HostRecoveryStepEnd = Static<typeof HostRecoveryStepEnd>;

export const HostRecoveryFinish = Type.Object(
  {
    hostId: HostId(),
    operation: Operation(),
    outcome: Type.Union([Type.Literal("succeeded"), Type.Literal("failed")]),
    detail: Nullable(Detail()),
  },
  { additionalProperties: false },
);
export type HostRecoveryFinish = Static<typeof HostRecoveryFinish>;

export const HOST_OPERATOR_ROUTES = {
  health: { method: "POST", path: `${HOST_PROTOCOL_PREFIX}/health`, body: HostHealthReport, answer: null },
  readiness: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/operator/readiness`,
    body: HostOperatorReadiness,
    answer: null,
  },
  claimRecovery: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/operator/recoveries/claim`,
    body: HostRecoveryClaimRequest,
    answer: HostRecoveryClaimAnswer,
  },
  planRecovery: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/operator/recoveries/plan`,
    body: HostRecoveryPlan,
    answer: null,
  },
  beginStep: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/operator/recoveries/steps/begin`,
    body: HostRecoveryStepBegin,
    answer: HostRecoveryStepAnswer,
  },
  endStep: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/operator/recoveries/steps/end`,
    body: HostRecoveryStepEnd,
    answer: null,
  },
  finishRecovery: {
    method: "POST",
    path: `${HOST_PROTOCOL_PREFIX}/operator/recoveries/finish`,
    body: HostRecoveryFinish,
    answer: null,
  },
} as const satisfies Record<string, HostJsonRoute>;
