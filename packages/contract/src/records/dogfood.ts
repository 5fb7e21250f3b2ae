import { type TProperties, Type } from "@sinclair/typebox";
import { Closed, Nullable, Open, Timestamp } from "../schema-helpers.js";

/** Dogfood trial records (spec, "Dogfood trial records"). */

export const DOGFOOD_GATE_PARTS = [
  "a0_verdict",
  "a1_outcomes",
  "no_duplicate_settlement",
  "continuous_observation",
  "certificate_renewal",
  "expired_identity_recovery",
  "reboot_recovery",
  "staged_release_reverted",
  "alerts_observed",
  "off_host_evidence_observed",
  "provider_unavailable_recovery",
  "cold_darm_run",
  "transport_qualified_production",
  "transport_qualified_staging",
  "submitter_credential",
] as const;

export const DOGFOOD_INCIDENT_CLASSES = [
  "wrong_green",
  "cross_tenant_disclosure",
  "duplicate_execution",
  "duplicate_charge",
  "declared",
] as const;

/** Classes that stop the trial at once and must name at least one run record. */
export const DOGFOOD_ZERO_TOLERANCE_CLASSES = [
  "wrong_green",
  "cross_tenant_disclosure",
  "duplicate_execution",
  "duplicate_charge",
] as const;

export const DOGFOOD_LIFECYCLE_KINDS = [
  "host_generation",
  "host_reinstall",
  "guest_image_release",
  "host_identity",
] as const;

export const DOGFOOD_MONTH_PATTERN = "^[0-9]{4}-(0[1-9]|1[0-2])$";

/** Identifiers the operator chooses for incidents, interventions and maintenance. */
export const DOGFOOD_IDENTIFIER_PATTERN = "^[A-Za-z0-9_.:-]{1,128}$";

/**
 * A run record identity: `shadow:…`, `probe:…` or `head:<owner/name>@…`; `#` marks a
 * later attempt.
 */
export const DOGFOOD_RUN_RECORD_PATTERN = "^(shadow:|probe:|head:[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}@)\\S+$";

const Literals = <T extends readonly string[]>(values: T, description: string) =>
  Type.Union(
    values.map((v) => Type.Literal(v)),
    { description },
  );
const OpenItem = <T extends TProperties>(properties: T, description: string) =>
  Type.Object(properties, { additionalProperties: true, description });
const DogfoodId = (description: string) => Type.String({ pattern: DOGFOOD_IDENTIFIER_PATTERN, description });
export const DogfoodRunRecordId = (
  description = "A run record identity (`shadow:`, `probe:` or `head:<owner/name>@`).",
) => Type.String({ pattern: DOGFOOD_RUN_RECORD_PATTERN, maxLength: 512, description });
const RunRecords = (description: string) => Type.Array(DogfoodRunRecordId(), { uniqueItems: true, description });
const Text = (description: string) => Type.String({ minLength: 1, maxLength: 4000, description });
const Recorded = {
  recorded_by: Type.String({ description: "Operator principal, or `platform` for what the platform records itself." }),
  recorded_at: Timestamp("When it was recorded."),
};

const GatePart = Literals(DOGFOOD_GATE_PARTS, "A part of the entry gate.");
const IncidentClass = Literals(
  DOGFOOD_INCIDENT_CLASSES,
  "`wrong_green`, `cross_tenant_disclosure`, `duplicate_execution` and `duplicate_charge` are zero-tolerance: they name run records and stop the trial at once; `declared` is any other incident an operator declares.",
);

// ---------------------------------------------------------------------------
// Gate evidence
// ---------------------------------------------------------------------------

export const DogfoodGateEvidenceRequest = Closed(
  "DogfoodGateEvidenceRequest",
  {
    part: GatePart,
    reference: Type.String({
      minLength: 1,
      maxLength: 2048,
      description:
        "A run record identity, `credential:<name>` or `credential:<name>:<issued_at>`, a CI workflow run of the dogfood repository, or an https reference an operator attests (accepted only for parts the platform cannot read).",
    }),
    expires_at: Type.Optional(Timestamp("When the evidence stops meeting the part.")),
    detail: Type.Optional(Text("What the attested reference shows (attested reference only).")),
    produced_at: Type.Optional(Timestamp("When the attested evidence was produced (attested reference only).")),
  },
  { description: "Records evidence for one part of the dogfood entry gate; verified against the platform's records." },
);

const EvidenceSource = Literals(
  ["run_record", "credential", "workflow_run", "attested"] as const,
  "Where the evidence was verified: the run ledger, the dogfood tenant's credentials, the CI provider, or operator attestation.",
);

const GateEvidence = OpenItem(
  {
    part: GatePart,
    reference: Type.String(),
    source: EvidenceSource,
    expires_at: Nullable(Timestamp(), "When it stops meeting the part; null when it does not expire."),
    detail: Type.Optional(Type.String()),
    produced_at: Type.Optional(Timestamp()),
    ...Recorded,
  },
  "Gate evidence as recorded, with its source.",
);

