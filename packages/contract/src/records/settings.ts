import { Type } from "@sinclair/typebox";
import { Closed, NextCursor, Nullable, RepositoryName, Timestamp } from "../schema-helpers.js";
import { SizeSchema, TOOLCHAIN_PATTERN } from "./jobs.js";
import { VcpuPricesBySize } from "./operator.js";
import { FlakyPolicySetting, FlakyRetriesSetting } from "./test-evidence.js";

/* ───────────────────────────── Settings ───────────────────────────── */

/** Where a setting's effective value comes from (the spec's own phrases). */
export const SETTING_ORIGINS = [
  "platform default",
  "repository configuration",
  "dashboard repository setting",
  "tenant setting",
  "operator control",
] as const;
export type SettingOrigin = (typeof SETTING_ORIGINS)[number];

export const SettingOriginSchema = () =>
  Type.Union(
    SETTING_ORIGINS.map((o) => Type.Literal(o)),
    {
      description:
        "Where the value comes from: `platform default`; `repository configuration` (the repository's own Cargo " +
        "configuration, which is never replaced); `dashboard repository setting`; `tenant setting`; " +
        "`operator control` (set only through the operator console).",
    },
  );

/** A setting's value: a string, an integer or a boolean. */
export const SettingValue = (description = "The value: a string, an integer, a boolean or a list of strings.") =>
  Type.Union([Type.String(), Type.Integer(), Type.Boolean(), Type.Array(Type.String())], { description });

export const SETTING_NAME_PATTERN = "^[A-Za-z0-9_.:-]{1,128}$";

export const Setting = Closed(
  "Setting",
  {
    name: Type.String({
      pattern: SETTING_NAME_PATTERN,
      description:
        "The setting's name: a settings name such as `wall_clock_ceiling_seconds`, or the injected Cargo build " +
        "setting such as `CARGO_INCREMENTAL` or `profile.dev.debug`.",
    }),
    value: SettingValue("The effective value."),
    origin: SettingOriginSchema(),
    status: Type.Optional(
      Type.Union([Type.Literal("applied"), Type.Literal("not applied")], {
        description:
          "Whether this runtime applies the value: `not applied` when the repository's own Cargo configuration " +
          "already sets it or this runtime does not apply that setting; detail says which.",
      }),
    ),
    detail: Type.Optional(Type.String({ description: "Why the value is what it is, or why it is not applied." })),
  },
  { description: "One effective setting: its value, where the value comes from and whether it is applied." },
);

/** Names a repositories.settings.write accepts in `changes`. */
export const REPOSITORY_WRITABLE_SETTINGS = [
  "affected_tests",
  "total_injection_opt_out",
  "wall_clock_ceiling_seconds",
  "lineage_seeding",
  // kiln extensions (issue 37): re-runs of a failed test, and what a flaky test does to the verdict.
  "flaky_retries",
  "flaky_policy",
] as const;

/** Names a tenant.settings.write accepts in `changes`. */
export const TENANT_WRITABLE_SETTINGS = [
  "default_size",
  "allowed_sizes",
  "default_toolchain",
  "wall_clock_ceiling_seconds",
  "artifact_retention_days",
  "log_retention_days",
  "agents_may_submit",
] as const;

/**
 * Tenant names set only by the operator (operator.tenants.controls.set); a
 * tenant.settings.write naming one is refused `operator_controlled` and audited.
 */
export const TENANT_OPERATOR_CONTROLLED_SETTINGS = [
  "max_running_jobs",
  "storage_quota_bytes",
  "bandwidth_bytes_per_month",
  "rate_card",
  "suspension",
] as const;

/** Longest retention a tenant may choose, in days. */
export const MAX_RETENTION_DAYS = 365;

const operatorControlled = (what: string) =>
  Type.Optional(
    Type.Unknown({
      description: `Operator-controlled (${what}); a tenant write naming it, with any value, is refused operator_controlled and audited.`,
    }),
  );

