import { type Static, Type } from "@sinclair/typebox";

/**
 * kiln extension members of the evidence report for issue 37 (flaky retries, measured test
 * durations, the build's timeline). The evidence report is an open object: these are optional
 * members beside the spec's, never changes to them. A host reports them per attempt (without
 * `attempt`); the control plane adds `attempt` when it merges the attempts.
 */

/** The repository's flaky_retries setting: how many times a failed test is re-run (0: never). */
export const FLAKY_RETRIES_MAX = 5;
export const FLAKY_RETRIES_DEFAULT = 2;
export const FLAKY_POLICIES = ["pass", "fail"] as const;
export type FlakyPolicy = (typeof FLAKY_POLICIES)[number];
export const FLAKY_POLICY_DEFAULT: FlakyPolicy = "pass";

/** Most bytes of one try's captured output kept (its tail). */
export const TEST_TRY_OUTPUT_LIMIT = 64 * 1024;
/** Most units one timeline item lists. */
export const TIMELINE_UNITS_LIMIT = 2000;

export const FlakyRetriesSetting = () =>
  Type.Integer({
    minimum: 0,
    maximum: FLAKY_RETRIES_MAX,
    description: "kiln extension: how many times a failed test is re-run by its exact name (0: never).",
  });

export const FlakyPolicySetting = () =>
  Type.Union(
    FLAKY_POLICIES.map((p) => Type.Literal(p)),
    {
      description:
        "kiln extension: a test that failed and then passed on a re-run (flaky) passes the job (`pass`) or keeps cargo's failing verdict (`fail`).",
    },
  );

/** One run of a test that was re-run (the run inside cargo test is try 1). */
export const TestTryItem = Type.Object(
  {
    try: Type.Integer({ minimum: 1, description: "1: the run inside cargo test; 2…: the re-runs." }),
    outcome: Type.Union([Type.Literal("passed"), Type.Literal("failed")]),
    duration_ms: Type.Integer({ minimum: 0, description: "Measured milliseconds." }),
    output: Type.String({
      description: `The try's captured output (at most ${TEST_TRY_OUTPUT_LIMIT} bytes, its tail kept).`,
    }),
    output_truncated: Type.Optional(
      Type.Boolean({ description: "True when the try printed more than `output` keeps (its head was cut)." }),
    ),
    log_sequence: Type.Optional(
      Type.Integer({ minimum: 1, description: "The sequence of the try's first line in the job's log." }),
    ),
  },
  { additionalProperties: true },
);
export type TestTryItem = Static<typeof TestTryItem>;

/** The members a test item gains (report.tests[]). */
export const testItemExtensions = {
  flaky: Type.Optional(
    Type.Boolean({
      description: "kiln extension: true when the test failed, then passed on a re-run (`outcome` is then passed).",
    }),
  ),
  tries: Type.Optional(
    Type.Array(TestTryItem, {
      description: "kiln extension: every run of a test that was re-run, the first run being try 1.",
    }),
  ),
};

export const testBinaryProperties = {
  target: Type.String({ description: "The test binary, e.g. `mycrate (lib)` or `mycrate::integration`." }),
  duration_ms: Type.Integer({ minimum: 0, description: "The binary's own measured wall time (milliseconds)." }),
  tests: Type.Integer({ minimum: 0, description: "Tests it reported." }),
};
export const TestBinaryItem = Type.Object(testBinaryProperties, { additionalProperties: true });
export type TestBinaryItem = Static<typeof TestBinaryItem>;

export const RetriesItem = Type.Object(
  {
    flaky_retries: FlakyRetriesSetting(),
    flaky_policy: FlakyPolicySetting(),
    reruns: Type.Integer({ minimum: 0, description: "Test runs the retries added." }),
    flaky: Type.Integer({ minimum: 0, description: "Tests that failed, then passed on a re-run." }),
    failed_every_try: Type.Integer({ minimum: 0, description: "Tests that failed on every try." }),
    duration_ms: Type.Integer({ minimum: 0, description: "Time spent re-running (milliseconds)." }),
  },
  { additionalProperties: true },
);
export type RetriesItem = Static<typeof RetriesItem>;

export const TimelineUnit = Type.Object(
  {
    name: Type.String(),
    version: Type.String(),
    target: Type.String({ description: 'What the unit built, e.g. "lib", "build-script", "test".' }),
    start_ms: Type.Integer({ minimum: 0, description: "Milliseconds after cargo started." }),
    duration_ms: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: true },
);
export type TimelineUnit = Static<typeof TimelineUnit>;

export const timelineProperties = {
  wall_ms: Type.Integer({ minimum: 0, description: "cargo's whole run, as its timings report measured it." }),
  artifact: Type.String({ description: "The artifact path of cargo's HTML timings report." }),
  critical_path_ms: Type.Integer({ minimum: 0 }),
  critical_path_share: Type.Number({ minimum: 0, maximum: 1, description: "critical_path_ms / wall_ms." }),
  critical_path: Type.Array(TimelineUnit, {
    description: "The chain of units, each unlocked by the previous, that ends last: what bounded the wall time.",
  }),
  units: Type.Array(TimelineUnit, { description: "Every unit cargo timed (bounded to 2,000)." }),
};
export const TimelineItem = Type.Object(timelineProperties, { additionalProperties: true });
export type TimelineItem = Static<typeof TimelineItem>;

const ofAttempt = { attempt: Type.Integer({ minimum: 1 }) };

/** The report members, as JobEvidence.report carries them (per attempt). */
export const reportTestExtensions = {
  test_binaries: Type.Optional(
    Type.Array(Type.Object({ ...ofAttempt, ...testBinaryProperties }, { additionalProperties: true }), {
      description: "kiln extension: each test binary's own measured wall time, per attempt.",
    }),
  ),
  retries: Type.Optional(
    Type.Object(RetriesItem.properties, {
      additionalProperties: true,
      description:
        "kiln extension (test jobs): what the flaky retries re-ran and found, in the latest attempt that ran tests.",
    }),
  ),
  timeline: Type.Optional(
    Type.Array(Type.Object({ ...ofAttempt, ...timelineProperties }, { additionalProperties: true }), {
      description: "kiln extension (build and test jobs): per attempt, cargo's --timings summarised.",
    }),
  ),
};