const Gate = OpenItem(
  {
    state: Literals(["closed", "open"] as const, "Recording the last missing evidence opens the gate."),
    opened_at: Nullable(Timestamp(), "When the gate opened; null while closed."),
    conditions: Type.Array(
      OpenItem(
        {
          condition: Type.String({ description: "The gate condition." }),
          met: Type.Boolean(),
          parts: Type.Array(
            OpenItem(
              {
                part: GatePart,
                evidence: Nullable(GateEvidence, "The evidence meeting the part; null when none does."),
                lacks: Nullable(Type.String(), "What the part lacks; null when it is met."),
              },
              "One part of a condition.",
            ),
          ),
        },
        "One gate condition with its parts.",
      ),
    ),
  },
  "The entry gate: each condition's parts and the evidence meeting each or what it lacks.",
);

export const DogfoodGateEvidenceRecorded = Open(
  "DogfoodGateEvidenceRecorded",
  {
    evidence: GateEvidence,
    newly_recorded: Type.Boolean({ description: "False when the same evidence was already recorded." }),
    gate: Gate,
    clock_started_at: Nullable(
      Timestamp(),
      "When this recording opened the gate, the start of the seven-day clock it started; else null.",
    ),
  },
  { description: "Gate evidence as recorded, the gate after recording, and the clock the recording started." },
);

// ---------------------------------------------------------------------------
// Incidents
// ---------------------------------------------------------------------------

export const DogfoodIncidentRequest = Closed(
  "DogfoodIncidentRequest",
  {
    id: DogfoodId("The incident's identifier."),
    class: IncidentClass,
    occurred_at: Timestamp("When the incident occurred."),
    service_blocking: Type.Boolean({ description: "Whether it blocked the service." }),
    detail: Text("What happened."),
    records: Type.Optional(RunRecords("Run records that exposed it; a zero-tolerance class names at least one.")),
  },
  { description: "Records a dogfood incident. A zero-tolerance class stops the trial at once." },
);

export const DogfoodIncidentIssueRequest = Closed(
  "DogfoodIncidentIssueRequest",
  {
    incident: DogfoodId("The incident."),
    number: Type.Integer({ minimum: 1, description: "Issue number in the dogfood repository." }),
    filed_at: Timestamp("When the issue was filed; a different UTC day than the incident is published as filed late."),
  },
  { description: "Records the issue filed for an incident." },
);

export const DogfoodIncidentResolutionRequest = Closed(
  "DogfoodIncidentResolutionRequest",
  {
    incident: DogfoodId("The incident."),
    detail: Text("How it was resolved."),
  },
  { description: "Resolves an incident; no run resolves one." },
);

export const DogfoodIncident = Open(
  "DogfoodIncident",
  {
    id: Type.String(),
    class: Type.String({
      description:
        "An incident class (see DogfoodIncidentRequest), or a class the platform records itself such as `outage` or `bounded_recovery`.",
    }),
    occurred_at: Timestamp(),
    service_blocking: Type.Optional(Type.Boolean()),
    detail: Type.Optional(Type.String()),
    records: Type.Optional(Type.Array(Type.String(), { description: "Run records naming it." })),
    issue: Nullable(
      OpenItem(
        {
          number: Type.Integer({ minimum: 1 }),
          filed_at: Timestamp(),
          filed_late: Type.Boolean({ description: "Filed on a different UTC day than the incident." }),
        },
        "The issue filed for it.",
      ),
      "Null until an issue is recorded.",
    ),
    resolution: Nullable(OpenItem({ detail: Type.String(), ...Recorded }, "Its resolution."), "Null while unresolved."),
    recorded_by: Type.Optional(Recorded.recorded_by),
    recorded_at: Type.Optional(Recorded.recorded_at),
  },
  { description: "A dogfood incident: class, occurrence time, issue, resolution." },
);

// ---------------------------------------------------------------------------
// Interventions, lifecycle changes, maintenance, spend
// ---------------------------------------------------------------------------

export const DogfoodInterventionRequest = Closed(
  "DogfoodInterventionRequest",
  {
    id: DogfoodId("The intervention's identifier."),
    action: Text("What the operator did."),
    routine: Type.Boolean({ description: "A routine intervention fails the period." }),
    at: Timestamp("When it was done."),
    records: Type.Optional(RunRecords("Run records it concerns.")),
  },
  { description: "Records an operator intervention in the trial." },
);

export const DogfoodIntervention = Open(
  "DogfoodIntervention",
  {
    id: Type.String(),
    action: Type.String(),
    routine: Type.Boolean(),
    at: Timestamp(),
    records: Type.Array(Type.String()),
    period_failed: Type.Optional(Type.Boolean({ description: "Whether recording it failed the running period." })),
    ...Recorded,
  },
  { description: "An intervention as recorded." },
);

