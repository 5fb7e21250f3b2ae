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
    verification: Type.Optional(
      Type.Object(
        {
          attested: Type.Optional(Type.Boolean({ description: "True for an attested https reference." })),
          run_record: Type.Optional(Type.String({ description: "The run record identity verified." })),
          job: Type.Optional(Type.String({ description: "The job the run record is an attempt of." })),
          tenant: Type.Optional(Type.String({ description: "The tenant the job or credential belongs to." })),
          status: Type.Optional(Type.String({ description: "The job's status when verified." })),
          admitted_by_submission_of: Type.Optional(
            Type.String({ description: "The job its submission key admitted (itself, or the original of a retry)." }),
          ),
          settlements: Type.Optional(
            Type.Integer({ minimum: 0, description: "How many settlements the ledger holds for the job." }),
          ),
          name: Type.Optional(Type.String({ description: "The credential's name." })),
          issued_at: Type.Optional(Timestamp()),
          credential_expires_at: Type.Optional(Nullable(Timestamp(), "When the credential expires; null when never.")),
          repository: Type.Optional(Type.String({ description: "The workflow run's repository (owner/name)." })),
          run_id: Type.Optional(Type.Integer({ description: "The workflow run's id at the provider." })),
          workflow: Type.Optional(Nullable(Type.String(), "The workflow's name.")),
          head_sha: Type.Optional(Type.String({ description: "The commit the workflow run ran on." })),
          conclusion: Type.Optional(Nullable(Type.String(), "The workflow run's conclusion.")),
          html_url: Type.Optional(Type.String({ description: "The workflow run's page." })),
        },
        {
          additionalProperties: true,
          description:
            "What the platform read when it verified the reference: the run record's job and settlement, the credential's issue and expiry, or the workflow run's conclusion; `attested: true` for an attested reference.",
        },
      ),
    ),
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
                accepts: Type.Optional(
                  Type.Array(EvidenceSource, { description: "The kinds of reference the part accepts (rule 9)." }),
                ),
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
          recorded_by: Type.Optional(Nullable(Type.String(), "Who recorded the issue.")),
          recorded_at: Type.Optional(Nullable(Timestamp(), "When the issue was recorded.")),
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
    period_failed: Type.Optional(
      Type.Boolean({
        description: "Whether it failed the period (the first routine intervention after the gate opened).",
      }),
    ),
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

/** Period state names (the spec leaves them to the service; docs/dogfood-trial.md). */
export const DOGFOOD_PERIOD_STATES = ["gate_closed", "running", "stopped", "failed", "ended"] as const;

/** Windows are this long, anchored at the start of the clock that contains them. */
export const DOGFOOD_WINDOW_HOURS = 24;
/** The seven-day clock: this many consecutive counting windows end the period. */
export const DOGFOOD_COUNTING_WINDOWS_REQUIRED = 7;

const Count = (description: string) => Type.Integer({ minimum: 0, description });

const ProbeAccount = OpenItem(
  {
    due: Count(
      "Probes due inside the window: every canary the platform reserved (due at its reservation, whether or not its job ran), and every canary-tenant job no reservation names (due at its acceptance).",
    ),
    passed: Count("Of those, probes that passed outside declared maintenance."),
    failed: Count(
      "Of those, probes that failed or were cancelled (within their late bound) outside declared maintenance.",
    ),
    unsettled: Count(
      "Of those, probes not settled yet and still within their late bound, outside declared maintenance.",
    ),
    missed: Count(
      "Of those, reserved probes that never became a job or whose job did not finish by its late bound, outside declared maintenance: an outage signal the ledger audit records.",
    ),
    declared_maintenance: Count(
      "Of those, probes due inside a declared maintenance interval: accounted as declared maintenance whatever their outcome (rule 11).",
    ),
  },
  "How the window's probes are accounted.",
);

const Window = OpenItem(
  {
    clock: Type.Integer({
      minimum: 1,
      description: "Which clock the window belongs to: 1 for the clock the gate started, +1 per clock restarted.",
    }),
    starts_at: Timestamp("Start of the window (inclusive)."),
    ends_at: Timestamp(
      "End of the window (exclusive): 24 hours after its start, or the instant a zero-tolerance incident stopped the trial in it.",
    ),
    counts: Type.Boolean({ description: "Whether the window counts toward the seven consecutive windows." }),
    reasons: Type.Array(Type.String(), {
      description:
        "Why it does not count, one sentence each (declared maintenance, lifecycle change, service-blocking incident, trial stopped); empty when it counts.",
    }),
    consecutive: Count(
      "Consecutive counting windows of its clock once this window closed (0 after a window that does not count).",
    ),
    probes: ProbeAccount,
    run_records: Count("Dogfood run records (jobs of the dogfood tenant) accepted inside the window."),
  },
  "A closed observation window.",
);

