import { type TProperties, type TSchema, Type } from "@sinclair/typebox";
import { Closed, Nullable, Open, Timestamp } from "../schema-helpers.js";
import type { SIZES } from "./jobs.js";

/**
 * Operator records (spec, "Operator records"), and the tenant controls an operator
 * sets. Open records list the members the spec names and admit more; their inline
 * members carry no title.
 */

/** Identifiers on the operator surface: hosts, jobs, VMs, incidents, anomalies, operations. */
export const OPERATOR_IDENTIFIER_PATTERN = "^[A-Za-z0-9_.:-]{1,128}$";
/** A tenant's identifier as named in operator paths. */
export const TENANT_IDENTIFIER_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$";
/** operator.hosts.recovery.get `operation`. */
export const RECOVERY_OPERATION_PATTERN = "^[a-z0-9][a-z0-9-]{0,39}$";
/** operator.hosts.activations.get `operation`. */
export const ACTIVATION_OPERATION_PATTERN = "^[a-z0-9][a-z0-9-]{0,62}$";
/** HostRecoveryInvocation `confirmation`: `recover-boot:<provider_service_name>:preserve-root-and-srv`. */
export const RECOVERY_CONFIRMATION_PATTERN = "^recover-boot:[a-z0-9][a-z0-9-]*:preserve-root-and-srv$";
const SHA256_PATTERN = "^[0-9a-f]{64}$";

const Identifier = (description: string) => Type.String({ pattern: OPERATOR_IDENTIFIER_PATTERN, description });
const Sha256 = (description: string) => Type.String({ pattern: SHA256_PATTERN, description });
/** An inline open object (no title): the spec leaves its further members unshown. */
const OpenItem = <T extends TProperties>(properties: T, description: string) =>
  Type.Object(properties, { additionalProperties: true, description });
const Note = () => Type.String({ maxLength: 4000, description: "Free-text note recorded in the operator audit." });
/**
 * Revisions are `integer` columns (PostgreSQL's 4 bytes): a larger one names no revision, and
 * would fail in the database rather than be refused (reliability trial T14 found it).
 */
const Revision = (description: string) => Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1, description });

// ---------------------------------------------------------------------------
// Shared inline shapes
// ---------------------------------------------------------------------------

const EvidenceItem = OpenItem(
  {
    kind: Type.String({ description: "What was observed, e.g. `duplicate_settlement`, `unit_timeout`." }),
    detail: Type.String({ description: "The observation in words, with its measured value." }),
    reference: Type.Optional(
      Type.String({ description: "The record the observation came from (job, attempt, host, receipt)." }),
    ),
    observed_at: Type.Optional(Timestamp("When it was observed.")),
  },
  "One piece of evidence behind a flag.",
);

const Disposition = OpenItem(
  {
    disposition: Type.String({ description: "The disposition recorded (see the disposition request)." }),
    note: Nullable(Type.String(), "The note given with it."),
    disposed_by: Type.String({ description: "Operator principal that recorded it." }),
    disposed_at: Timestamp("When it was recorded."),
  },
  "An operator's disposition of a flag.",
);

const DISPOSITIONS = ["acknowledged", "confirmed", "dismissed"] as const;
const DispositionValue = Type.Union(
  DISPOSITIONS.map((d) => Type.Literal(d)),
  {
    description:
      "`acknowledged` (seen, under investigation), `confirmed` (a real fault), `dismissed` (not a fault; the flag is closed).",
  },
);

const StepState = Type.Union(
  ["pending", "awaiting_approval", "running", "succeeded", "failed", "skipped"].map((s) => Type.Literal(s)),
  { description: "A step's state; `awaiting_approval` for a destructive step no approval names yet." },
);

const LedgerStep = OpenItem(
  {
    step: Type.String({ description: "The step's name, e.g. `read_journal`, `power_cycle`, `reinstallation`." }),
    state: StepState,
    destructive: Type.Boolean({ description: "Whether the step destroys data; such a step waits for an approval." }),
    started_at: Nullable(Timestamp(), "When it began; null while pending."),
    finished_at: Nullable(Timestamp(), "When it finished; null until then."),
    detail: Type.Optional(Type.String({ description: "What the step did or why it failed." })),
  },
  "One entry of a step ledger, in the order the steps run.",
);
const StepLedger = (description: string) => Type.Array(LedgerStep, { description });

const Attribution = OpenItem(
  {
    actor: Type.String({ description: "Operator principal, or `system` for an automatic action." }),
    action: Type.String({ description: "The operation or automatic action, e.g. `operator.hosts.drain`." }),
    at: Timestamp(),
    reason: Type.Optional(Type.String({ description: "Why, as recorded." })),
  },
  "Who did what to the host, and when.",
);

const HostOperation = OpenItem(
  {
    operation: Type.String({ description: "The host operation's identifier." }),
    holder: Nullable(Type.String(), "The process or operator holding the host operation; null when none holds it."),
    revision: Revision("The host operation revision a mutation names as expected_revision."),
  },
  "The host operation and its holder.",
);

