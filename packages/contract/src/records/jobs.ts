import { type Static, Type } from "@sinclair/typebox";
import { Closed, NextCursor, Nullable, Open, RepositoryName, Timestamp } from "../schema-helpers.js";
import { RepositoryPath, Sha256Hex, SourceReference } from "./sources.js";
import { FlakyPolicySetting, FlakyRetriesSetting, reportTestExtensions, testItemExtensions } from "./test-evidence.js";

/** The microVM shapes (spec: `svc2-cpu` … `svc16-cpu`). */
export const SIZES = ["kiln2-cpu", "kiln4-cpu", "kiln8-cpu", "kiln16-cpu"] as const;
/**
 * A tenant's `default_size` until its admins set one: the size a submitter (the CLI, the MCP
 * prompt) takes when the user names none. The tenant's setting, read with tenant.settings.get,
 * comes first.
 */
export const PLATFORM_DEFAULT_SIZE: (typeof SIZES)[number] = "kiln2-cpu";
export const SizeSchema = (description = "Machine size: kiln2-cpu, kiln4-cpu, kiln8-cpu or kiln16-cpu.") =>
  Type.Union(
    SIZES.map((s) => Type.Literal(s)),
    { description },
  );

export const COMMIT_ID_PATTERN = "^[0-9a-f]{40}$";

/** Cargo operations a captured workspace may run. */
export const CARGO_OPERATIONS = ["build", "check", "test", "clippy", "doc", "bench"] as const;

/** Job status values the service reports (Job.status is an open string). */
export const JOB_STATUSES = ["queued", "running", "passed", "failed", "cancellation_requested", "cancelled"] as const;

/** The statuses a job ends in: once there, it never moves again (a retry is a new job). */
export const TERMINAL_JOB_STATUSES: ReadonlySet<string> = new Set<(typeof JOB_STATUSES)[number]>([
  "passed",
  "failed",
  "cancelled",
]);

export const FAILURE_CAUSES = [
  "build_error",
  "test_failure",
  "wall_clock_ceiling",
  "toolchain_not_admitted",
  "dependencies",
  "infrastructure",
  "cancelled",
] as const;

export const ENVIRONMENT_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$";

export const TOOLCHAIN_PATTERN =
  "^(?:(?:stable|beta|nightly)(?:-[0-9]{4}-[0-9]{2}-[0-9]{2})?|[0-9]+\\.[0-9]+(?:\\.[0-9]+)?)$";

export const JobId = Type.String({
  title: "JobId",
  minLength: 1,
  maxLength: 128,
  description: "A job's id.",
});

// ---------------------------------------------------------------- submission

