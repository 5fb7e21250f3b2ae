/**
 * JUnit XML of a test job's evidence, in the form Jenkins, GitLab and Buildkite Test Engine
 * read: one `<testsuite>` per test binary, a `<testcase>` per test with its measured time in
 * seconds, `<failure>` with the test's output, `<skipped>` for ignored tests, and a re-run
 * test's other tries as Maven Surefire's `<flakyFailure>` (it passed in the end) or
 * `<rerunFailure>` (it failed every try). One pure function, so the host's `junit.xml`
 * artifact and `kiln cargo test --junit PATH` are the same document.
 */

/** The members of an evidence test item JUnit reads (JobEvidence.report.tests[]). */
export interface JunitTestInput {
  readonly target: string;
  readonly name: string;
  readonly outcome: "passed" | "failed" | "ignored";
  readonly attempt?: number;
  readonly duration_ms: number | null;
  readonly panic?: { readonly message: string } | undefined;
  readonly failure_output?: string | undefined;
  readonly ignore_reason?: string | undefined;
  readonly flaky?: boolean | undefined;
  readonly tries?:
    | readonly {
        readonly try: number;
        readonly outcome: "passed" | "failed";
        readonly duration_ms: number;
        readonly output: string;
      }[]
    | undefined;
}

/** What renderJunitXml reads of a job's evidence (a JobEvidence satisfies it). */
export interface JunitEvidenceInput {
  readonly job?: { readonly id: string };
  readonly report: {
    readonly tests: readonly JunitTestInput[];
    readonly test_binaries?: readonly {
      readonly attempt?: number;
      readonly target: string;
      readonly duration_ms: number;
    }[];
  };
}

/** Counts the document carries, the same as the evidence's (the last attempt that ran tests). */
export interface JunitCounts {
  readonly tests: number;
  readonly failures: number;
  readonly skipped: number;
  readonly flaky: number;
}

// Characters XML 1.0 cannot carry at all (control characters other than tab, LF and CR; lone surrogates).
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are exactly the characters to replace
const NOT_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/gu;

function text(value: string): string {
  return value.replace(NOT_XML, "\uFFFD").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function attribute(value: string): string {
  return text(value).replace(/"/g, "&quot;").replace(/\n/g, "&#10;").replace(/\r/g, "&#13;").replace(/\t/g, "&#9;");
}

function seconds(ms: number | null | undefined): string {
  return ((ms ?? 0) / 1000).toFixed(3);
}

/** The tests of the latest attempt that reported any: JUnit describes one run, not every attempt's. */
export function junitTests(evidence: JunitEvidenceInput): readonly JunitTestInput[] {
  const tests = evidence.report.tests;
  const last = tests.reduce((max, t) => Math.max(max, t.attempt ?? 1), 0);
  return tests.filter((t) => (t.attempt ?? 1) === last);
}

export function junitCounts(evidence: JunitEvidenceInput): JunitCounts {
  const tests = junitTests(evidence);
  return {
    tests: tests.length,
    failures: tests.filter((t) => t.outcome === "failed").length,
    skipped: tests.filter((t) => t.outcome === "ignored").length,
    flaky: tests.filter((t) => t.flaky === true).length,
  };
}

function firstLine(value: string): string {
  return (value.split("\n").find((l) => l.trim() !== "") ?? "").slice(0, 500);
}

/** A re-run try as Surefire writes it: the message, the output as stack trace and system-out. */
function rerunElement(tag: "flakyFailure" | "rerunFailure", tryOutput: string, message: string): string {
  return `      <${tag} message="${attribute(message)}" type="test failure"><stackTrace>${text(message)}</stackTrace><system-out>${text(tryOutput)}</system-out></${tag}>\n`;
}

function testcase(test: JunitTestInput): string {
  const head = `    <testcase name="${attribute(test.name)}" classname="${attribute(test.target)}" time="${seconds(test.duration_ms)}"`;
  const body: string[] = [];
  if (test.outcome === "ignored") {
    body.push(
      test.ignore_reason === undefined
        ? "      <skipped/>\n"
        : `      <skipped message="${attribute(test.ignore_reason)}"/>\n`,
    );
  }
  const tries = test.tries ?? [];
  if (test.outcome === "failed") {
    const output = test.failure_output ?? tries[0]?.output ?? "";
    const message = test.panic?.message ?? firstLine(output) ?? "the test failed";
    body.push(`      <failure message="${attribute(message)}" type="test failure">${text(output)}</failure>\n`);
    for (const t of tries.slice(1)) {
      if (t.outcome === "failed") body.push(rerunElement("rerunFailure", t.output, firstLine(t.output) || message));
    }
  } else if (test.outcome === "passed" && test.flaky === true) {
    for (const t of tries) {
      if (t.outcome === "failed") {
        body.push(rerunElement("flakyFailure", t.output, firstLine(t.output) || "failed, then passed on a re-run"));
      }
    }
  }
  return body.length === 0 ? `${head}/>\n` : `${head}>\n${body.join("")}    </testcase>\n`;
}

/** The JUnit XML document of a test job's evidence. */
export function renderJunitXml(evidence: JunitEvidenceInput): string {
  const tests = junitTests(evidence);
  const attempt = tests[0]?.attempt;
  const suites = new Map<string, JunitTestInput[]>();
  for (const test of tests) {
    const list = suites.get(test.target) ?? [];
    list.push(test);
    suites.set(test.target, list);
  }
  const binaryMs = new Map<string, number>();
  for (const binary of evidence.report.test_binaries ?? []) {
    if (attempt !== undefined && binary.attempt !== undefined && binary.attempt !== attempt) continue;
    binaryMs.set(binary.target, (binaryMs.get(binary.target) ?? 0) + binary.duration_ms);
  }
  const counts = junitCounts(evidence);
  let totalMs = 0;
  const rendered: string[] = [];
  for (const [target, cases] of suites) {
    const ms = binaryMs.get(target) ?? cases.reduce((sum, t) => sum + (t.duration_ms ?? 0), 0);
    totalMs += ms;
    const failures = cases.filter((t) => t.outcome === "failed").length;
    const skipped = cases.filter((t) => t.outcome === "ignored").length;
    rendered.push(
      `  <testsuite name="${attribute(target)}" tests="${cases.length}" failures="${failures}" errors="0" skipped="${skipped}" time="${seconds(ms)}">\n${cases.map(testcase).join("")}  </testsuite>\n`,
    );
  }
  const name = evidence.job === undefined ? "cargo test" : `kiln job ${evidence.job.id}`;
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="${attribute(name)}" tests="${counts.tests}" failures="${counts.failures}" errors="0" time="${seconds(totalMs)}">\n${rendered.join("")}</testsuites>\n`;
}
