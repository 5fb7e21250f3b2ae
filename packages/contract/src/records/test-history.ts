import { Type } from "@sinclair/typebox";
import { Closed, NextCursor, Nullable, RepositoryName, Timestamp } from "../schema-helpers.js";

/** How one test ended in one job, as the history keeps it (a flaky test failed, then passed on a re-run). */
export const TEST_HISTORY_OUTCOMES = ["passed", "failed", "flaky", "ignored"] as const;

/** What repositories.tests orders (and, for the last two, keeps) by. */
export const TEST_HISTORY_SORTS = ["name", "slowest", "flakiest", "newly_failing"] as const;

/** Jobs a history window spans: the repository's most recent test jobs. */
export const TEST_HISTORY_WINDOW = { default: 20, maximum: 100 } as const;

export const TestRun = Type.Object(
  {
    job: Type.String({ description: "The job whose evidence reported it." }),
    attempt: Type.Integer({ minimum: 1 }),
    outcome: Type.Union(
      TEST_HISTORY_OUTCOMES.map((o) => Type.Literal(o)),
      { description: "flaky: failed, then passed on a re-run of the same job." },
    ),
    duration_ms: Nullable(Type.Integer({ minimum: 0 }), "Measured duration; null when the evidence had none."),
    finished_at: Timestamp("When the job's attempt finished."),
  },
  { additionalProperties: false },
);

export const TestHistory = Type.Object(
  {
    target: Type.String({ description: "The test binary, e.g. `mycrate (lib)`." }),
    name: Type.String({ description: "Full test path." }),
    runs: Type.Integer({ minimum: 1, description: "Jobs of the window that ran it." }),
    passed: Type.Integer({ minimum: 0 }),
    failed: Type.Integer({ minimum: 0 }),
    flaky: Type.Integer({ minimum: 0 }),
    ignored: Type.Integer({ minimum: 0 }),
    flaky_rate: Type.Number({ minimum: 0, maximum: 1, description: "flaky / runs over the window." }),
    latest_outcome: Type.Union(TEST_HISTORY_OUTCOMES.map((o) => Type.Literal(o))),
    newly_failing: Type.Boolean({
      description: "Its latest run failed, and an earlier run in the window passed (or was flaky).",
    }),
    duration_ms: Type.Object(
      {
        p50: Nullable(Type.Integer({ minimum: 0 })),
        p90: Nullable(Type.Integer({ minimum: 0 })),
      },
      { additionalProperties: false, description: "Percentiles of the measured durations over the window." },
    ),
    trend: Type.Object(
      {
        earlier_p50_ms: Nullable(Type.Integer({ minimum: 0 }), "Median of the older half of the window's runs."),
        recent_p50_ms: Nullable(Type.Integer({ minimum: 0 }), "Median of the newer half."),
        ratio: Nullable(Type.Number({ minimum: 0 }), "recent / earlier; null with fewer than 4 measured runs."),
        direction: Type.Union(
          [Type.Literal("slower"), Type.Literal("faster"), Type.Literal("steady"), Type.Literal("unknown")],
          { description: "slower: ratio ≥ 1.2; faster: ≤ 0.8; unknown: too few measured runs (or 0 ms)." },
        ),
      },
      { additionalProperties: false, description: "How its duration moved across the window." },
    ),
    recent: Type.Array(TestRun, { description: "Its runs in the window, newest first." }),
  },
  { additionalProperties: false },
);

export const TestHistoryPage = Closed(
  "TestHistoryPage",
  {
    repository: RepositoryName(),
    window: Type.Object(
      {
        jobs: Type.Integer({ minimum: 0, description: "Test jobs the window holds (at most the window asked)." }),
        from: Nullable(Timestamp(), "When the window's oldest job finished; null when it holds none."),
        to: Nullable(Timestamp(), "When its newest finished."),
      },
      { additionalProperties: false },
    ),
    sort: Type.Union(TEST_HISTORY_SORTS.map((s) => Type.Literal(s))),
    tests: Type.Array(TestHistory),
    next_cursor: NextCursor(),
  },
  {
    description:
      "A repository's test history over its most recent test jobs (a kiln extension: repositories.tests): per test its recent outcomes, duration percentiles and trend, and flaky rate.",
  },
);
