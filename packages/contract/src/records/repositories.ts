import { Type } from "@sinclair/typebox";
import { Closed, NextCursor, RepositoryName, Timestamp } from "../schema-helpers.js";
import { Setting, SettingOriginSchema } from "./settings.js";

export const Admission = Closed(
  "Admission",
  {
    merge_base: Type.String({
      description: "Commit id admission resolved as the merge base of base_ref.",
    }),
  },
  { description: "The repository is onboarded; the merge base of the requested base_ref." },
);

export const RepositoryTotal = Closed(
  "RepositoryTotal",
  {
    repository: RepositoryName(),
    total_bytes: Type.Integer({ minimum: 0, description: "Bytes its lineages hold." }),
  },
  { description: "One repository's lineage storage." },
);

export const Lineage = Closed(
  "Lineage",
  {
    repository: RepositoryName(),
    class: Type.String({ description: "The job class the cached build state serves." }),
    lineage: Type.String({ description: "The lineage's identity; a purge names it." }),
    bytes: Type.Integer({ minimum: 0, description: "Bytes it holds, counted against the tenant storage quota." }),
    last_used_at: Timestamp("When a job last restored or saved it."),
  },
  { description: "Cached build state of one repository and job class." },
);

export const Advisory = Closed(
  "Advisory",
  {
    id: Type.String({ description: "The advisory's identity; a dismissal names it." }),
    repository: RepositoryName(),
    text: Type.String({ description: "The recommendation with its measured value." }),
    remediation_href: Type.String({ description: "Link to how to act on it." }),
  },
  { description: "A recommendation with a measured basis, as listed." },
);

export const AdvisoryDetail = Closed(
  "AdvisoryDetail",
  {
    id: Type.String({ description: "The advisory's identity; a dismissal names it." }),
    key: Type.String({ description: "What kind of advisory it is (stable across measurements)." }),
    measured_value: Type.String({ description: "The measured value the recommendation rests on." }),
    basis_signature: Type.String({
      description: "Signature of the measurements it rests on; a changed basis yields a new advisory.",
    }),
    recommendation: Type.String({ description: "What to change." }),
    remediation_href: Type.String({ description: "Link to how to act on it." }),
  },
  { description: "An advisory of one repository with its measured basis." },
);

export const RepositoriesPage = Closed(
  "RepositoriesPage",
  {
    repositories: Type.Array(RepositoryTotal, { description: "Onboarded repositories with their storage." }),
    lineages: Type.Array(Lineage, { description: "Lineages of the repositories on this page." }),
    total_bytes: Type.Integer({ minimum: 0, description: "Bytes all of the tenant's lineages hold." }),
    storage_quota_bytes: Type.Optional(
      Type.Integer({ minimum: 0, description: "The tenant's storage quota; absent when none is set." }),
    ),
    advisories: Type.Array(Advisory, { description: "Undismissed advisories of the repositories on this page." }),
    next_cursor: NextCursor(),
  },
  { description: "A page of the tenant's repositories with lineages, storage and advisories." },
);

export const RepositoryPage = Closed(
  "RepositoryPage",
  {
    repository: RepositoryName(),
    lineages: Type.Array(Lineage),
    total_bytes: Type.Integer({ minimum: 0, description: "Bytes this repository's lineages hold." }),
    storage_quota_bytes: Type.Integer({ minimum: 0, description: "The tenant's storage quota." }),
    advisories: Type.Array(AdvisoryDetail, { description: "Undismissed advisories." }),
  },
  { description: "One repository: its lineages, storage and advisories." },
);

export const RepositorySettings = Closed(
  "RepositorySettings",
  {
    repository: RepositoryName(),
    version: Type.Integer({ minimum: 0, description: "The version a repositories.settings.write must name." }),
    affected_tests: Type.Boolean({
      description:
        "cargo test jobs run only the tests of the packages the change since the lineage's last passing test run affects (crate granularity; the evidence's affected_tests says what ran and was skipped).",
    }),
    total_injection_opt_out: Type.Boolean({ description: "Inject no build settings at all into its jobs." }),
    total_injection_opt_out_origin: SettingOriginSchema(),
    changed_by: Type.String({ description: "Principal of the last write (of onboarding, before any write)." }),
    changed_at: Timestamp("When the last write (or onboarding) happened."),
    effective: Type.String({
      description:
        "When changes take effect on this runtime (admission snapshots settings for each job), naming any " +
        "setting it does not apply.",
    }),
    injected: Type.Array(Setting, {
      description:
        "The effective build settings a job is admitted with; one the repository's own Cargo configuration " +
        "already sets is `not applied` and never replaced.",
    }),
    wall_clock_ceiling: Setting,
    wall_clock_ceiling_seconds: Type.Integer({
      minimum: 1,
      description: "The ceiling a job carries when its captured source pins none.",
    }),
    wall_clock_ceiling_origin: SettingOriginSchema(),
    minimum_wall_clock_ceiling_seconds: Type.Integer({ minimum: 1, description: "Least ceiling a write may set." }),
    platform_default_wall_clock_ceiling_seconds: Type.Integer({
      minimum: 1,
      description: "The platform default ceiling, also the most a write may set.",
    }),
  },
  { description: "A repository's settings at a version. Reading them has no lifecycle effect." },
);

export const DismissalReceipt = Closed(
  "DismissalReceipt",
  {
    advisory: Type.String({ description: "The dismissed advisory's id." }),
    dismissed_by: Type.String({ description: "Principal that dismissed it; the dismissal is remembered." }),
  },
  { description: "Receipt of an advisory dismissal." },
);

export const PurgeRequest = Closed(
  "PurgeRequest",
  {
    lineage: Type.String({ minLength: 1, description: "The lineage identity to purge." }),
    confirm: Type.String({
      description:
        "Must equal `lineage`: the purge deletes its cached build state and the next matching job starts cold; " +
        "otherwise confirmation_required.",
    }),
  },
  { description: "Purge one lineage of the repository." },
);

export const PurgeReceipt = Closed(
  "PurgeReceipt",
  {
    lineage: Type.String({ description: "The purged lineage." }),
    consequence: Type.String({
      description: "What the purge did, e.g. bytes freed and that the next job starts cold.",
    }),
    purged_by: Type.String({ description: "Principal that purged it." }),
  },
  { description: "Receipt of a lineage purge." },
);

export const RepositoryOnboardingRequest = Closed(
  "RepositoryOnboardingRequest",
  { repository: RepositoryName("The repository to onboard, `owner/name` as the source host spells it.") },
  { description: "Onboard one repository for the caller's tenant (a kiln extension: repositories.onboard)." },
);

export const RepositoryOnboarded = Closed(
  "RepositoryOnboarded",
  {
    repository: RepositoryName(),
    created: Type.Boolean({
      description:
        "false: it was already onboarded; nothing changed and the first onboarding's time and principal stay.",
    }),
    onboarded_at: Timestamp("When the repository was first onboarded for the tenant."),
    onboarded_by: Type.String({ description: "Principal that first onboarded it." }),
  },
  {
    description:
      "The repository is onboarded: jobs may name it. Check runs on its commits still need the source-hosting app installed on it.",
  },
);