export const SettingWrite = Closed(
  "SettingWrite",
  {
    version: Type.Integer({
      minimum: 0,
      description:
        "The settings version the caller observed (from the settings read); a moved-past version is refused " +
        "stale_version naming current_version.",
    }),
    changes: Type.Object(
      {
        affected_tests: Type.Optional(
          Type.Boolean({
            description:
              "Repository: cargo test jobs that select no packages themselves run only the affected packages' tests (crate granularity, since the lineage's last passing test run).",
          }),
        ),
        total_injection_opt_out: Type.Optional(
          Type.Boolean({ description: "Repository: inject no build settings at all into its jobs." }),
        ),
        lineage_seeding: Type.Optional(
          Type.Boolean({
            description:
              "Repository (kiln extension; default true): a job whose lineage is new (the repository's first job of its class on a host) starts from a copy of the tenant's own lineage that shares the most dependency builds with it; false: it starts cold. Each job's evidence shows the value it was admitted with (admitted.lineage_seeding).",
          }),
        ),
        wall_clock_ceiling_seconds: Type.Optional(
          Type.Integer({
            minimum: 1,
            description:
              "Repository: the wall-clock ceiling a job carries when its captured source pins none; between " +
              "minimum_wall_clock_ceiling_seconds and platform_default_wall_clock_ceiling_seconds, else invalid_request. " +
              "Tenant: the same, for repositories that set none.",
          }),
        ),
        flaky_retries: Type.Optional(FlakyRetriesSetting()),
        flaky_policy: Type.Optional(FlakyPolicySetting()),
        default_size: Type.Optional(
          SizeSchema("Tenant: the machine size the CLI and dashboard propose when a submission names none."),
        ),
        allowed_sizes: Type.Optional(
          Type.Array(SizeSchema(), {
            minItems: 1,
            uniqueItems: true,
            description:
              "Tenant: the machine sizes members may submit on; another size is refused invalid_request at " +
              "submission. Must include default_size.",
          }),
        ),
        agents_may_submit: Type.Optional(
          Type.Boolean({
            description: "Tenant: whether agent credentials with the submit scope may submit jobs (default true).",
          }),
        ),
        default_toolchain: Type.Optional(
          Type.String({
            pattern: TOOLCHAIN_PATTERN,
            description:
              "Tenant: the toolchain the CLI pins when the workspace pins none (e.g. `stable`, `1.82.0`); the " +
              "submitted workspace always carries the pinned toolchain it was admitted with.",
          }),
        ),
        artifact_retention_days: Type.Optional(
          Type.Integer({
            minimum: 1,
            maximum: MAX_RETENTION_DAYS,
            description: "Tenant: days published artifacts are served before they answer gone (new publications).",
          }),
        ),
        log_retention_days: Type.Optional(
          Type.Integer({
            minimum: 1,
            maximum: MAX_RETENTION_DAYS,
            description: "Tenant: days job logs and retained Cargo output are served before they answer gone.",
          }),
        ),
        max_running_jobs: operatorControlled("concurrency: most jobs running at once"),
        storage_quota_bytes: operatorControlled("storage quota"),
        bandwidth_bytes_per_month: operatorControlled("monthly transfer allowance"),
        rate_card: operatorControlled("the rate card usage is priced with"),
        suspension: operatorControlled("tenant suspension"),
      },
      {
        additionalProperties: false,
        minProperties: 1,
        description:
          "Setting name → new value; at least one. repositories.settings.write accepts affected_tests, " +
          "total_injection_opt_out, wall_clock_ceiling_seconds and lineage_seeding. tenant.settings.write accepts default_size, " +
          "allowed_sizes, default_toolchain, wall_clock_ceiling_seconds, artifact_retention_days, " +
          "log_retention_days and agents_may_submit; max_running_jobs, storage_quota_bytes, " +
          "bandwidth_bytes_per_month, rate_card and suspension are refused operator_controlled. Any other name the " +
          "target does not accept is refused invalid_request naming it. A write is all-or-nothing.",
      },
    ),
  },
  { description: "A settings write: the version the caller observed and the values to change." },
);

export const SettingReceipt = Closed(
  "SettingReceipt",
  {
    target: Type.String({
      description: "What was written: `repository:<owner/name>` or `tenant:<tenant>`.",
    }),
    version: Type.Integer({ minimum: 0, description: "The new settings version; the next write names it." }),
    changed_by: Type.String({ description: "Principal that wrote (user id or `agent:<name>`)." }),
    changed_at: Timestamp(),
    effective: Type.String({
      description:
        "When the values take effect, e.g. `next admitted job` (admission snapshots settings; jobs already " +
        "admitted keep theirs).",
    }),
    not_applied: Type.Array(Type.String({ pattern: SETTING_NAME_PATTERN }), {
      description: "Names written that this runtime records but does not apply; empty when all apply.",
    }),
  },
  { description: "The receipt of a settings write; the write is attributed in the audit trail." },
);

/* ─────────────────────────── Tenant settings ─────────────────────────── */

const LimitWithConsumption = (description: string) =>
  Type.Object(
    {
      limit: Type.Integer({
        minimum: 0,
        description: "The operator-set limit (the platform default until the operator sets one).",
      }),
      consumption: Type.Integer({ minimum: 0, description: "Current consumption against the limit." }),
    },
    { additionalProperties: false, description },
  );