const Admission = OpenItem(
  {
    open: Type.Boolean({ description: "Whether the host admits new placements." }),
    closed_by: Nullable(Type.String(), "Who closed admission (an operator, or `host-operator`); null while open."),
    closed_at: Nullable(Timestamp(), "When admission was closed; null while open."),
    closure_reason: Nullable(Type.String(), "The host operator's recorded reason for the closure; null while open."),
  },
  "The host's admission and the host operator's closure of it.",
);

// ---------------------------------------------------------------------------
// Anomalies
// ---------------------------------------------------------------------------

export const OperatorAnomaly = Open(
  "OperatorAnomaly",
  {
    id: Identifier("The flag's identifier."),
    flag: Type.String({
      description:
        "What was flagged, e.g. `cpu_saturated_without_output` (a miner: CPU pinned for the whole wall clock, no cargo output), `submission_burst`.",
    }),
    tenant: Type.Optional(Type.String({ description: "Tenant the flag concerns, where one does." })),
    rule: Type.Optional(Type.String({ description: "The rule that raised the flag, with its thresholds." })),
    job: Type.Optional(Type.String({ description: "Job the flag concerns, where one does." })),
    raised_at: Type.Optional(Timestamp("When the flag was raised.")),
    evidence: Type.Array(EvidenceItem),
    disposition: Nullable(Disposition, "The current disposition; null until an operator records one."),
  },
  { description: "An anomaly flag with its evidence and disposition." },
);

export const OperatorAnomalies = Type.Array(OperatorAnomaly, {
  title: "OperatorAnomalies",
  description: "Anomaly flags, undisposed first, then newest first.",
});

const RecoveryAvailable = OpenItem(
  {
    kind: Type.String({ description: "The recovery, e.g. `recover-boot`." }),
    confirmation: Type.String({ description: "The exact confirmation its invocation requires." }),
    operation: Nullable(Type.String(), "The recovery operation once begun; null before."),
    state: Type.Optional(Type.String({ description: "The recovery's state once begun." })),
  },
  "The recovery available for the anomaly's host.",
);

export const PlatformAnomaly = Open(
  "PlatformAnomaly",
  {
    id: Identifier("The platform anomaly's identifier."),
    kind: Type.String({ description: "What the platform observed, e.g. `host_unresponsive`, `boot_wedged`." }),
    host: Type.Optional(Type.String({ description: "The host it concerns, where one does." })),
    raised_at: Type.Optional(Timestamp("When it was raised.")),
    evidence: Type.Array(EvidenceItem),
    recovery: Nullable(RecoveryAvailable, "The recovery available for its host; null when none is."),
    step_ledger: Type.Optional(StepLedger("That recovery's step ledger, once begun.")),
    disposition: Nullable(Disposition, "The current disposition; null until an operator records one."),
  },
  { description: "A platform anomaly: evidence, the recovery available for its host and its ledger, disposition." },
);

export const PlatformAnomalies = Type.Array(PlatformAnomaly, {
  title: "PlatformAnomalies",
  description: "Platform anomalies, undisposed first, then newest first.",
});

export const FlagDispositionRequest = Open(
  "FlagDispositionRequest",
  { disposition: DispositionValue, note: Type.Optional(Note()) },
  { description: "Records an operator's disposition of an anomaly flag." },
);

export const PlatformAnomalyDispositionRequest = Open(
  "PlatformAnomalyDispositionRequest",
  { disposition: DispositionValue, note: Type.Optional(Note()) },
  {
    description:
      "Records an operator's disposition of a platform anomaly; it changes no job, attempt, host or admission.",
  },
);

// ---------------------------------------------------------------------------
// Hosts, transitions, placements
// ---------------------------------------------------------------------------

const HostState = Type.String({
  description: "The host's state, e.g. `initializing`, `serving`, `draining`, `drained`, `impaired`.",
});

export const HostInventoryView = Open(
  "HostInventoryView",
  {
    host: Identifier("The host's identifier."),
    state: HostState,
    revision: Revision("The host's revision; it moves with every recorded change of the host."),
    deployed_release: Nullable(Type.String(), "The release deployed on the host; null before any deployment."),
    last_attribution: Nullable(Attribution, "The last recorded change of the host; null when none."),
  },
  { description: "One host as the inventory shows it." },
);

export const HostInventory = Type.Array(HostInventoryView, {
  title: "HostInventory",
  description: "Every enrolled host.",
});

export const HostDetail = Open(
  "HostDetail",
  {
    host: Identifier("The host's identifier."),
    serving_state: HostState,
    drain_attribution: Nullable(Attribution, "Who drained the host and why; null while it is not drained."),
    blockers: Type.Array(
      OpenItem(
        {
          kind: Type.String({
            description: "What keeps the host from serving, e.g. `admission_closed`, `open_incident`.",
          }),
          detail: Type.String(),
          since: Type.Optional(Timestamp()),
        },
        "One thing keeping the host from serving or draining.",
      ),
    ),
    receipts: Type.Array(
      OpenItem(
        {
          kind: Type.String({ description: "Receipt kind, e.g. `reap`, `deployment`, `initialization`." }),
          id: Type.String({ description: "The receipt's identifier." }),
          at: Timestamp(),
        },
        "A receipt the host recorded.",
      ),
      { description: "Newest first." },
    ),
  },
  { description: "One host: serving state, drain attribution, blockers, receipts." },
);

