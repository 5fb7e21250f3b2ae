import { type Static, Type } from "@sinclair/typebox";
import { Nullable, RepositoryName, Timestamp } from "../schema-helpers.js";
import { CargoInvocation, FAILURE_CAUSES, failureItemProperties } from "./jobs.js";
import { Sha256Hex } from "./sources.js";
import {
  FlakyPolicySetting,
  FlakyRetriesSetting,
  RetriesItem,
  TestBinaryItem,
  TimelineItem,
  testItemExtensions,
} from "./test-evidence.js";

/**
 * What a host agent and the control plane say to each other (the host protocol). These
 * schemas are its only definition: the host agent's types, the control plane's host service
 * and every binding of the protocol (in-process today, HTTP for a remote `kiln-host`) are
 * derived from them, and the service validates what a host reports against them. Members are
 * camelCase like the rest of this internal protocol; evidence items keep the snake_case of
 * the JobEvidence report they become.
 */

const Count = (description?: string) =>
  Type.Integer({ minimum: 0, ...(description === undefined ? {} : { description }) });

// ---------------------------------------------------------------- enrollment

export const HostEnrollment = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 128 }),
    vcpus: Type.Integer({ minimum: 1 }),
    memoryBytes: Type.Integer({ minimum: 1 }),
    isolation: Type.Union([Type.Literal("sandbox"), Type.Literal("microvm")]),
    isolationReason: Type.Optional(
      Type.String({
        maxLength: 2000,
        description: "Why the host serves with this isolation (KILN_EXECUTOR and, for auto, what its KVM probe found).",
      }),
    ),
  },
  { additionalProperties: false, description: "A host announcing itself and what it offers." },
);
export type HostEnrollment = Static<typeof HostEnrollment>;

// ---------------------------------------------------------------- placement

/** A slice of a part blob: `length` bytes from `offset` of the blob named `part` (its SHA-256). */
export const SourceSegment = Type.Object(
  { part: Sha256Hex(), offset: Count(), length: Count() },
  { additionalProperties: false },
);
export type SourceSegment = Static<typeof SourceSegment>;

/**
 * One entry of a job's exact source. A regular file (kind absent or `file`) has the content
 * named by sha256: in the blob of that name (inline sources), or — when `segments` is set
 * (streamed archives) — the concatenation of slices of the upload's part blobs, verified
 * against sha256 when the upload completed. A symlink is created pointing at `target`
 * verbatim; its sha256 is that of the target text and bytes is 0.
 */
export const SourceEntry = Type.Object(
  {
    path: Type.String({ minLength: 1 }),
    sha256: Sha256Hex(),
    bytes: Count(),
    executable: Type.Boolean(),
    kind: Type.Optional(Type.Union([Type.Literal("file"), Type.Literal("symlink")])),
    target: Type.Optional(Type.String()),
    segments: Type.Optional(Type.Array(SourceSegment)),
  },
  { additionalProperties: false },
);
export type SourceEntry = Static<typeof SourceEntry>;

/** vCPUs, memory, process count and disk granted to an attempt (from the job's size). */
export const ResourceLimits = Type.Object(
  {
    vcpus: Type.Integer({ minimum: 1 }),
    memoryBytes: Type.Integer({ minimum: 1 }),
    pids: Type.Integer({ minimum: 1 }),
    diskBytes: Type.Integer({
      minimum: 1,
      description: "The most bytes the job's target dir may hold (the lineage's restored state included).",
    }),
  },
  { additionalProperties: false },
);
export type ResourceLimits = Static<typeof ResourceLimits>;