export const DogfoodPeriod = Open(
  "DogfoodPeriod",
  {
    as_of: Timestamp("The instant the period was computed at (the service's clock)."),
    dogfood_tenant: Type.String({ description: "The tenant whose jobs are the shadow and head run records." }),
    probe_tenant: Type.String({ description: "The tenant whose jobs are the probe run records (the canaries)." }),
    gate: Gate,
    state: Literals(
      DOGFOOD_PERIOD_STATES,
      "`gate_closed`: not every gate part is met yet, no clock runs. `running`: a clock runs. `stopped`: an unresolved zero-tolerance incident stopped the trial; a new clock starts when it is resolved. `failed`: a routine intervention failed the period (final). `ended`: seven consecutive counting windows closed (final); the beta decision is recorded.",
    ),
    clock: OpenItem(
      {
        number: Count("The clock's number: 1 for the one the gate started, +1 per restart; 0 before the gate opens."),
        started_at: Nullable(Timestamp(), "When the current clock started; null before the gate opens."),
        ends_at: Nullable(
          Timestamp(),
          "When the clock completes seven consecutive counting windows if every window from now on counts (the actual end once ended); null while stopped, failed or before the gate opens.",
        ),
        stopped_at: Nullable(Timestamp(), "When a zero-tolerance incident stopped the current clock; null otherwise."),
        stopped_by: Type.Array(Type.String(), {
          description: "Unresolved zero-tolerance incidents holding the trial stopped; empty otherwise.",
        }),
        counting_windows: Count("Consecutive counting windows of the current clock so far."),
        required_windows: Type.Integer({
          minimum: 1,
          description: "Consecutive counting windows that end the period (seven).",
        }),
        window_hours: Type.Integer({ minimum: 1, description: "Length of a window, in hours (24)." }),
      },
      "The seven-day clock.",
    ),
    open_window: Nullable(
      OpenItem(
        { clock: Type.Integer({ minimum: 1 }), starts_at: Timestamp(), ends_at: Timestamp() },
        "The window now under observation.",
      ),
      "The window now under observation; null unless running.",
    ),
    closed_windows: Type.Array(Window, { description: "Every closed window of every clock, oldest first." }),
    incidents: Type.Array(DogfoodIncident, {
      description: "Every incident, with issue and resolution, by occurrence.",
    }),
    maintenance: Type.Array(DogfoodMaintenance, { description: "Every declared maintenance interval, by start." }),
    interventions: Type.Array(DogfoodIntervention, { description: "Every recorded intervention, by time." }),
    lifecycle_changes: Type.Array(DogfoodLifecycleChange, { description: "Every recorded lifecycle change, by time." }),
    scorecard: OpenItem(
      {
        month: Type.String({ pattern: DOGFOOD_MONTH_PATTERN, description: "The month it scores (`YYYY-MM`, now)." }),
        spend_cents: Count("The month's recorded spend: every spend line of the month except its `plan` line."),
        spend_ceiling_cents: Nullable(
          Count("Ceiling."),
          "The ceiling of the month's recorded spend plan (the spend line whose source is `plan`); null when no plan is recorded.",
        ),
        within_ceiling: Nullable(
          Type.Boolean(),
          "Whether the month's spend is at most the plan's ceiling; null when no plan is recorded.",
        ),
        months: Type.Array(
          OpenItem(
            {
              month: Type.String({ pattern: DOGFOOD_MONTH_PATTERN }),
              spend_cents: Count("Recorded spend."),
              spend_ceiling_cents: Nullable(Count("Ceiling."), "The plan's ceiling; null without a plan."),
              within_ceiling: Nullable(Type.Boolean(), "Spend at most the ceiling; null without a plan."),
            },
            "One month's spend against its plan.",
          ),
          { description: "Every month with recorded spend or a plan, oldest first." },
        ),
        windows_counted: Count("Closed windows that counted."),
        windows_not_counted: Count("Closed windows that did not count."),
        incidents: Count("Incidents recorded."),
        zero_tolerance_incidents: Count("Incidents of a zero-tolerance class."),
        unresolved_incidents: Count("Incidents without a resolution."),
        issues_filed_late: Count("Incidents whose issue was filed on a different UTC day than the incident."),
        routine_interventions: Count("Routine interventions recorded."),
        probes: ProbeAccount,
      },
      "The scorecard: the month's recorded spend against the recorded spend plan's ceiling (rule 13), and the period's counts.",
    ),
    beta_decision: Nullable(
      OpenItem(
        {
          decision: Literals(
            ["beta", "no_beta"] as const,
            "`beta`: the period ended with seven consecutive counting windows, every incident resolved and spend within the plan; otherwise `no_beta`.",
          ),
          at: Timestamp("When the period ended (the end of its last window, or the failing intervention)."),
          reasons: Type.Array(Type.String(), { description: "What the decision rests on, one sentence each." }),
        },
        "The beta decision record.",
      ),
      "The beta decision record once the period ended or failed; null before.",
    ),
  },
  {
    description:
      "The dogfood period: entry gate with each condition's parts, state, clock, closed windows, every incident with issue and resolution, scorecard, and once ended the beta decision. Computed on every read from what is recorded and from the job ledger.",
  },
);