export const HostTransition = Open(
  "HostTransition",
  {
    host: Type.String({ description: "The host's identifier." }),
    from: Type.String({ description: "State before." }),
    to: Type.String({ description: "State after." }),
    at: Timestamp(),
    actor: Type.String({ description: "Operator principal, or `system`." }),
    reason: Type.Optional(Type.String()),
  },
  { description: "One recorded host state transition." },
);

export const HostTransitions = Type.Array(HostTransition, {
  title: "HostTransitions",
  description: "Host transitions, newest first.",
});

export const Placement = Open(
  "Placement",
  {
    job_id: Type.String(),
    vm_id: Type.String({ description: "The microVM (or sandbox) the attempt runs in." }),
    host: Type.String(),
    tenant: Type.Optional(Type.String()),
    state: Type.String({ description: "The placement's state, e.g. `placing`, `running`, `reaping`." }),
    flagged: Type.Boolean({ description: "Whether reconciliation flagged it (e.g. lost host, orphaned VM)." }),
    flag_reason: Type.Optional(Nullable(Type.String(), "Why it was flagged.")),
    placed_at: Type.Optional(Timestamp()),
  },
  { description: "One live placement of a job attempt on a host." },
);

export const Placements = Type.Array(Placement, {
  title: "Placements",
  description: "Live placements, flagged first.",
});

// ---------------------------------------------------------------------------
// Initialization, deployment
// ---------------------------------------------------------------------------

export const HostInitializationRequest = Open(
  "HostInitializationRequest",
  {
    expected_revision: Type.Optional(Revision("The host revision read; a moved-past revision is a conflict.")),
    toolchains: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
        uniqueItems: true,
        description: "Installed rustup toolchains to admit (copied where the sandbox user can read them).",
      }),
    ),
    note: Type.Optional(Note()),
  },
  { description: "Begins a host's initialization." },
);

export const HostInitialization = Open(
  "HostInitialization",
  {
    host: Type.String(),
    operation: Type.String({ description: "The initialization operation's identifier." }),
    state: Type.Union(["pending", "running", "succeeded", "failed"].map((s) => Type.Literal(s))),
    started_by: Type.String(),
    started_at: Timestamp(),
    finished_at: Nullable(Timestamp()),
    steps: StepLedger("The initialization's step ledger."),
    failure: Type.Optional(Nullable(Type.String(), "Why it failed.")),
  },
  { description: "A host initialization and its progress." },
);

export const HostDeploymentRequest = Open(
  "HostDeploymentRequest",
  {
    release: Type.String({ minLength: 1, maxLength: 256, description: "The release now deployed on the host." }),
    release_sha256: Type.Optional(Sha256("SHA-256 of the release artifact.")),
    expected_revision: Type.Optional(Revision("The host revision read; a moved-past revision is a conflict.")),
    note: Type.Optional(Note()),
  },
  { description: "Registers the release deployed on a host." },
);

// ---------------------------------------------------------------------------
// Reconciliation, receipts, canaries
// ---------------------------------------------------------------------------

export const ReconcileRequest = Open(
  "ReconcileRequest",
  {
    category: Type.String({
      pattern: "^[a-z][a-z0-9_]{0,63}$",
      description: "What is wrong with the placement, e.g. `lost_host`, `orphaned_vm`, `stuck_reap`.",
    }),
    mutation: Type.String({
      pattern: "^[a-z][a-z0-9_]{0,63}$",
      description: "The reconciling mutation, e.g. `reap`, `fail_attempt`, `requeue`.",
    }),
    expected_lease_expires_at: Type.Optional(
      Timestamp(
        "The placement's `lease_expires_at` as read (operator.placements.list); required for `stale_lease`. A lease that moved since (its host renewed it) is a conflict.",
      ),
    ),
    note: Type.Optional(Note()),
  },
  { description: "Reconciles one placement: the category it falls in and the mutation to apply." },
);

export const ReconcileOutcome = Open(
  "ReconcileOutcome",
  {
    job_id: Type.String(),
    vm_id: Type.String(),
    category: Type.String(),
    mutation: Type.String(),
    outcome: Type.String({ description: "What the mutation did, e.g. `reaped`, `attempt_failed`, `requeued`." }),
    reconciled_by: Type.String(),
    reconciled_at: Timestamp(),
    receipt: Type.Optional(Nullable(Type.String(), "The receipt written, where one was.")),
  },
  { description: "The outcome of a placement reconciliation." },
);

export const ReceiptRead = Open(
  "ReceiptRead",
  {
    job_id: Type.String(),
    vm_id: Type.String(),
    finalized_at: Timestamp("When the reap receipt was finalized."),
    page: Type.Integer({ minimum: 1, description: "This page's number." }),
    next_page: Nullable(Type.Integer({ minimum: 2 }), "The next page's number; null on the last page."),
    entries: Type.Array(
      OpenItem(
        {
          kind: Type.String({
            description: "What the reap recorded, e.g. `vm_stopped`, `outputs_uploaded`, `metering_closed`.",
          }),
          detail: Type.String(),
          at: Timestamp(),
        },
        "One entry of the reap receipt.",
      ),
    ),
  },
  { description: "One page of a finalized reap receipt." },
);