/** A build setting admission decided for the job; the host sets `environment` of an applied one. */
export const Injection = Type.Object(
  {
    setting: Type.String(),
    value: Type.String(),
    origin: Type.String(),
    status: Type.Union([Type.Literal("applied"), Type.Literal("not applied")]),
    detail: Type.String(),
    environment: Nullable(Type.Object({ name: Type.String(), value: Type.String() }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type Injection = Static<typeof Injection>;

/** One leased attempt of one job, placed on a host (the host agent's `Placement`). */
export const AttemptPlacement = Type.Object(
  {
    jobId: Type.String({ minLength: 1 }),
    attempt: Type.Integer({ minimum: 1 }),
    leaseToken: Type.String({ minLength: 1 }),
    size: Type.String(),
    limits: ResourceLimits,
    invocation: CargoInvocation,
    toolchain: Type.String({
      description: "The toolchain admitted at submission (requested or pinned by the source).",
    }),
    source: Type.Array(SourceEntry),
    wallClockSeconds: Type.Integer({ minimum: 1 }),
    tenant: Type.String({ description: "With repository and jobClass, what keys the job's warm lineage on the host." }),
    repository: RepositoryName(),
    jobClass: Type.String({ description: "`<family>/<profile>/<toolchain>`, decided at admission." }),
    lineageDrop: Nullable(
      Type.Object(
        {
          reason: Type.Union([Type.Literal("purged"), Type.Literal("evicted")]),
          throughGeneration: Type.Integer({ minimum: 0 }),
        },
        { additionalProperties: false },
      ),
      "Set when the control plane purged or evicted the lineage: the host drops its state of it descending from throughGeneration or earlier before the attempt.",
    ),
    injections: Type.Array(Injection),
    network: Type.Object(
      {
        policy: Type.Union([Type.Literal("offline"), Type.Literal("dependency-gateway")]),
        reason: Type.String(),
      },
      { additionalProperties: false, description: "The network policy admission decided, and why." },
    ),
    affectedTests: Type.Boolean({
      description:
        "The repository's affected_tests setting as admitted: a cargo test runs only the packages the change since the lineage's last passing test run affects.",
    }),
    flakyRetries: Type.Optional(FlakyRetriesSetting()),
    flakyPolicy: Type.Optional(FlakyPolicySetting()),
  },
  { additionalProperties: false },
);
export type AttemptPlacement = Static<typeof AttemptPlacement>;

// ---------------------------------------------------------------- claim

/**
 * The longest the control plane holds a claim that asked to wait (the long-poll), whatever
 * the host asked: below the idle timeouts of the host listener and of any TCP proxy in front of
 * it (docs/scale-out.md), and well below a host's own request timeout.
 */
export const CLAIM_MAX_WAIT_MS = 25_000;

/** A host asking for work: the next attempt that fits its free vCPUs (and free disk, where it says). */
export const AttemptClaim = Type.Object(
  {
    hostId: Type.String({ minLength: 1, maxLength: 128, description: "The host's identity." }),
    freeVcpus: Type.Integer({ minimum: 1 }),
    freeDiskBytes: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          "The largest disk quota the host can still grant one more attempt: its volume's free space less what its running attempts may still write within theirs. Only sizes whose disk quota fits are placed. Absent: disk does not limit this claim (an executor that writes nothing to the host's disk, or free space above the most the host grants any attempt).",
      }),
    ),
    waitMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 3_600_000,
        description:
          "How long the host will wait for a job to become claimable (the long-poll); the control plane waits at most CLAIM_MAX_WAIT_MS. Absent or 0: answer at once.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type AttemptClaim = Static<typeof AttemptClaim>;

/**
 * Why a claim was answered with nothing: `wait_ended` — the host waited as long as the control
 * plane holds a claim and nothing it can take was queued (ask again at once); `not_admitting` —
 * the host is draining or its admission is closed, so nothing is placed on it (a drain ends a
 * waiting claim so); `not_waiting` — the claim did not wait (it asked for no wait, or the
 * control plane is shutting down). After the last two a host asks again after its poll interval.
 */
export const AttemptClaimIdle = Type.Union(
  [Type.Literal("wait_ended"), Type.Literal("not_admitting"), Type.Literal("not_waiting")],
  { description: "Why nothing was placed; null when an attempt was." },
);
export type AttemptClaimIdle = Static<typeof AttemptClaimIdle>;

/**
 * The answer to a claim: an attempt leased to the host, or nothing and why. A claim that waits
 * is answered at once when a job is claimable, else when a change that can make one claimable
 * (a job queued, a tenant's slot freed, the host's drain lifted) lets it take one, or when the
 * wait ends. The control plane places an attempt only while the host is still there to be
 * answered, and releases one whose answer could not be written.
 */
export const AttemptClaimAnswer = Type.Object(
  {
    placement: Nullable(AttemptPlacement, "The attempt leased to this host, or null when nothing fits."),
    idle: Nullable(AttemptClaimIdle),
  },
  { additionalProperties: false },
);
export type AttemptClaimAnswer = Static<typeof AttemptClaimAnswer>;

// ---------------------------------------------------------------- reports

export const AttemptRef = Type.Object(
  { jobId: Type.String({ minLength: 1 }), attempt: Type.Integer({ minimum: 1 }), leaseToken: Type.String() },
  { additionalProperties: false },
);
export type AttemptRef = Static<typeof AttemptRef>;

export const LogLine = Type.Object(
  {
    stream: Type.Union([Type.Literal("stdout"), Type.Literal("stderr"), Type.Literal("system")]),
    at: Timestamp(),
    text: Type.String(),
  },
  { additionalProperties: false },
);
export type LogLine = Static<typeof LogLine>;

export const HeartbeatAnswer = Type.Union([Type.Literal("continue"), Type.Literal("cancel"), Type.Literal("stale")], {
  description:
    "continue; cancel: the job's cancellation was requested, reap; stale: another holder owns the attempt now.",
});
export type HeartbeatAnswer = Static<typeof HeartbeatAnswer>;

export const AppendAnswer = Type.Union([Type.Literal("accepted"), Type.Literal("stale")]);
export type AppendAnswer = Static<typeof AppendAnswer>;

export const FinishAnswer = Type.Union([Type.Literal("finished"), Type.Literal("stale")]);
export type FinishAnswer = Static<typeof FinishAnswer>;

const Duration = () => Nullable(Count(), "Milliseconds; null while unfinished or unmeasured.");

/** The evidence items a host measures for one attempt; JobEvidence adds `attempt` to each. */
export const PhaseItem = Type.Object(
  {
    name: Type.String({ description: "provision, restore, fetch, build, test, publish, save or reap." }),
    status: Type.Union([
      Type.Literal("pending"),
      Type.Literal("running"),
      Type.Literal("passed"),
      Type.Literal("failed"),
      Type.Literal("skipped"),
      Type.Literal("cancelled"),
    ]),
    started_at: Nullable(Timestamp()),
    finished_at: Nullable(Timestamp()),
    duration_ms: Duration(),
  },
  { additionalProperties: true },
);
export type PhaseItem = Static<typeof PhaseItem>;

export const CrateItem = Type.Object(
  {
    name: Type.String(),
    version: Type.String(),
    source: Type.Union([Type.Literal("workspace"), Type.Literal("registry"), Type.Literal("git")]),
    outcome: Type.Union([Type.Literal("fresh"), Type.Literal("compiled"), Type.Literal("failed")], {
      description: "fresh: reused from the lineage without compiling; compiled; failed.",
    }),
    duration_ms: Duration(),
  },
  { additionalProperties: true },
);
export type CrateItem = Static<typeof CrateItem>;

export const TestItem = Type.Object(
  {
    target: Type.String({ description: "The test binary, e.g. `mycrate (lib)` or `mycrate::integration`." }),
    name: Type.String({ description: "Full test path, e.g. `parser::tests::rejects_empty`." }),
    outcome: Type.Union([Type.Literal("passed"), Type.Literal("failed"), Type.Literal("ignored")]),
    duration_ms: Duration(),
    ...testItemExtensions,
  },
  { additionalProperties: true },
);
export type TestItem = Static<typeof TestItem>;

/** A failure the attempt's output named (JobEvidence.report.failures without `attempt`). */
export const FailureReportItem = Type.Object(failureItemProperties, { additionalProperties: true });
export type FailureReportItem = Static<typeof FailureReportItem>;

export const CacheItem = Type.Object(
  {
    lineage: Type.String({ description: "Lineage identity." }),
    class: Type.String({ description: "Job class the lineage belongs to." }),
    outcome: Type.Union([Type.Literal("warm"), Type.Literal("cold")]),
    reason: Nullable(Type.String(), "Why cold: first job of the class, purged, evicted, toolchain changed."),
    restored_bytes: Count(),
    saved_bytes: Nullable(Count(), "Bytes saved back; null if not saved."),
    saved_generation: Type.Optional(
      Nullable(Count(), "The lineage generation this attempt saved (what the control plane accounts)."),
    ),
    root_generation: Type.Optional(Nullable(Count(), "Where the saved generation's chain started cold.")),
    restored_generation: Type.Optional(Nullable(Count(), "The generation restored; null when cold.")),
    restore_ms: Type.Optional(Type.Number({ minimum: 0, description: "How long handing the lineage over took." })),
    save: Type.Optional(Nullable(Type.String(), "What became of the save, in words.")),
    hits: Type.Optional(Count("Crate cache: locked crates found in the host's cache.")),
    misses: Type.Optional(Count("Crate cache: locked crates downloaded from their registry.")),
    bytes_fetched: Type.Optional(Count("Crate cache: bytes downloaded from upstream registries.")),
  },
  { additionalProperties: true },
);
export type CacheItem = Static<typeof CacheItem>;

export const InjectionItem = Type.Object(
  {
    setting: Type.String({ description: "The build setting, e.g. `profile.dev.debug`." }),
    value: Type.String({ description: "The value injected, or that would have been." }),
    origin: Type.String({ description: "Where it came from: platform default, tenant or repository setting." }),
    status: Type.Union([Type.Literal("applied"), Type.Literal("not applied")], {
      description: "not applied: the repository's own Cargo configuration already sets it; it is never replaced.",
    }),
    detail: Type.String(),
  },
  { additionalProperties: true },
);
export type InjectionItem = Static<typeof InjectionItem>;

export const AffectedTestsItem = Type.Object(
  {
    enabled: Type.Boolean({ description: "Whether the repository's affected_tests setting was on at admission." }),
    applied: Type.Boolean({
      description:
        "Whether only the affected packages' tests ran (or none, nothing being affected); false: every test ran as asked.",
    }),
    reason: Type.String({ description: "Why, in words: the baseline, what changed, or why everything ran." }),
    baseline: Nullable(
      Type.Object(
        {
          job: Type.String({ description: "The job whose passing cargo test run is the baseline." }),
          restored_generation: Nullable(Count(), "The lineage generation the attempt restored."),
        },
        { additionalProperties: true },
      ),
      "What the change was measured against: the lineage's last passing cargo test run of every package; null when there was none.",
    ),
    changed_files: Nullable(
      Count(),
      "Source files added, removed or changed since the baseline; null when not compared.",
    ),
    affected: Type.Array(Type.String(), {
      description: "Packages whose tests ran because the change can affect them (empty when applied is false).",
    }),
    skipped: Type.Array(Type.String(), {
      description: "Packages a plain cargo test would test whose tests were skipped as unaffected.",
    }),
    ran_cargo: Type.Boolean({ description: "false: nothing was affected and cargo did not run at all." }),
  },
  { additionalProperties: true },
);
export type AffectedTestsItem = Static<typeof AffectedTestsItem>;

/** The isolated unit that ran an attempt, as the host measured it. */
export const UnitItem = Type.Object(
  {
    id: Type.String(),
    host: Type.String(),
    isolation: Type.Union([Type.Literal("sandbox"), Type.Literal("microvm")]),
    isolation_reason: Type.Optional(
      Type.String({
        maxLength: 2000,
        description: "Why the host serves with this isolation (KILN_EXECUTOR, its KVM probe).",
      }),
    ),
    started_at: Timestamp(),
    finished_at: Timestamp(),
    vcpus: Type.Integer({ minimum: 1 }),
    memory_bytes: Type.Integer({ minimum: 1 }),
    exit_code: Nullable(Type.Integer(), "Cargo's exit code; null if it did not exit."),
    cpu_seconds: Nullable(Type.Number({ minimum: 0 })),
    peak_memory_bytes: Nullable(Count()),
    oom_killed: Type.Boolean(),
    disk_bytes: Type.Optional(
      Nullable(Count(), "The disk quota the attempt ran with; null where the executor enforced none."),
    ),
    disk_used_bytes: Type.Optional(Nullable(Count(), "Bytes the target dir held when the attempt ended.")),
    disk_quota_exceeded: Type.Optional(
      Type.Boolean({ description: "The job's writes filled its disk quota (a write failed with ENOSPC)." }),
    ),
  },
  { additionalProperties: true },
);
export type UnitItem = Static<typeof UnitItem>;

/**
 * What the dependency gateway provided a `dependency-gateway` attempt: the generated Cargo
 * configuration's digest (never its text) and the locked crates and git sources it came from.
 * The Job record carries these from its latest attempt that reported them.
 */
export const DependencyReport = Type.Object(
  {
    configuration_sha256: Sha256Hex("SHA-256 of the generated dependency configuration."),
    locked_crates: Type.Array(
      Type.Object(
        {
          name: Type.String(),
          version: Type.String(),
          source: Type.String({ description: "The source Cargo.lock names, e.g. `registry+https://…`." }),
          checksum: Nullable(Sha256Hex(), "Cargo.lock checksum; null when the lock carries none."),
        },
        { additionalProperties: false },
      ),
    ),
    git_sources: Type.Array(Type.Object({ url: Type.String(), rev: Type.String() }, { additionalProperties: false })),
    generated_lockfile: Type.Boolean({
      description: "The source had no Cargo.lock: cargo generated it against the gateway's index, in the sandbox.",
    }),
  },
  { additionalProperties: false },
);
export type DependencyReport = Static<typeof DependencyReport>;

/**
 * What a host reports for one attempt (stored as `attempts.report`); the control plane adds
 * `attempt` to each item when it merges the attempts into JobEvidence.report. `unit` is null
 * when the attempt ended before an isolated unit ran (the toolchain not admitted, a
 * provisioning failure, or affected_tests leaving nothing to test).
 */
export const AttemptReport = Type.Object(
  {
    phases: Type.Array(PhaseItem),
    crates: Type.Array(CrateItem),
    tests: Type.Array(TestItem),
    failures: Type.Optional(
      Type.Array(FailureReportItem, {
        description: "The first compiler errors and the failed tests' panics (attempt is added by the control plane).",
      }),
    ),
    caches: Type.Optional(Type.Array(CacheItem)),
    injections: Type.Optional(Type.Array(InjectionItem)),
    affected_tests: Type.Optional(AffectedTestsItem),
    dependencies: Type.Optional(DependencyReport),
    test_binaries: Type.Optional(Type.Array(TestBinaryItem)),
    retries: Type.Optional(RetriesItem),
    timeline: Type.Optional(TimelineItem),
    unit: Nullable(UnitItem),
  },
  { additionalProperties: true },
);
export type AttemptReport = Static<typeof AttemptReport>;

export const AttemptFailure = Type.Object(
  {
    phase: Type.String({ description: "The phase that failed: provision, restore, build, test, publish, save, …" }),
    cause: Type.Union(
      FAILURE_CAUSES.map((c) => Type.Literal(c)),
      { description: "Why, as a failure cause of the Job record." },
    ),
    detail: Type.String(),
  },
  { additionalProperties: false },
);
export type AttemptFailure = Static<typeof AttemptFailure>;

const StoredBlob = Type.Object({ sha256: Sha256Hex(), bytes: Count() }, { additionalProperties: false });

export const AttemptResult = Type.Object(
  {
    outcome: Type.Union([Type.Literal("passed"), Type.Literal("failed"), Type.Literal("cancelled")]),
    exitCode: Nullable(Type.Integer()),
    failure: Nullable(AttemptFailure),
    report: AttemptReport,
    cargoOutput: Nullable(StoredBlob),
    artifacts: Type.Array(
      Type.Object(
        {
          path: Type.String({ minLength: 1 }),
          bytes: Count(),
          sha256: Sha256Hex(),
          executable: Type.Optional(
            Type.Boolean({ description: "The file had its owner's execute bit; absent from older hosts: false." }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type AttemptResult = Static<typeof AttemptResult>;

// ---------------------------------------------------------------- registry credentials

/**
 * A tenant's current credential for one private registry, handed to the host running one of
 * its attempts (fenced by the attempt's lease) for the dependency gateway to present upstream.
 * The host holds it only for that attempt; it never reaches the sandbox.
 */
export const RegistryCredentialGrant = Type.Object(
  {
    registry: Type.String({ description: "The registry host (optionally `:port`), lowercase." }),
    version: Type.Integer({ minimum: 1 }),
    authorization: Type.String({ description: "The value to present as `Authorization`." }),
  },
  { additionalProperties: false },
);
export type RegistryCredentialGrant = Static<typeof RegistryCredentialGrant>;

/** A credential version an attempt in flight on the host still holds. */
export const HeldRegistryCredential = Type.Object(
  { tenant: Type.String(), registry: Type.String(), version: Type.Integer({ minimum: 1 }) },
  { additionalProperties: false },
);
export type HeldRegistryCredential = Static<typeof HeldRegistryCredential>;