export const DogfoodRunRecord = Open(
  "DogfoodRunRecord",
  {
    id: Type.String({
      description:
        "The run record identity: `probe:<job>` for a canary job, `head:<owner/name>@<sha>` for the first dogfood job of a head commit, else `shadow:<job>`; `#n` names attempt n > 1.",
    }),
    kind: Literals(["shadow", "probe", "head"] as const, "Which kind of run record it is."),
    tenant: Type.String({ description: "The tenant that ran it (the dogfood or the canary tenant)." }),
    job: Type.String({ description: "The job id." }),
    attempt: Type.Integer({ minimum: 1, description: "The attempt this record is (1 unless `#n`)." }),
    attempts: Count("Attempts the job has started."),
    repository: Type.String({ description: "The job's repository (`owner/name`)." }),
    head_sha: Type.Optional(Type.String({ description: "The head commit the job checks; absent when it names none." })),
    status: Type.String({ description: "The job's status now." }),
    accepted_at: Timestamp("When the job was accepted."),
    attempt_state: Type.Optional(
      Type.String({ description: "`running`, `finished` or `lost`; absent while the attempt has not started." }),
    ),
    host: Type.Optional(Type.String({ description: "The host that ran the attempt." })),
    started_at: Type.Optional(Timestamp("When the attempt started.")),
    finished_at: Type.Optional(Timestamp("When the attempt finished or was recorded lost.")),
    outcome: Type.Optional(Type.String({ description: "The attempt's outcome as its host reported it." })),
    exit_code: Type.Optional(Type.Integer({ description: "Cargo's exit code as the host reported it." })),
    queue_seconds: Type.Optional(
      Type.Number({
        minimum: 0,
        description: "Seconds from acceptance to the first attempt's start (attempt 1 only).",
      }),
    ),
    duration_seconds: Type.Optional(
      Type.Number({ minimum: 0, description: "Seconds from the attempt's start to its end." }),
    ),
    tests: Type.Optional(
      OpenItem(
        { passed: Count("Tests passed."), failed: Count("Tests failed."), ignored: Count("Tests ignored.") },
        "Test outcomes in the attempt's report.",
      ),
    ),
    cargo_output_sha256: Type.Optional(Type.String({ description: "SHA-256 of the attempt's retained cargo output." })),
    failure: Type.Optional(
      OpenItem(
        { phase: Type.String(), cause: Type.String(), detail: Type.String() },
        "Why the job failed (the job's failure, on the attempt that settled it).",
      ),
    ),
    usage: Type.Optional(
      OpenItem(
        { size: Type.String(), seconds: Type.Number(), vcpu_seconds: Type.Number() },
        "The closed usage record the settling attempt wrote.",
      ),
    ),
    settlements: Type.Optional(
      Count("Settlements the ledger holds for the job (1 when settled once; more is a duplicate charge)."),
    ),
    window: Type.Optional(
      OpenItem(
        { starts_at: Timestamp(), ends_at: Timestamp() },
        "The trial window (else the UTC day) the attempt started in, over which the p95 thresholds are taken.",
      ),
    ),
    window_p95_duration_seconds: Type.Optional(
      Type.Number({ minimum: 0, description: "The p95 duration of records of its kind that finished in its window." }),
    ),
    absent: Type.Array(
      OpenItem(
        { field: Type.String({ description: "The absent member." }), reason: Type.String({ description: "Why." }) },
        "An absent field and why.",
      ),
      { description: "Each optional member the record lacks, with its reason; every other member is present." },
    ),
    threshold_labels: Type.Array(Type.String(), {
      description:
        "Thresholds it crosses: `duration_over_window_p95`, `wrong_green`, `duplicate_execution`, `duplicate_charge`, `failed`, `lost`, `declared_maintenance`.",
    }),
    incidents: Type.Array(DogfoodIncident, { description: "Every incident naming it, with issue and resolution." }),
  },
  {
    description:
      "One dogfood run record — a job of the dogfood tenant or a canary probe, one attempt of it: every field (each absent one listed with its reason), threshold labels, and every incident naming it.",
  },
);