export const CanaryAttribution = Open(
  "CanaryAttribution",
  {
    job_id: Type.String(),
    host: Type.String({ description: "The host the canary targeted (its job was pinned to it)." }),
    vm_id: Type.Optional(Type.String()),
    verdict: Type.Union(
      ["passed", "failed", "late", "pending"].map((v) => Type.Literal(v)),
      { description: "The canary's verdict, derived from its job." },
    ),
    attributed_to: Type.Union(
      ["host", "workload", "platform", "undecided"].map((v) => Type.Literal(v)),
      {
        description:
          "`host`: the host ran it (passed) or failed it (infrastructure, late); `workload`: the canary's cargo run failed; `platform`: the control plane refused its submission; `undecided` while pending.",
      },
    ),
    reason: Type.String(),
    evidence: Type.Array(EvidenceItem),
    due_at: Type.Optional(Timestamp("When the canary was due.")),
    submitted_at: Type.Optional(Nullable(Timestamp(), "When the platform submitted it.")),
    attempts: Type.Optional(
      Type.Array(
        OpenItem(
          {
            attempt: Type.Integer({ minimum: 1 }),
            host: Type.String({ description: "The host that ran the attempt." }),
            state: Type.String({ description: "`running`, `finished` or `lost`." }),
            outcome: Nullable(Type.String()),
            started_at: Timestamp(),
            finished_at: Nullable(Timestamp()),
            duration_ms: Nullable(Type.Integer({ minimum: 0 }), "How long the attempt took; null while running."),
            phases: Type.Array(
              OpenItem(
                {
                  name: Type.String(),
                  status: Type.String(),
                  duration_ms: Nullable(Type.Integer({ minimum: 0 })),
                },
                "One phase of the attempt and how long it took.",
              ),
            ),
          },
          "One attempt of the canary: which host ran it, its phases and how long each took.",
        ),
      ),
    ),
  },
  { description: "Where a canary job's result is attributed: host, attempt and phases with their durations." },
);

// ---------------------------------------------------------------------------
// Operator audit
// ---------------------------------------------------------------------------

export const OperatorAuditEntry = Open(
  "OperatorAuditEntry",
  {
    sequence: Type.Integer({ minimum: 1, description: "Position in the append-only operator audit." }),
    actor: Type.String({ description: "Operator principal (or `system`)." }),
    operation: Type.String({ description: "The operation performed or refused, e.g. `operator.hosts.drain`." }),
    target: Type.String({ description: "What it acted on, e.g. `host:h1`, `tenant:acme`." }),
    value: Type.Optional(Type.String({ description: "The value recorded; never a secret." })),
    outcome: Type.Optional(Type.String({ description: "`performed`, or the refusal code." })),
    at: Timestamp(),
  },
  { description: "One append-only operator audit entry." },
);

export const OperatorAudit = Type.Array(OperatorAuditEntry, {
  title: "OperatorAudit",
  description: "The operator audit, newest first.",
});

export const AuditRefusal = Open(
  "AuditRefusal",
  {
    sequence: Type.Integer({ minimum: 1, description: "The entry an edit or deletion was attempted on." }),
    attempted: Type.Union([Type.Literal("PATCH"), Type.Literal("DELETE")]),
    refused: Type.Literal(true, { description: "Always true: operator audit entries are never edited or deleted." }),
    audit_sequence: Type.Integer({ minimum: 1, description: "The audit entry recording this attempt." }),
    attempted_by: Type.String(),
    attempted_at: Timestamp(),
  },
  { description: "The refusal of an attempt to edit or delete an operator audit entry; the attempt is audited." },
);

// ---------------------------------------------------------------------------
// Operating states, identities
// ---------------------------------------------------------------------------

/** Every typed reason an operating state names, by state. */
export const OPERATING_STATE_REASONS = {
  management_liveness: ["answering"],
  management_readiness: ["ready", "database_unreachable", "migrations_pending", "blob_store_unwritable"],
  execution_capacity: ["capacity_available", "no_serving_host", "no_free_capacity"],
  end_to_end_workload_health: [
    "canaries_passing",
    "no_serving_host",
    "canary_failed",
    "canary_late",
    "canary_pending",
    "canary_stale",
    "canaries_off",
  ],
} as const;

const OperatingState = <K extends keyof typeof OPERATING_STATE_REASONS, T extends TProperties>(
  key: K,
  extra: T,
  description: string,
) =>
  OpenItem(
    {
      state: Type.Union([Type.Literal("ok"), Type.Literal("refusing")]),
      computed_at: Timestamp("The instant the state was computed."),
      reason: OpenItem(
        {
          code: Type.Union(
            OPERATING_STATE_REASONS[key].map((c) => Type.Literal(c)),
            { description: "The typed reason." },
          ),
          detail: Type.String({ description: "The reason in words, with what was measured." }),
        },
        "The typed reason for the state.",
      ),
      deadline: Nullable(
        Timestamp(),
        "For a refusing state, when it must have recovered before it escalates (for workload health: when the next canary's verdict is due); null while ok.",
      ),
      ...extra,
    },
    description,
  );