export const DogfoodLifecycleChangeRequest = Closed(
  "DogfoodLifecycleChangeRequest",
  {
    kind: Literals(DOGFOOD_LIFECYCLE_KINDS, "What changed."),
    identity: Type.String({
      minLength: 1,
      maxLength: 512,
      description: "The new generation, release digest or identity.",
    }),
    at: Timestamp("When it changed."),
    detail: Text("What changed and why."),
    host: Type.Optional(Type.String({ pattern: DOGFOOD_IDENTIFIER_PATTERN, description: "The host it changed." })),
  },
  { description: "Records a lifecycle change; a window it falls in does not count." },
);

export const DogfoodLifecycleChange = Open(
  "DogfoodLifecycleChange",
  {
    kind: Literals(DOGFOOD_LIFECYCLE_KINDS, "What changed."),
    identity: Type.String(),
    at: Timestamp(),
    detail: Type.String(),
    host: Type.Optional(Type.String()),
    ...Recorded,
  },
  { description: "A lifecycle change as recorded." },
);

export const DogfoodMaintenanceRequest = Closed(
  "DogfoodMaintenanceRequest",
  {
    id: DogfoodId("The maintenance interval's identifier."),
    starts_at: Timestamp("Start; must be after the declaration."),
    ends_at: Timestamp("End; at most 24 hours after starts_at."),
    reason: Text("Why."),
  },
  { description: "Declares a maintenance interval of at most 24 hours before it begins." },
);

export const DogfoodMaintenance = Open(
  "DogfoodMaintenance",
  {
    id: Type.String(),
    starts_at: Timestamp(),
    ends_at: Timestamp(),
    reason: Type.String(),
    declared_by: Type.String(),
    declared_at: Timestamp(),
  },
  { description: "A declared maintenance interval, with who declared it and when." },
);

export const DogfoodSpendRequest = Closed(
  "DogfoodSpendRequest",
  {
    month: Type.String({ pattern: DOGFOOD_MONTH_PATTERN, description: "`YYYY-MM`." }),
    source: Type.String({ minLength: 1, maxLength: 256, description: "The provider or invoice." }),
    amount_cents: Type.Integer({ minimum: 0, description: "Amount in US cents." }),
  },
  { description: "Records a month's spend from one source." },
);

export const DogfoodSpend = Open(
  "DogfoodSpend",
  {
    month: Type.String({ pattern: DOGFOOD_MONTH_PATTERN }),
    source: Type.String(),
    amount_cents: Type.Integer({ minimum: 0 }),
    month_total_cents: Type.Optional(Type.Integer({ minimum: 0, description: "The month's recorded spend so far." })),
    ...Recorded,
  },
  { description: "Spend as recorded." },
);

// ---------------------------------------------------------------------------
// Period and run records
// ---------------------------------------------------------------------------

export const DogfoodPeriod = Open(
  "DogfoodPeriod",
  {
    gate: Gate,
    state: Type.String({
      description: "The period's state, e.g. `gate_closed`, `running`, `stopped`, `failed`, `ended`.",
    }),
    clock: OpenItem(
      {
        started_at: Nullable(Timestamp(), "When the current clock started; null when none runs."),
        ends_at: Nullable(Timestamp(), "When it completes seven days; null when none runs."),
      },
      "The seven-day clock.",
    ),
    closed_windows: Type.Array(
      OpenItem(
        {
          starts_at: Timestamp(),
          ends_at: Timestamp(),
          counts: Type.Boolean({ description: "Whether the window counts toward the period." }),
          reason: Type.Optional(
            Nullable(Type.String(), "Why it does not count (maintenance, lifecycle change, incident)."),
          ),
        },
        "A closed observation window.",
      ),
    ),
    incidents: Type.Array(DogfoodIncident, { description: "Every incident, with issue and resolution." }),
    scorecard: OpenItem(
      {
        month: Type.Optional(Type.String({ pattern: DOGFOOD_MONTH_PATTERN })),
        spend_cents: Type.Optional(Type.Integer({ minimum: 0, description: "The month's recorded spend." })),
        spend_ceiling_cents: Type.Optional(
          Nullable(Type.Integer({ minimum: 0 }), "The recorded spend plan's ceiling."),
        ),
      },
      "The scorecard; compares the month's recorded spend with the spend plan's ceiling.",
    ),
    beta_decision: Type.Optional(
      OpenItem({ decision: Type.String(), at: Timestamp() }, "The beta decision record, once ended."),
    ),
  },
  { description: "The dogfood period: gate, state, clock, closed windows, incidents, scorecard, beta decision." },
);

export const DogfoodRunRecord = Open(
  "DogfoodRunRecord",
  {
    id: Type.String({ description: "The run record identity." }),
    absent: Type.Array(OpenItem({ field: Type.String(), reason: Type.String() }, "An absent field and why."), {
      description: "Each field the record lacks, with its reason; every present field is a member of the record.",
    }),
    threshold_labels: Type.Array(Type.String(), { description: "Threshold labels the record meets or misses." }),
    incidents: Type.Array(DogfoodIncident, { description: "Every incident naming it, with issue and resolution." }),
  },
  { description: "One dogfood run record: every field (each absent one with its reason), labels, incidents." },
);