export const CargoInvocation = Type.Object(
  {
    operation: Type.Union(
      CARGO_OPERATIONS.map((o) => Type.Literal(o)),
      {
        description:
          "The Cargo command: build, check, test, clippy, doc or bench. Commands that leave the build (run, install, publish, and any other) are not admitted.",
      },
    ),
    toolchain: Type.Optional(
      Type.String({
        pattern: TOOLCHAIN_PATTERN,
        description:
          "Pinned rustup toolchain: `stable`, `beta`, `nightly`, a dated channel such as `nightly-2026-01-01`, or a version such as `1.85.0`. When absent the source's rust-toolchain.toml (or rust-toolchain) is honoured, else the host's default stable. A toolchain no host has installed is refused at submission (invalid_request, naming the installed ones) once hosts advertise theirs, else fails the job with cause toolchain_not_admitted on the host; it is never replaced.",
      }),
    ),
    arguments: Type.Array(Type.String({ maxLength: 4096 }), {
      maxItems: 512,
      description:
        "Arguments passed after the operation, verbatim and in order, e.g. `--workspace`, `--release`, `-p`, `foo`, `--`, `--nocapture`. `--target-dir`, `--config`, `-Z` and `--manifest-path` leaving the source are refused (invalid_request); network access follows the admitted network policy whatever `--offline` or `--frozen` say.",
    }),
    working_directory: Type.Optional(
      Type.Union([Type.Literal("."), RepositoryPath()], {
        description: "Repository-relative directory Cargo runs in; `.` (the repository root) by default.",
      }),
    ),
    repository_directory: Type.Optional(
      RepositoryPath(
        "kiln extension: where the captured Cargo workspace lives in its git repository (`rust` for a workspace in rust/), as `git rev-parse --show-prefix` names it; absent at the repository's root. Check-run annotations name files by their path in the repository with it.",
      ),
    ),
    artifacts: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 1024 }), {
        maxItems: 256,
        description:
          "Files to publish after a successful attempt, as patterns relative to the Cargo target directory, e.g. `release/mybin`, `doc/**`: `*` matches within a path segment, `**` any number of segments; no leading `/` and no `..`. Default: none published.",
      }),
    ),
    environment: Type.Optional(
      Type.Record(Type.String({ pattern: ENVIRONMENT_NAME_PATTERN }), Type.String({ maxLength: 32768 }), {
        additionalProperties: false,
        description:
          "Explicit environment for Cargo, NAME → value; names match `^[A-Za-z_][A-Za-z0-9_]*$`. Nothing from the submitting or executing host leaks in. Refused (invalid_request naming the variable): names that move what kiln lays out (PATH, HOME, CARGO_HOME, CARGO_TARGET_DIR, CARGO_BUILD_TARGET_DIR, CARGO_BUILD_BUILD_DIR), rustup's (RUSTUP_*), the dynamic linker's (LD_*), and those naming a program cargo would run in place of the toolchain's: CARGO, RUSTC, RUSTDOC, RUSTC_WRAPPER, RUSTC_WORKSPACE_WRAPPER, CARGO_BUILD_RUSTC, CARGO_BUILD_RUSTDOC, CARGO_BUILD_RUSTC_WRAPPER, CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER, CARGO_TARGET_<triple>_LINKER, _RUNNER and _AR, CARGO_HOST_LINKER and _RUNNER, credential providers (CARGO_REGISTRY_CREDENTIAL_PROVIDER, CARGO_REGISTRY_GLOBAL_CREDENTIAL_PROVIDERS, CARGO_REGISTRIES_<name>_CREDENTIAL_PROVIDER), and CARGO_UNSTABLE_* (cargo's -Z). Every other name is the job's (RUSTFLAGS, CC, RUST_LOG, …). Default: empty.",
      }),
    ),
  },
  {
    additionalProperties: true,
    description: "The exact Cargo invocation: `cargo [+toolchain] <operation> <arguments…>` in working_directory.",
  },
);

export const CargoInlineFile = Type.Object(
  {
    path: RepositoryPath(),
    bytes: Type.Array(Type.Integer({ minimum: 0, maximum: 255 }), { description: "The file's original bytes." }),
    executable: Type.Boolean({ description: "Preserve the executable mode." }),
  },
  { additionalProperties: false },
);

export const CargoSource = Type.Union(
  [
    Type.Object(
      {
        files: Type.Array(CargoInlineFile, {
          description: "The complete set of regular files, sorted by path (legacy inline source, schema_version 1).",
        }),
      },
      { additionalProperties: false },
    ),
    Type.Object(
      { archive: SourceReference },
      { additionalProperties: false, description: "A verified streamed archive (schema_version 2)." },
    ),
  ],
  { title: "CargoSource", description: "The captured source bytes: inline files, or a streamed archive reference." },
);