const FreeSlotsBySize = Type.Record(Type.String(), Type.Integer({ minimum: 0 }), {
  description: "Per size, how many more jobs of that size the serving hosts' free vCPUs place now.",
});

const CanaryOutcome = OpenItem(
  {
    host: Type.String(),
    canary: Type.String({ description: "The canary's id (its job's submission key)." }),
    job_id: Nullable(Type.String(), "The canary's job; null when the API refused the submission."),
    due_at: Timestamp("When the canary was due (its slot's start)."),
    verdict: Type.Union(
      ["passed", "failed", "late", "pending"].map((v) => Type.Literal(v)),
      { description: "Derived from the job: `late` when not finished within the bound after due_at." },
    ),
  },
  "A host's newest decided canary (or its pending one when none is decided yet).",
);

export const OperatingStates = Open(
  "OperatingStates",
  {
    management_liveness: OperatingState("management_liveness", {}, "The control plane answers."),
    management_readiness: OperatingState(
      "management_readiness",
      {},
      "The database answers, its schema is at the latest migration, and the blob store is writable.",
    ),
    execution_capacity: OperatingState(
      "execution_capacity",
      {
        serving_hosts: Type.Optional(Type.Integer({ minimum: 0 })),
        vcpus_free: Type.Optional(Type.Integer({ minimum: 0 })),
        free_slots_by_size: Type.Optional(FreeSlotsBySize),
      },
      "Hosts serving (not drained, seen lately) and their free vCPUs per size.",
    ),
    end_to_end_workload_health: OperatingState(
      "end_to_end_workload_health",
      {
        canary_interval_seconds: Type.Optional(Type.Integer({ minimum: 1 })),
        canary_late_after_seconds: Type.Optional(Type.Integer({ minimum: 1 })),
        canaries: Type.Optional(Type.Array(CanaryOutcome, { description: "One per serving host." })),
      },
      "Healthy when every serving host's latest canary passed within the interval.",
    ),
    hosts: Type.Array(
      OpenItem(
        {
          host: Type.String(),
          observed_at: Timestamp("When this observation was read."),
          admitting: Type.Boolean({ description: "Whether the host admits placements (serving and seen lately)." }),
          last_seen_at: Type.Optional(Nullable(Timestamp(), "When the host last claimed work or renewed a lease.")),
          vcpus_total: Type.Optional(Type.Integer({ minimum: 0 })),
          vcpus_free: Type.Optional(Type.Integer({ minimum: 0 })),
          memory_bytes_total: Type.Optional(Type.Integer({ minimum: 0 })),
          memory_bytes_free: Type.Optional(Type.Integer({ minimum: 0 })),
          running_attempts: Type.Optional(Type.Integer({ minimum: 0 })),
          free_slots_by_size: Type.Optional(FreeSlotsBySize),
          reason: Type.Optional(Nullable(Type.String(), "Why the host has no capacity, where it has none.")),
        },
        "One host's capacity observation.",
      ),
    ),
  },
  { description: "The four operating states and each host's capacity observation." },
);

const WindowMember = (s: TSchema, d: string) =>
  Nullable(s, `${d} Null when there is no window (see no_window_reason).`);

export const IdentityInventory = Open(
  "IdentityInventory",
  {
    computed_at: Timestamp(),
    identities: Type.Array(
      OpenItem(
        {
          role: Type.Union(
            ["host", "bootstrap", "controller", "provisioner"].map((r) => Type.Literal(r)),
            {
              description:
                "`host` certificate, outstanding `bootstrap` credential, `controller` or `provisioner` identity.",
            },
          ),
          host: Nullable(Type.String(), "The host, for host and bootstrap identities; else null."),
          subject: Type.String(),
          certificate_sha256: Nullable(Sha256("SHA-256 of the certificate."), "Null when there is no certificate."),
          issuer: Nullable(Type.String()),
          not_before: WindowMember(Timestamp(), "Start of validity."),
          not_after: WindowMember(Timestamp(), "End of validity."),
          remaining_seconds: WindowMember(Type.Integer(), "Seconds of validity left (negative once expired)."),
          remaining_fraction: Nullable(
            Type.Number({ maximum: 1 }),
            "Fraction of the validity window left. Null when there is no window.",
          ),
          no_window_reason: Nullable(Type.String(), "Why the identity has no validity window; null when it has one."),
          recovery_key_sha256: Type.Optional(
            Nullable(Sha256("SHA-256 of the recovery key."), "Host only: the recovery key the enrollment records."),
          ),
          no_recovery_key_reason: Type.Optional(
            Nullable(Type.String(), "Host only: why the enrollment records no recovery key."),
          ),
        },
        "One identity. Digests only; never key or credential material.",
      ),
    ),
  },
  { description: "Host certificates, bootstrap credentials, controller and provisioner identities. Digests only." },
);

// ---------------------------------------------------------------------------
// Recovery, activations, incidents
// ---------------------------------------------------------------------------