export const TenantSettings = Closed(
  "TenantSettings",
  {
    tenant: Type.String({ description: "The tenant these settings belong to." }),
    version: Type.Integer({ minimum: 0, description: "The version a tenant.settings.write must name." }),
    changed_by: Nullable(Type.String(), "Principal of the last write; null while never written."),
    changed_at: Nullable(Timestamp(), "When the last write happened; null while never written."),
    settings: Type.Array(Setting, {
      description:
        "Every tenant-writable setting (default_size, allowed_sizes, default_toolchain, " +
        "wall_clock_ceiling_seconds, artifact_retention_days, log_retention_days, agents_may_submit) with its " +
        "effective value and origin.",
    }),
    limits: Type.Object(
      {
        max_running_jobs: LimitWithConsumption(
          "Concurrency: most jobs running at once; consumption is the jobs running now.",
        ),
        storage_quota_bytes: LimitWithConsumption(
          "Storage quota in bytes; consumption is the bytes counted against it now (lineages included).",
        ),
        bandwidth_bytes_per_month: LimitWithConsumption(
          "Bytes transferred in and out this calendar month (UTC); consumption is this month's so far.",
        ),
      },
      {
        additionalProperties: false,
        description: "Operator-set limits beside current consumption.",
      },
    ),
    consumption_measured_at: Timestamp("When the consumption figures were measured."),
    suspended: Type.Boolean({ description: "The operator suspended the tenant: new submissions are refused." }),
    operator_controlled: Type.Array(Type.String({ pattern: SETTING_NAME_PATTERN }), {
      description: "Names that change only through the operator console; writing one is refused operator_controlled.",
    }),
  },
  { description: "Tenant policy with its version and attribution, and operator-set limits beside consumption." },
);

/* ───────────────────────── Registry credential ───────────────────────── */

export const REGISTRY_HOST_PATTERN = "^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})(?::[0-9]{1,5})?$";

export const RegistryCredentialReplacement = Closed(
  "RegistryCredentialReplacement",
  {
    registry: Type.String({
      pattern: REGISTRY_HOST_PATTERN,
      description: "The private registry's host (optionally `:port`).",
    }),
    authorization: Type.String({
      minLength: 1,
      maxLength: 8192,
      description:
        "The authorization value the dependency gateway presents to the registry (e.g. `Bearer …`); never " +
        "echoed, logged or shown to a job.",
    }),
    confirm: Type.String({
      description:
        "Must equal `registry`: the replacement removes the prior value once every host acknowledges; " +
        "otherwise confirmation_required.",
    }),
  },
  { description: "Replace the tenant's credential for one private registry on every host." },
);

export const RegistryCredentialReceipt = Closed(
  "RegistryCredentialReceipt",
  {
    registry: Type.String({ description: "The registry host." }),
    version: Type.Integer({ minimum: 1, description: "The now-active credential version for this registry." }),
    replaced_by: Type.String({ description: "Principal that replaced it." }),
  },
  { description: "Receipt of a registry credential replacement; never carries the value." },
);

/* ───────────────────────────── CLI tokens ───────────────────────────── */

export const CLI_TOKEN_ID_PATTERN = "^[A-Za-z0-9_-]{1,64}$";

export const CliToken = Closed(
  "CliToken",
  {
    id: Type.String({ pattern: CLI_TOKEN_ID_PATTERN, description: "The token's identity; not its value." }),
    principal: Type.String({ description: "User id of the person the token acts for (carries that person's role)." }),
    requesting_host: Type.String({ description: "Host name the device authorization was requested from." }),
    created_at: Timestamp("When the device authorization was approved and the token issued."),
    last_used_at: Nullable(Timestamp(), "Last request presenting it; null if never used."),
    revoked_at: Nullable(Timestamp(), "Null while live."),
    revoked_by: Nullable(Type.String(), "Principal that revoked it; null while live."),
  },
  { description: "A CLI device token (`kiln_cli_…`) as listed; never carries the value." },
);

export const TokensPage = Closed("TokensPage", {
  tokens: Type.Array(CliToken, { description: "The person's CLI tokens, live and revoked, newest first." }),
  next_cursor: NextCursor(),
});

export const RevocationReceipt = Closed(
  "RevocationReceipt",
  {
    id: Type.String({ pattern: CLI_TOKEN_ID_PATTERN, description: "The revoked token's id." }),
    revoked_at: Timestamp(),
    revoked_by: Type.String({ description: "Principal that revoked it." }),
  },
  { description: "Receipt of a CLI token revocation; the next request presenting it is refused." },
);