export const CargoWorkspaceRequest = Closed(
  "CargoWorkspaceRequest",
  {
    schema_version: Type.Union([Type.Literal(1), Type.Literal(2)], {
      description: "1: inline source (`files`); 2: streamed archive reference (`archive`). Must match the source form.",
    }),
    repository: RepositoryName("The onboarded repository."),
    size: SizeSchema(
      "The microVM shape the job runs on. A size needing more vCPUs than any enrolled host has is refused at submission (invalid_request, naming the sizes this deployment places); while no host enrolled, the job queues.",
    ),
    workspace: Type.Object(
      {
        base_commit: Type.String({
          minLength: 1,
          maxLength: 256,
          description: "Declared base revision; the captured bytes stay authoritative.",
        }),
        branch: Type.String({ minLength: 1, maxLength: 256, description: "Declared branch." }),
        invocation: CargoInvocation,
        source: CargoSource,
      },
      { additionalProperties: false },
    ),
    check: Type.Optional(
      Type.Object(
        {
          head_sha: Type.String({
            pattern: COMMIT_ID_PATTERN,
            description:
              "Exact 40-character lowercase commit id; the job reports a `kiln` check run for it through the tenant installation covering the repository.",
          }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  {
    description:
      "A captured Cargo workspace submission. The idempotency-key is the submission identity: a replay with the same key and body returns the original job; changed input conflicts.",
  },
);

export const LocalDiffRequest = Open(
  "LocalDiffRequest",
  {
    repository: Type.Optional(Type.String()),
    base_ref: Type.Optional(Type.String()),
    fingerprint: Type.Optional(Type.String()),
    base_commit: Type.Optional(Type.String()),
    toolchain: Type.Optional(Type.String()),
    toolchain_origin: Type.Optional(Type.String()),
    tracked_diff: Type.Optional(Type.String({ description: "Unified diff of tracked files against base_commit." })),
    untracked_files: Type.Optional(
      Type.Array(Type.Object({ path: Type.String() }, { additionalProperties: true }), {
        description: "Untracked files with their content.",
      }),
    ),
  },
  {
    description:
      "Deprecated predecessor submission (local diff). Retained for compatibility; this runtime refuses it with legacy_unsupported. Use CargoWorkspaceRequest.",
  },
);

// ---------------------------------------------------------------- job

const Isolation = Type.Union([Type.Literal("sandbox"), Type.Literal("microvm")], {
  description: "The isolation that actually ran: sandbox (bubblewrap with cgroup limits) or microvm (QEMU microVM).",
});

const jobUnitProperties = {
  id: Type.String({ description: "Unit id." }),
  host: Type.String({ description: "Host that ran the unit." }),
  size: SizeSchema("Size the unit was given."),
  isolation: Isolation,
  started_at: Nullable(Timestamp()),
  finished_at: Nullable(Timestamp()),
};

export const JobUnit = Type.Object(
  {
    ...jobUnitProperties,
    attempt: Type.Optional(Type.Integer({ minimum: 1, description: "The attempt the unit ran." })),
  },
  { additionalProperties: true, description: "One execution unit (an isolated executor on a host)." },
);

export const JobTransition = Type.Object(
  {
    from: Nullable(Type.String(), "Previous status; null for the first transition."),
    to: Type.String(),
    at: Timestamp(),
    reason: Type.String({ description: "Why the job moved, e.g. `placed on host-3`, `cancelled by u_123`." }),
  },
  { additionalProperties: false },
);

export const JobFailure = Type.Object(
  {
    phase: Type.String({ description: "The phase that failed (a name from the evidence report's phases)." }),
    cause: Type.Union(
      FAILURE_CAUSES.map((c) => Type.Literal(c)),
      {
        description:
          "build_error: Cargo failed to build; test_failure: a test failed; wall_clock_ceiling: the job ran past its ceiling; toolchain_not_admitted: the toolchain is not installed on the host; infrastructure: the service failed (not the code); cancelled: cancellation.",
      },
    ),
    detail: Type.String(),
  },
  { additionalProperties: false },
);

export const Job = Open(
  "Job",
  {
    id: Type.String({ description: "Job id." }),
    tenant: Type.String(),
    submitted_by: Type.String({ description: "Principal that submitted it." }),
    description: Type.String({ description: "One line, e.g. `cargo test --workspace`." }),
    repo: RepositoryName(),
    branch: Type.String({ description: "Declared branch." }),
    sha_short: Nullable(Type.String(), "Short declared base commit; null when unknown."),
    class: Type.String({
      description: "Job class: the lineage key (operation profile, toolchain and size) whose warm cache the job uses.",
    }),
    status: Type.String({
      description:
        "queued, running, passed, failed, cancellation_requested (cancel accepted, units being reaped) or cancelled.",
    }),
    accepted_at: Timestamp(),
    queued_at: Timestamp(),
    started_at: Nullable(Timestamp()),
    finished_at: Nullable(Timestamp()),
    units: Type.Array(JobUnit),
    transitions: Type.Array(JobTransition, { description: "Status changes, oldest first." }),
    failure: Nullable(JobFailure, "Why the job failed; null unless it failed or was cancelled."),
    queue_annotation: Nullable(Type.String(), "Why a queued job waits (e.g. tenant concurrency limit reached)."),
    retry_of: Type.Optional(Nullable(Type.String(), "The terminal job this one retries; null for an original.")),
    configuration_sha256: Type.Optional(
      Sha256Hex("Dependency-gateway jobs: SHA-256 of the generated dependency configuration (never its text)."),
    ),
    locked_crates: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String(),
            version: Type.String(),
            checksum: Nullable(Sha256Hex(), "Cargo.lock checksum; null when the lock carries none."),
          },
          { additionalProperties: true },
        ),
        { description: "Dependency-gateway jobs: the locked registry crates the configuration came from." },
      ),
    ),
    git_sources: Type.Optional(
      Type.Array(Type.Object({ url: Type.String(), rev: Type.String() }, { additionalProperties: true }), {
        description: "Dependency-gateway jobs: the locked git sources the configuration came from.",
      }),
    ),
  },
  { description: "A job." },
);

export const JobsSummary = Closed(
  "JobsSummary",
  {
    queued: Type.Integer({ minimum: 0 }),
    running: Type.Integer({ minimum: 0 }),
    passed: Type.Integer({ minimum: 0 }),
    failed: Type.Integer({ minimum: 0 }),
  },
  { description: "Roll-up counts of the tenant's jobs by status." },
);

export const JobsPage = Closed("JobsPage", {
  jobs: Type.Array(Job, { description: "Newest first." }),
  total: Type.Integer({ minimum: 0, description: "The tenant's jobs before filtering." }),
  summary: JobsSummary,
  next_cursor: NextCursor(),
});

// ---------------------------------------------------------------- evidence

const Duration = () => Nullable(Type.Integer({ minimum: 0 }), "Milliseconds; null while unfinished or unmeasured.");

/** Where a compiler error or a panic points. */
export const FailureLocation = Type.Object(
  {
    file: Type.String({
      description:
        "The file as a path of the submitted repository (`crates/parser/src/lib.rs`) when it is part of the captured source, else as the compiler printed it (a dependency's file).",
    }),
    line: Type.Integer({ minimum: 1 }),
    column: Type.Integer({ minimum: 1 }),
    in_repository: Type.Boolean({ description: "Whether `file` is a path of the submitted repository." }),
    printed: Type.String({
      description:
        "The location as the job's output printed it (relative to the Cargo workspace root), `file:line:column`.",
    }),
  },
  { additionalProperties: true },
);

export type FailureLocation = Static<typeof FailureLocation>;

/** The properties of one failure the job's output names: a rustc error, or a failed test's panic. */
export const failureItemProperties = {
  kind: Type.Union([Type.Literal("compiler_error"), Type.Literal("test_panic")], {
    description: "compiler_error: an error rustc reported; test_panic: a failed test's panic.",
  }),
  message: Type.String({
    description: "The error's message, or the panic's message (its lines joined with newlines).",
  }),
  code: Nullable(Type.String(), "rustc's error code, e.g. `E0277`; null for a panic or an error without one."),
  target: Nullable(Type.String(), "A panic's test binary, e.g. `mycrate (lib)`; null for a compiler error."),
  test: Nullable(Type.String(), "A panic's test path; null for a compiler error."),
  location: Nullable(FailureLocation, "Where it points; null when the output named no location."),
  rendered: Type.Optional(Type.String({ description: "A compiler error as rustc rendered it (its first lines)." })),
};

/** The log record a failure's line is: a panic's `thread '…' panicked at` line, a compiler error's first line. */
const LogSequence = () =>
  Type.Optional(
    Type.Integer({
      minimum: 1,
      description: "The sequence of its line in the job's log (jobs.logs), where the line was found.",
    }),
  );

export const FailureItem = Type.Object(
  { ...failureItemProperties, attempt: Type.Integer({ minimum: 1 }), log_sequence: LogSequence() },
  { additionalProperties: true },
);

export const JobEvidence = Closed(
  "JobEvidence",
  {
    job: Job,
    report: Type.Object(
      {
        phases: Type.Array(
          Type.Object(
            {
              name: Type.String({
                description: "provision, restore, fetch, build, test, publish, save or reap.",
              }),
              attempt: Type.Integer({ minimum: 1 }),
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
          ),
          { description: "Phases in execution order, per attempt." },
        ),
        crates: Type.Array(
          Type.Object(
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
          ),
          { description: "Crates Cargo compiled or found fresh." },
        ),
        caches: Type.Array(
          Type.Object(
            {
              lineage: Type.String({ description: "Lineage identity." }),
              class: Type.String({ description: "Job class the lineage belongs to." }),
              outcome: Type.Union([Type.Literal("warm"), Type.Literal("cold")]),
              reason: Nullable(Type.String(), "Why cold: first job of the class, purged, evicted, toolchain changed."),
              restored_bytes: Type.Integer({ minimum: 0 }),
              saved_bytes: Nullable(Type.Integer({ minimum: 0 }), "Bytes saved back; null if not saved."),
            },
            { additionalProperties: true },
          ),
          { description: "Warm cargo state restored and saved." },
        ),
        injections: Type.Array(
          Type.Object(
            {
              setting: Type.String({ description: "The build setting, e.g. `profile.dev.debug`." }),
              value: Type.String({ description: "The value injected, or that would have been." }),
              origin: Type.String({
                description: "Where it came from: platform default, tenant or repository setting.",
              }),
              status: Type.Union([Type.Literal("applied"), Type.Literal("not applied")], {
                description:
                  "not applied: the repository's own Cargo configuration already sets it; it is never replaced.",
              }),
              detail: Type.String(),
            },
            { additionalProperties: true },
          ),
          { description: "Build settings the service injected, as admitted with the job." },
        ),
        tests: Type.Array(
          Type.Object(
            {
              target: Type.String({ description: "The test binary, e.g. `mycrate (lib)` or `mycrate::integration`." }),
              name: Type.String({ description: "Full test path, e.g. `parser::tests::rejects_empty`." }),
              outcome: Type.Union([Type.Literal("passed"), Type.Literal("failed"), Type.Literal("ignored")]),
              attempt: Type.Integer({ minimum: 1 }),
              duration_ms: Duration(),
              panic: Type.Optional(
                Type.Object(
                  {
                    message: Type.String(),
                    location: Nullable(FailureLocation),
                    log_sequence: LogSequence(),
                  },
                  { additionalProperties: true, description: "kiln extension: a failed test's panic." },
                ),
              ),
              ...testItemExtensions,
            },
            { additionalProperties: true },
          ),
          { description: "Test results (test and bench jobs); empty otherwise." },
        ),
        ...reportTestExtensions,
        failures: Type.Optional(
          Type.Array(FailureItem, {
            description:
              "kiln extension: what failed, first — the first rustc errors (code, message, location in the repository) and each failed test's panic (message and location), per attempt, in the order the output gave them.",
          }),
        ),
        units: Type.Array(
          Type.Object(
            {
              ...jobUnitProperties,
              attempt: Type.Integer({ minimum: 1 }),
              vcpus: Type.Integer({ minimum: 1 }),
              memory_bytes: Type.Integer({ minimum: 1 }),
              exit_code: Nullable(Type.Integer(), "Cargo's exit code; null if it did not exit."),
            },
            { additionalProperties: true },
          ),
          { description: "Units that ran the attempts, with the isolation that actually ran." },
        ),
        affected_tests: Type.Optional(
          Type.Array(
            Type.Object(
              {
                attempt: Type.Integer({ minimum: 1 }),
                enabled: Type.Boolean({
                  description: "Whether the repository's affected_tests setting was on at admission.",
                }),
                applied: Type.Boolean({
                  description:
                    "Whether only the affected packages' tests ran (or none, nothing being affected); false: every test ran as asked.",
                }),
                reason: Type.String({
                  description: "Why, in words: the baseline, what changed, or why everything ran.",
                }),
                baseline: Nullable(
                  Type.Object(
                    {
                      job: Type.String({ description: "The job whose passing cargo test run is the baseline." }),
                      restored_generation: Nullable(
                        Type.Integer({ minimum: 0 }),
                        "The lineage generation the attempt restored.",
                      ),
                    },
                    { additionalProperties: true },
                  ),
                  "What the change was measured against: the lineage's last passing cargo test run of every package; null when there was none.",
                ),
                changed_files: Nullable(
                  Type.Integer({ minimum: 0 }),
                  "Source files added, removed or changed since the baseline; null when not compared.",
                ),
                affected: Type.Array(Type.String(), {
                  description:
                    "Packages whose tests ran because the change can affect them (empty when applied is false).",
                }),
                skipped: Type.Array(Type.String(), {
                  description: "Packages a plain cargo test would test whose tests were skipped as unaffected.",
                }),
                ran_cargo: Type.Boolean({ description: "false: nothing was affected and cargo did not run at all." }),
              },
              { additionalProperties: true },
            ),
            {
              description:
                "Test jobs, and jobs admitted with affected_tests on: per attempt, what affected_tests decided (docs/affected-tests.md). Crate granularity: a package's tests run whenever a file it owns or a package it depends on by path changed.",
            },
          ),
        ),
        admitted: Type.Optional(
          Type.Object(
            {
              toolchain: Type.String({ description: "The admitted toolchain, e.g. `1.85.0`." }),
              toolchain_origin: Type.Union(
                [Type.Literal("invocation"), Type.Literal("rust-toolchain-file"), Type.Literal("host-default")],
                {
                  description:
                    "invocation: named in the request; rust-toolchain-file: the source's rust-toolchain.toml; host-default: the host's stable.",
                },
              ),
              network_policy: Type.Union([Type.Literal("offline"), Type.Literal("dependency-gateway")]),
              configuration_sha256: Nullable(
                Sha256Hex(),
                "SHA-256 of the generated dependency configuration; null unless dependency-gateway.",
              ),
              settings_version: Type.Optional(
                Type.Integer({
                  minimum: 0,
                  description: "The repository settings version admission snapshotted for this job.",
                }),
              ),
              wall_clock_ceiling: Type.Optional(
                Type.Object(
                  {
                    seconds: Type.Integer({ minimum: 1 }),
                    origin: Type.String({
                      description:
                        "repository configuration (the source's Cargo.toml pins it), dashboard repository setting, or platform default.",
                    }),
                  },
                  { additionalProperties: false, description: "The ceiling the job carries and where it comes from." },
                ),
              ),
              affected_tests: Type.Optional(
                Type.Boolean({ description: "Whether the repository's affected_tests setting was on at admission." }),
              ),
              flaky_retries: Type.Optional(FlakyRetriesSetting()),
              flaky_policy: Type.Optional(FlakyPolicySetting()),
            },
            {
              additionalProperties: true,
              description:
                "Captured Cargo workspace jobs: what was admitted, with the settings snapshotted at admission (the injected build settings are the report's `injections`).",
            },
          ),
        ),
      },
      { additionalProperties: true, description: "The evidence report." },
    ),
    usage: Nullable(
      Type.Object(
        {
          size: SizeSchema(),
          seconds: Type.Integer({ minimum: 0, description: "Metered wall-clock seconds." }),
          vcpu_seconds: Type.Integer({ minimum: 0 }),
          closed_at: Timestamp("When metering closed."),
        },
        { additionalProperties: true },
      ),
      "Metered usage; null until metering has closed.",
    ),
    attempts: Nullable(
      Type.Object(
        {
          attempts: Type.Array(
            Type.Object(
              {
                attempt: Type.Integer({ minimum: 1 }),
                unit: Nullable(Type.String(), "The unit that ran it."),
                started_at: Nullable(Timestamp()),
                finished_at: Nullable(Timestamp()),
                outcome: Nullable(Type.String(), "passed, failed or cancelled; null while running."),
                exit_code: Nullable(Type.Integer()),
                cargo_output_bytes: Nullable(Type.Integer({ minimum: 0 }), "Retained Cargo output size."),
              },
              { additionalProperties: true },
            ),
          ),
          next_cursor: NextCursor(),
        },
        { additionalProperties: true, description: "A page of attempt evidence; pass next_cursor as `cursor`." },
      ),
      "Attempt evidence; null before the first attempt.",
    ),
    settlement: Nullable(
      Type.Object(
        {
          settled_at: Timestamp(),
          status: Type.String({ description: "The terminal status settled." }),
          attempts: Type.Integer({ minimum: 0, description: "Attempts settled; 0 when cancelled before placement." }),
          usage_recorded: Type.Boolean({ description: "Whether a usage record was written; false with no attempt." }),
        },
        { additionalProperties: true },
      ),
      "The retained usage settlement once the terminal job settled; null until then.",
    ),
  },
  { description: "A job with its evidence report, usage, attempts and settlement." },
);

// ---------------------------------------------------------------- logs, artifacts

export const JobLogPage = Open(
  "JobLogPage",
  {
    records: Type.Array(
      Type.Object(
        {
          sequence: Type.Integer({ minimum: 1, description: "The record's durable position in the job's log." }),
          at: Timestamp(),
          stream: Type.Union([Type.Literal("stdout"), Type.Literal("stderr"), Type.Literal("system")], {
            description: "stdout/stderr of Cargo, or system lines from the service.",
          }),
          attempt: Type.Integer({ minimum: 1 }),
          text: Type.String(),
        },
        { additionalProperties: true },
      ),
      { description: "Log records in sequence order." },
    ),
    next_cursor: NextCursor(),
    gaps: Type.Array(
      Type.Object(
        {
          from_sequence: Type.Integer({ minimum: 1 }),
          to_sequence: Type.Integer({ minimum: 1 }),
          reason: Type.String(),
        },
        { additionalProperties: true },
      ),
      { description: "Inclusive sequence ranges that are permanently missing, with why." },
    ),
    pending: Type.Array(
      Type.Object(
        { from_sequence: Type.Integer({ minimum: 1 }), to_sequence: Type.Integer({ minimum: 1 }) },
        { additionalProperties: true },
      ),
      { description: "Inclusive ranges known to exist but not yet durable; read again to get them." },
    ),
    watermarks: Type.Object(
      {
        durable: Type.Integer({ minimum: 0, description: "Highest sequence below which every record is durable." }),
        received: Type.Integer({ minimum: 0, description: "Highest sequence received from the host." }),
      },
      { additionalProperties: true },
    ),
    settled: Type.Boolean({ description: "The job is terminal and its log is complete; no more records follow." }),
  },
  {
    description:
      "A page of a job's durable log. next_cursor continues it (also while the job runs); it is null once settled and the last record is delivered.",
  },
);

/** What jobs.logs_search (a kiln extension) answers: the log lines holding the text, in order. */
export const JobLogSearchResult = Closed(
  "JobLogSearchResult",
  {
    query: Type.String({ description: "The text searched for, as given." }),
    matches: Type.Array(
      Type.Object(
        {
          sequence: Type.Integer({ minimum: 1, description: "The line's place in the job's log (jobs.logs)." }),
          at: Timestamp(),
          stream: Type.Union([Type.Literal("stdout"), Type.Literal("stderr"), Type.Literal("system")]),
          attempt: Type.Integer({ minimum: 1 }),
          text: Type.String({ description: "The line as stored (ANSI escapes included)." }),
        },
        { additionalProperties: false },
      ),
      { description: "Matching lines in sequence order." },
    ),
    next_cursor: NextCursor(),
    searched_to: Type.Integer({
      minimum: 0,
      description: "The highest sequence searched; lines after it were not looked at (follow next_cursor).",
    }),
  },
  {
    description:
      "Log lines whose text (ANSI escapes ignored, letters of either case) contains the query, across the whole log, from a cursor.",
  },
);

export const ArtifactInventory = Open(
  "ArtifactInventory",
  {
    expires_at: Nullable(Timestamp(), "When the artifacts stop being served (then `gone`); null when none."),
    publications: Type.Array(
      Type.Object(
        {
          attempt: Type.Integer({ minimum: 1 }),
          published_at: Timestamp(),
          files: Type.Array(
            Type.Object(
              {
                index: Type.Integer({ minimum: 0, description: "Fetch with jobs.artifact_bytes {attempt}/{index}." }),
                path: Type.String({ description: "Path relative to the Cargo target directory." }),
                bytes: Type.Integer({ minimum: 0 }),
                sha256: Sha256Hex(),
                executable: Type.Optional(
                  Type.Boolean({
                    description:
                      "The file had its owner's execute bit when published: a download keeps it (kiln's own member).",
                  }),
                ),
              },
              { additionalProperties: true },
            ),
          ),
        },
        { additionalProperties: true },
      ),
      { description: "One publication per attempt that published artifacts." },
    ),
  },
  { description: "The job's published artifacts." },
);

export const CancellationReceipt = Closed("CancellationReceipt", {
  job: Type.String(),
  state: Type.Literal("cancellation_requested"),
  requested_by: Type.String({ description: "Principal that requested the cancellation." }),
});

export const RetryReceipt = Closed("RetryReceipt", {
  original: Type.String({ description: "The terminal job retried." }),
  retry: Type.String({ description: "The fresh linked job." }),
  submitted_by: Type.String(),
});

// ---------------------------------------------------------------- events

export const JobEvent = Closed(
  "JobEvent",
  {
    sequence: Type.Integer({
      minimum: 1,
      description: "The tenant's durable event sequence; resume cli.events with `after` set to the last one seen.",
    }),
    job: Type.String(),
    repository: RepositoryName(),
    status: Type.String({ description: "The job's status after the event." }),
    previous_status: Nullable(Type.String(), "The status before; null when the job was just accepted."),
    at: Timestamp(),
  },
  {
    description:
      "One job status event (SSE event `job`). On the dashboard stream it is a hint to reconcile against jobs.get.",
  },
);

export const JobLogStreamFrame = Closed(
  "JobLogStreamFrame",
  {
    job: Type.String(),
    page: JobLogPage,
  },
  {
    description:
      "One log page (SSE event `log`); resume with page.next_cursor as `cursor`. The stream ends after the frame whose page is settled.",
  },
);