const IncidentSummary = OpenItem(
  {
    id: Type.String(),
    automatic_recoveries_spent: Type.Integer({ minimum: 0 }),
    awaiting_operator: Type.Boolean(),
    awaiting_reason: Nullable(Type.String(), "Why it awaits an operator; null when it does not."),
  },
  "The host's open incident.",
);

const RecoverySurface = Type.Union(
  [Type.Literal("operator_api"), Type.Literal("command_line"), Type.Literal("automatic")],
  {
    description: "Where the invocation was made; `automatic` for the platform's own under an automatic policy.",
  },
);

export const HostRecoveryPolicy = Open(
  "HostRecoveryPolicy",
  {
    host: Type.String(),
    automatic: Type.Boolean({
      description:
        "Whether impairments are recovered automatically. When false, admission still closes and an incident opens, and nothing further is automatic.",
    }),
    revision: Revision("The policy revision an update names as expected_revision."),
    changed_by: Type.Optional(Type.String()),
    changed_at: Type.Optional(Timestamp()),
  },
  { description: "A host's recovery policy and its revision." },
);

export const HostRecovery = Open(
  "HostRecovery",
  {
    host: Type.String(),
    admission: Admission,
    host_operation: Nullable(HostOperation, "The host operation and its holder; null when none is open."),
    policy: Nullable(HostRecoveryPolicy, "The recovery policy; null while none is set."),
    incident: Nullable(IncidentSummary, "The open incident; null when none is open."),
    recovery: Nullable(
      OpenItem(
        {
          operation: Type.String(),
          state: Type.String({ description: "e.g. `recorded`, `running`, `succeeded`, `failed`." }),
          began_by: Type.String({ description: "Operator principal, or `system` for an automatic recovery." }),
          began_at: Timestamp(),
          steps: StepLedger("The recovery's step ledger."),
        },
        "A recovery with its step ledger.",
      ),
      "The newest recovery, or the one the query selected; null when none exists.",
    ),
    invocations: Type.Array(
      OpenItem(
        {
          request: Type.String(),
          operation: Type.String(),
          operator: Type.String(),
          surface: RecoverySurface,
          incident: Type.Optional(Type.String()),
          at: Timestamp(),
        },
        "A recorded invocation.",
      ),
      { description: "Recorded invocations, newest first." },
    ),
  },
  { description: "A host's recovery: admission, host operation, policy, incident, recovery ledger, invocations." },
);

export const HostActivations = Open(
  "HostActivations",
  {
    host: Type.String(),
    admission: Admission,
    host_operation: Nullable(HostOperation, "The host operation and its holder; null when none is open."),
    readiness: Nullable(
      OpenItem(
        {
          instance: Type.String({ description: "The host operator instance." }),
          started_at: Timestamp(),
          environment: Type.String(),
          host_reported: Type.String({ description: "The host the instance reported." }),
          provisioning_bundle_sha256: Sha256("SHA-256 of the provisioning bundle it loaded."),
          recovery_binding_loaded: Type.Boolean(),
          installation: Nullable(Type.String(), "The installation the recovery binding configures."),
          provider_identity_readable: Type.Boolean({
            description: "Whether the bound provider identity is readable (the identity itself is never shown).",
          }),
          recorded_at: Timestamp(),
        },
        "The host operator's readiness as last recorded.",
      ),
      "Null when the host operator never recorded readiness.",
    ),
    boot_authority: OpenItem(
      {
        boot: Type.String({ description: "The boot holding the host's authority." }),
        since: Timestamp(),
      },
      "The boot holding the host's authority.",
    ),
    activations: Type.Array(
      OpenItem(
        {
          operation: Type.String(),
          plan: Type.Array(Type.String(), { description: "The planned steps, in order." }),
          steps: StepLedger("The activation's ledger."),
          receipt: Nullable(
            OpenItem(
              {
                outcome: Type.String({ description: "e.g. `succeeded`, `failed`." }),
                finished_at: Timestamp(),
                detail: Type.Optional(Type.String()),
              },
              "The activation's receipt.",
            ),
            "Its receipt once finished; else null.",
          ),
          written_at: Timestamp(),
        },
        "One activation.",
      ),
      { description: "Most recently written first." },
    ),
  },
  { description: "A host's activations: admission, host operation, operator readiness, boot authority, ledgers." },
);

export const HostRecoveryInvocation = Closed(
  "HostRecoveryInvocation",
  {
    confirmation: Type.String({
      pattern: RECOVERY_CONFIRMATION_PATTERN,
      description: "Exactly `recover-boot:<provider_service_name>:preserve-root-and-srv`.",
    }),
    expected_revision: Type.Optional(Revision("The host operation revision read.")),
    incident: Type.Optional(Identifier("The incident the recovery answers.")),
    request: Type.Optional(
      Identifier("Request identifier; a retry with the same one replays the recorded invocation."),
    ),
    rescue_read: Type.Optional(
      Type.Boolean({ description: "Read the wedged boot's journal from the rescue system first." }),
    ),
    rescue_ssh_public_key: Type.Optional(
      Type.String({
        pattern: "^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}( [^\\n]*)?$",
        maxLength: 16384,
        description: "One-run rescue SSH public key (OpenSSH format); only with rescue_read.",
      }),
    ),
    surface: Type.Optional(
      Type.Union([Type.Literal("operator_api"), Type.Literal("command_line")], {
        default: "operator_api",
        description: "Where the invocation is made; recorded with the operator.",
      }),
    ),
  },
  { description: "Invokes the non-destructive boot recovery of a host. No step runs on the caller." },
);

