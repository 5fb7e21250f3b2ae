import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TEST_TRY_OUTPUT_LIMIT } from "@kiln/contract";
import { OutputTail, TestRunMarkers } from "../src/agent/attempt/test-run-markers.js";
import { withoutReportedTime } from "../src/agent/attempt/test-runner.js";

const EXE = "/work/target/debug/deps/noisy-0123456789abcdef";
/** A JSON string's body, as the runner writes names and paths. */
const js = (text: string) => JSON.stringify(text).slice(1, -1);
const marker = (kind: string, members: string) =>
  `{"reason":"kiln-test-${kind}","executable":"${js(EXE)}",${members}"at_ns":${1_000_000_000n}}`;

describe("the test runner's markers: what a re-run keeps of its output", () => {
  it("a re-run printing 20,000 lines keeps only its tail (within the limit) and says it was cut; the log gets every line", () => {
    const markers = new TestRunMarkers();
    let logged = 0;
    const feed = (line: string) => {
      if (markers.marker(line)) return;
      assert.ok(markers.inTry);
      logged += 1;
      markers.tryOutput(line, logged);
    };
    feed(marker("try-start", `"test":"${js("tests::noisy")}","try":2,`));
    const lines = 20_000;
    for (let i = 0; i < lines; i++) feed(`noise line ${i}`);
    feed(marker("try-end", `"test":"${js("tests::noisy")}","try":2,"exit":101,"passed":false,`));
    assert.equal(logged, lines);

    const { summary, retries } = markers.apply(
      {
        crates: [],
        tests: [{ target: "noisy (lib)", name: "tests::noisy", outcome: "failed", duration_ms: 5 }],
        failures: [],
        buildSucceeded: true,
        failedTests: 1,
        testBinaries: [{ label: "noisy (lib)", executable: EXE }],
      },
      { retries: 1, policy: "pass" },
    );
    assert.equal(retries.failed_every_try, 1);
    const rerun = summary.tests[0]?.tries?.[1];
    assert.ok(rerun !== undefined);
    assert.ok(rerun.output.length <= TEST_TRY_OUTPUT_LIMIT, `${rerun.output.length} characters kept`);
    assert.ok(rerun.output.endsWith(`noise line ${lines - 1}`), "the tail is kept");
    assert.ok(!rerun.output.includes("noise line 0\n"), "the head is cut");
    assert.equal(rerun.output_truncated, true);
    assert.equal(rerun.log_sequence, 1);
  });

  it("the tail holds a bounded number of lines however many pass through it, and a short output is whole", () => {
    const tail = new OutputTail();
    for (let i = 0; i < 100_000; i++) tail.push("x", 1000);
    assert.equal(tail.size, 1000);
    assert.ok(tail.held <= 2 * 500 + 64, `${tail.held} lines held for a 500-line tail`);
    assert.equal(tail.truncated, true);

    const short = new OutputTail();
    short.push("one", 1000);
    short.push("two", 1000);
    assert.deepEqual([short.text(), short.truncated], ["one\ntwo", false]);

    const long = new OutputTail();
    long.push("a".repeat(5000), 1000);
    assert.deepEqual([long.text().length, long.truncated], [999, true]);
  });

  it("a test line reads as libtest prints it without --report-time; anything else is untouched", () => {
    assert.deepEqual(
      [
        "test tests::adds ... ok <0.012s>",
        "test tests::noisy ... FAILED <1.250s>",
        "test tests::slow - should panic ... ok <0.300s>",
        "test tests::later ... ignored",
        "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s",
        "my own line <0.5s>",
      ].map(withoutReportedTime),
      [
        "test tests::adds ... ok",
        "test tests::noisy ... FAILED",
        "test tests::slow - should panic ... ok",
        "test tests::later ... ignored",
        "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s",
        "my own line <0.5s>",
      ],
    );
  });

  describe("the failed-test count under flaky_policy pass: a flaky test is not a failed one", () => {
    const LIB = "/work/target/debug/deps/lib-0123456789abcdef";
    const TOOL = "/work/target/debug/deps/tool-0123456789abcdef";
    const at = (exe: string, kind: string, members: string) =>
      `{"reason":"kiln-test-${kind}","executable":"${js(exe)}",${members}"at_ns":${1_000_000_000n}}`;
    const rerun = (name: string, passed: boolean) => [
      at(LIB, "try-start", `"test":"${js(name)}","try":2,`),
      at(LIB, "try-end", `"test":"${js(name)}","try":2,"exit":${passed ? 0 : 101},"passed":${passed},`),
    ];
    /** The lib binary fails `failed` tests, of which those in `flaky` pass on their re-run. */
    const failedCount = (
      failed: string[],
      flaky: string[],
      policy: "pass" | "fail",
      tool: { exit: number } | null = null,
    ): number => {
      const markers = new TestRunMarkers();
      const lines = [
        at(LIB, "binary-start", ""),
        at(LIB, "binary-end", `"exit":${failed.length > 0 ? 101 : 0},`),
        ...failed.flatMap((name) => rerun(name, flaky.includes(name))),
        ...(tool === null ? [] : [at(TOOL, "binary-start", ""), at(TOOL, "binary-end", `"exit":${tool.exit},`)]),
      ];
      for (const line of lines) assert.ok(markers.marker(line), line);
      const names = ["tests::a", "tests::b", "tests::c"];
      const { summary } = markers.apply(
        {
          crates: [],
          tests: names.map((name) => ({
            target: "lib (lib)",
            name,
            outcome: failed.includes(name) ? ("failed" as const) : ("passed" as const),
            duration_ms: 1,
          })),
          failures: [],
          buildSucceeded: true,
          // cargo-output-observer.ts: the failed tests, at least 1 when a binary failed (the tool's, or one whose failures were forgiven).
          failedTests: Math.max(failed.length, failed.length > 0 || (tool !== null && tool.exit !== 0) ? 1 : 0),
          testBinaries: [
            { label: "lib (lib)", executable: LIB },
            { label: "tool (bin)", executable: TOOL },
          ],
        },
        { retries: 1, policy },
      );
      return summary.failedTests;
    };

    it("all of a binary's failures flaky: 0 (the job passes; nothing failed)", () => {
      assert.equal(failedCount(["tests::a", "tests::b"], ["tests::a", "tests::b"], "pass"), 0);
      assert.equal(failedCount(["tests::a"], ["tests::a"], "pass"), 0);
    });

    it("some flaky: the others; none flaky: every failed test; under fail: cargo's count", () => {
      assert.equal(failedCount(["tests::a", "tests::b", "tests::c"], ["tests::b"], "pass"), 2);
      assert.equal(failedCount(["tests::a", "tests::b"], [], "pass"), 2);
      assert.equal(failedCount(["tests::a", "tests::b"], ["tests::a", "tests::b"], "fail"), 2);
      assert.equal(failedCount([], [], "pass"), 0);
    });

    it("a binary that failed with no failed test to show for it (harness = false) still counts one", () => {
      assert.equal(failedCount(["tests::a"], ["tests::a"], "pass", { exit: 1 }), 1);
      assert.equal(failedCount(["tests::a"], ["tests::a"], "pass", { exit: 0 }), 0);
    });
  });
});