/* ──────────────────────────────── Usage ──────────────────────────────── */

export const PERIOD_PATTERN = "^[0-9]{4}-(0[1-9]|1[0-2])$";
export const DATE_PATTERN = "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$";

const Period = () => Type.String({ pattern: PERIOD_PATTERN, description: "The calendar month (UTC), `YYYY-MM`." });

const AmountCents = (description: string) => Nullable(Type.Integer(), description);

/** Mirrors the rate card of TenantControls (operator.tenants.controls). */
const RateCard = () =>
  Nullable(
    Type.Object(
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
      { additionalProperties: false },
    ),
    "The rate card usage is priced with; null when none is set (then every amount_cents is null).",
  );

/** vCPU-seconds per machine size, sizes with none left out. */
const VcpuSecondsBySize = () =>
  Type.Array(
    Type.Object({ size: SizeSchema(), vcpu_seconds: Type.Integer({ minimum: 0 }) }, { additionalProperties: false }),
    { description: "Metered vCPU-seconds per machine size (before adjustments), sizes with none left out." },
  );

const StorageByteHours = (description: string) =>
  Nullable(
    Type.Integer({ minimum: 0 }),
    `${description} The sum of hourly samples of the bytes the tenant's live lineages hold (one sample per ` +
      "completed UTC hour, each counted as that hour held); hours no server sampled are not counted. Null only " +
      "in documents of runtimes that do not sample.",
  );

const usageMeasures = {
  vcpu_seconds: Type.Integer({ minimum: 0, description: "vCPUs × metered seconds (before adjustments)." }),
  vcpu_seconds_by_size: VcpuSecondsBySize(),
  jobs: Type.Integer({ minimum: 0, description: "Jobs with at least one metered attempt." }),
  attempts: Type.Integer({ minimum: 0, description: "Metered attempts." }),
  storage_byte_hours: StorageByteHours("Lineage storage held, in byte-hours."),
  bytes_uploaded: Type.Integer({ minimum: 0, description: "Source part bytes uploaded (not reused)." }),
  amount_cents: AmountCents(
    "Sum of the amount_cents of the metering, storage and upload records this line covers; null without a rate card.",
  ),
};

const UsageTotals = () =>
  Type.Object(
    {
      vcpu_seconds: Type.Integer({ description: "Metered vCPU-seconds plus adjustments." }),
      vcpu_seconds_by_size: VcpuSecondsBySize(),
      jobs: Type.Integer({ minimum: 0, description: "Distinct jobs with a metered attempt in the period." }),
      attempts: Type.Integer({ minimum: 0 }),
      storage_byte_hours: StorageByteHours("Lineage storage held in the period, in byte-hours."),
      bytes_uploaded: Type.Integer({ minimum: 0, description: "Source part bytes uploaded in the period." }),
      adjustment_vcpu_seconds: Type.Integer({ description: "Net vCPU-seconds of the period's adjustments." }),
      adjustment_amount_cents: AmountCents("Net amount of the period's adjustments; null without a rate card."),
      amount_cents: AmountCents(
        "Sum of the per-day amount_cents plus adjustment_amount_cents; null without a rate card.",
      ),
    },
    {
      additionalProperties: false,
      description:
        "Period totals: attempts, bytes_uploaded and vcpu_seconds_by_size are the sums of the days; vcpu_seconds " +
        "is the days' sum plus adjustment_vcpu_seconds; the usage export's totals are identical.",
    },
  );

export const Usage = Closed(
  "Usage",
  {
    tenant: Type.String(),
    period: Period(),
    as_of: Timestamp("Usage is complete up to this instant; the current month is partial."),
    rate_card: RateCard(),
    days: Type.Array(
      Type.Object(
        {
          date: Type.String({ pattern: DATE_PATTERN, description: "UTC day, `YYYY-MM-DD`." }),
          ...usageMeasures,
        },
        { additionalProperties: false },
      ),
      { description: "One line per UTC day of the period that had usage, oldest first." },
    ),
    repositories: Type.Array(
      Type.Object({ repository: RepositoryName(), ...usageMeasures }, { additionalProperties: false }),
      { description: "One line per repository with usage in the period." },
    ),
    totals: UsageTotals(),
  },
  {
    description:
      "Usage of one month per day and per repository, priced where a rate card is set. Metering is per second; " +
      "a metering record counts on the UTC day it started; a job cancelled before placement has no usage.",
  },
);