export const HostRecoveryInvocationOutcome = Open(
  "HostRecoveryInvocationOutcome",
  {
    outcome: Type.Union([Type.Literal("recorded"), Type.Literal("in_progress")], {
      description:
        "`recorded`: the invocation was recorded (the host operator runs it); `in_progress`: a recovery of the host is already open or running and is returned instead.",
    }),
    operation: Type.String({ description: "The recovery operation recorded, or the one already open or running." }),
    request: Type.Optional(Type.String({ description: "The request identifier recorded (`recorded`)." })),
    state: Type.Optional(Type.String({ description: "`open` or `running` (`in_progress`)." })),
  },
  { description: "The outcome of a recovery invocation." },
);

export const HostRecoveryPolicyUpdate = Closed(
  "HostRecoveryPolicyUpdate",
  {
    automatic: Type.Boolean({ description: "Whether impairments are recovered automatically." }),
    expected_revision: Type.Optional(Revision("The policy revision read; absent only while no policy is set.")),
  },
  { description: "Sets a host's recovery policy." },
);

export const DESTRUCTIVE_STEPS = ["reinstallation", "partitioning", "filesystem_operation"] as const;

export const HostIncident = Open(
  "HostIncident",
  {
    id: Type.String(),
    host: Type.String(),
    state: Type.Union([Type.Literal("open"), Type.Literal("closed")]),
    revision: Revision("The incident revision a close names as expected_revision."),
    opened_at: Timestamp(),
    closed_at: Nullable(Timestamp()),
    closed_by: Nullable(Type.String()),
    automatic_recoveries_spent: Type.Integer({ minimum: 0 }),
    awaiting_operator: Type.Boolean(),
    awaiting_reason: Nullable(Type.String(), "Why it awaits an operator; null when it does not."),
    approvals: Type.Array(
      OpenItem(
        {
          step: Type.Union(DESTRUCTIVE_STEPS.map((s) => Type.Literal(s))),
          approved_by: Type.String(),
          approved_at: Timestamp(),
        },
        "An approval of a destructive step.",
      ),
    ),
  },
  { description: "A host incident: automatic recoveries spent, whether it awaits an operator and why, approvals." },
);

export const HostIncidentClose = Closed(
  "HostIncidentClose",
  { expected_revision: Revision("The incident revision read.") },
  { description: "Closes a host incident; admission is left as it stands." },
);

export const DestructiveStepApproval = Closed(
  "DestructiveStepApproval",
  {
    step: Type.Union(
      DESTRUCTIVE_STEPS.map((s) => Type.Literal(s)),
      { description: "The destructive step approved for this host and incident." },
    ),
  },
  { description: "Approves one destructive step; none runs without it." },
);

export const DestructiveApproval = Open(
  "DestructiveApproval",
  {
    host: Type.String(),
    incident: Type.String(),
    step: Type.Union(DESTRUCTIVE_STEPS.map((s) => Type.Literal(s))),
    approved_by: Type.Optional(Type.String()),
    approved_at: Type.Optional(Timestamp()),
  },
  { description: "An approval naming host, incident and destructive step." },
);

export const UndrainRequest = Closed(
  "UndrainRequest",
  {
    policy_revision: Revision(
      "The host policy revision the operator read; the host returns to placement under it. A moved-past revision is a conflict.",
    ),
    note: Type.Optional(Note()),
  },
  { description: "Returns a drained host to placement, naming the policy revision it runs under." },
);

// ---------------------------------------------------------------------------
// Tenant controls
// ---------------------------------------------------------------------------

/** Per-size vCPU-second prices; a size left out is priced at cents_per_vcpu_second. */
export const VcpuPricesBySize = () => {
  const price = (size: (typeof SIZES)[number]) =>
    Type.Optional(Type.Number({ minimum: 0, description: `Price of one vCPU-second on ${size}, in US cents.` }));
  return Type.Object(
    {
      "kiln2-cpu": price("kiln2-cpu"),
      "kiln4-cpu": price("kiln4-cpu"),
      "kiln8-cpu": price("kiln8-cpu"),
      "kiln16-cpu": price("kiln16-cpu"),
    },
    {
      additionalProperties: false,
      description:
        "Price of one vCPU-second per machine size, in US cents; a size left out costs cents_per_vcpu_second.",
    },
  );
};

const RateCard = Type.Object(
  {
    cents_per_vcpu_second: Type.Number({
      minimum: 0,
      description: "Price of one vCPU-second, in US cents (sizes not named in cents_per_vcpu_second_by_size).",
    }),
    cents_per_vcpu_second_by_size: Type.Optional(VcpuPricesBySize()),
    cents_per_gib_month: Type.Number({
      minimum: 0,
      description: "Price of one GiB-month of lineage storage (2^30 bytes held for 720 hours), in US cents.",
    }),
    cents_per_gib_uploaded: Type.Optional(
      Type.Number({ minimum: 0, description: "Price of one GiB (2^30 bytes) of source uploaded, in US cents." }),
    ),
  },
  { additionalProperties: false, description: "The tenant's rate card." },
);

const MaxRunningJobs = () =>
  Type.Integer({ minimum: 0, maximum: 10000, description: "Most jobs running at once; 0 admits none." });
const StorageQuotaBytes = () =>
  Type.Integer({ minimum: 0, description: "Storage quota (lineages and retained outputs), in bytes." });
const BandwidthBytesPerMonth = () =>
  Type.Integer({ minimum: 0, description: "Transfer allowance per calendar month (UTC), in bytes." });

/** The operator console's list of tenants (operator.tenants.list, a kiln extension). */
export const OperatorTenantList = Closed(
  "OperatorTenantList",
  {
    tenants: Type.Array(
      Type.Object(
        {
          tenant: Type.String({ description: "The tenant's identifier." }),
          display_name: Type.String(),
          created_at: Timestamp(),
          members: Type.Integer({ minimum: 0, description: "People with a membership in the tenant." }),
          suspended: Type.Boolean({ description: "The operator suspended it: new submissions are refused." }),
        },
        { additionalProperties: false },
      ),
      { description: "By identifier." },
    ),
    more: Type.Boolean({ description: "More tenants follow the ones listed (raise `limit`)." }),
  },
  { description: "Tenants by identifier, with their members and whether suspended." },
);

export const TenantControls = Closed(
  "TenantControls",
  {
    tenant: Type.String(),
    version: Type.Integer({ minimum: 0, description: "The version an update names; 0 while platform defaults apply." }),
    max_running_jobs: MaxRunningJobs(),
    storage_quota_bytes: StorageQuotaBytes(),
    bandwidth_bytes_per_month: BandwidthBytesPerMonth(),
    rate_card: Nullable(RateCard, "The rate card; null when none is set (usage then carries no prices)."),
    suspension: Type.Object(
      {
        suspended: Type.Boolean({ description: "A suspended tenant's submissions are refused; reads still work." }),
        reason: Nullable(Type.String(), "Why; null when not suspended."),
        since: Nullable(Timestamp(), "When the suspension began; null when not suspended."),
      },
      { additionalProperties: false },
    ),
    consumption: Type.Object(
      {
        running_jobs: Type.Integer({ minimum: 0 }),
        storage_bytes: Type.Integer({ minimum: 0 }),
        bandwidth_bytes_this_month: Type.Integer({ minimum: 0 }),
        observed_at: Timestamp(),
      },
      { additionalProperties: false, description: "Current consumption beside the limits." },
    ),
    changed_by: Nullable(Type.String(), "Operator who made the last change; null while platform defaults apply."),
    changed_at: Nullable(Timestamp(), "When the last change was made; null while platform defaults apply."),
  },
  { description: "The operator-set controls of a tenant, beside its consumption." },
);

export const TenantControlUpdate = Closed(
  "TenantControlUpdate",
  {
    expected_version: Type.Integer({
      minimum: 0,
      description: "The version read; a moved-past version is refused `conflict`.",
    }),
    changes: Type.Object(
      {
        max_running_jobs: Type.Optional(MaxRunningJobs()),
        storage_quota_bytes: Type.Optional(StorageQuotaBytes()),
        bandwidth_bytes_per_month: Type.Optional(BandwidthBytesPerMonth()),
        rate_card: Type.Optional(Nullable(RateCard, "The new rate card; null removes it.")),
        suspension: Type.Optional(
          Type.Object(
            {
              suspended: Type.Boolean(),
              reason: Type.Optional(
                Type.String({ minLength: 1, maxLength: 2000, description: "Required when suspending." }),
              ),
            },
            { additionalProperties: false, description: "Suspend (with a reason) or lift the suspension." },
          ),
        ),
        credit: Type.Optional(
          Type.Object(
            {
              reason: Type.String({
                minLength: 1,
                maxLength: 2000,
                description: "Why the credit is granted (e.g. the incident); shown on the adjustment.",
              }),
              vcpu_seconds: Type.Optional(
                Type.Integer({ minimum: 0, description: "vCPU-seconds taken off the tenant's usage this month." }),
              ),
              amount_cents: Type.Optional(
                Type.Integer({ minimum: 0, description: "US cents taken off the tenant's charges this month." }),
              ),
              job: Type.Optional(Type.String({ minLength: 1, description: "The job the credit is for, if any." })),
            },
            {
              additionalProperties: false,
              description:
                "A credit to the tenant's usage, recorded once with the version this update moves (a retry names a " +
                "moved-past version and is a conflict) and listed in usage.export as an `operator_credit` adjustment " +
                "in the month it is granted. At least one of vcpu_seconds and amount_cents is above zero.",
            },
          ),
        ),
      },
      {
        additionalProperties: false,
        minProperties: 1,
        description: "The controls to change; members not named keep their value.",
      },
    ),
    note: Type.Optional(Note()),
  },
  { description: "Changes a tenant's controls at the version read." },
);