export const UsageExport = Closed(
  "UsageExport",
  {
    tenant: Type.String(),
    period: Period(),
    as_of: Timestamp("The export is complete up to this instant."),
    rate_card: RateCard(),
    records: Type.Array(
      Type.Object(
        {
          job: Type.String({ description: "Job id." }),
          attempt: Type.Integer({ minimum: 1, description: "Attempt number within the job, 1 for the first." }),
          repository: RepositoryName(),
          submitted_by: Type.String({ description: "Principal that submitted the job." }),
          size: SizeSchema("The machine size the attempt ran on."),
          vcpus: Type.Integer({ minimum: 1 }),
          started_at: Timestamp("Metering start."),
          ended_at: Timestamp("Metering end."),
          vcpu_seconds: Type.Integer({ minimum: 0, description: "vcpus × whole metered seconds." }),
          outcome: Type.String({
            description:
              "How the attempt ended: `passed`, `failed`, `cancelled` (metered to the cancellation request) or " +
              "`lost` (its host stopped renewing the lease; credited by an infrastructure adjustment).",
          }),
          amount_cents: AmountCents(
            "Charge for this record, rounded half up to whole cents; null without a rate card.",
          ),
        },
        { additionalProperties: false },
      ),
      { description: "Per-second metering records, one per settled attempt, ordered by started_at, job, attempt." },
    ),
    storage: Type.Array(
      Type.Object(
        {
          date: Type.String({ pattern: DATE_PATTERN, description: "UTC day, `YYYY-MM-DD`." }),
          repository: RepositoryName(),
          byte_hours: Type.Integer({ minimum: 0 }),
          amount_cents: AmountCents(
            "Charge for this record, rounded half up to whole cents; null without a rate card.",
          ),
        },
        { additionalProperties: false },
      ),
      {
        description:
          "Lineage storage per UTC day and repository (byte-hours of completed hours), priced at cents_per_gib_month " +
          "per 2^30 bytes held 720 hours; ordered by date then repository.",
      },
    ),
    uploads: Type.Array(
      Type.Object(
        {
          date: Type.String({ pattern: DATE_PATTERN, description: "UTC day the parts were received, `YYYY-MM-DD`." }),
          upload: Type.String({ description: "The source upload (its reservation's idempotency key)." }),
          repository: RepositoryName(),
          principal: Type.String({ description: "Principal that reserved the upload." }),
          bytes: Type.Integer({ minimum: 0, description: "Part bytes uploaded that day (reused parts excluded)." }),
          amount_cents: AmountCents(
            "Charge for this record (cents_per_gib_uploaded), rounded half up to whole cents; null without a rate card.",
          ),
        },
        { additionalProperties: false },
      ),
      { description: "Source bytes uploaded per upload and UTC day, ordered by date then upload." },
    ),
    adjustments: Type.Array(
      Type.Object(
        {
          kind: Type.Union(
            [
              Type.Literal("cancelled_before_placement"),
              Type.Literal("infrastructure"),
              Type.Literal("operator_credit"),
            ],
            {
              description:
                "`cancelled_before_placement`: the job never ran, so nothing is charged (zero); `infrastructure`: " +
                "the attempt ended by the platform (host lost, or a failure with cause infrastructure), its metering " +
                "record is credited in full; `operator_credit`: a credit an operator granted.",
            },
          ),
          job: Nullable(Type.String(), "The job adjusted; null for a credit not tied to one."),
          attempt: Nullable(Type.Integer({ minimum: 1 }), "The attempt adjusted; null when none ran."),
          reason: Type.String({ description: "Why the adjustment was made (e.g. an incident credit)." }),
          vcpu_seconds: Type.Integer({ description: "Signed; negative credits usage." }),
          amount_cents: AmountCents("Signed; negative is a credit. Null without a rate card."),
          at: Timestamp(),
        },
        { additionalProperties: false },
      ),
      {
        description:
          "Adjustments to the period's usage: an attempt's credit is on the page of its record; cancellations " +
          "before placement follow the records, oldest first.",
      },
    ),
    totals: Nullable(
      UsageTotals(),
      "The period's totals as of as_of, on the first page; null on the pages a cursor asked for.",
    ),
    next_cursor: NextCursor(),
  },
  {
    description:
      "The month's usage as per-second metering records, upload records and adjustments, keyset-paged: the " +
      "first page carries the period's totals as of as_of, and every page (its cursor keeps as_of) lists only " +
      "what had settled by then, so the records and adjustments of all pages sum to those totals, which equal " +
      "the usage report's for the same period and instant. Operator credits are `operator_credit` adjustments.",
  },
);
