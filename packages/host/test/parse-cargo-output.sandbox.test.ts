import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { JobEvidence } from "@kiln/contract";
import {
  CargoOutputParser,
  type ParsedCargoOutput,
  type ParsedTest,
  parseCargoOutput,
  parsePackageId,
  toReportItems,
} from "../src/evidence/index.js";

// ---------------------------------------------------------------- helpers

const cargoAvailable = spawnSync("cargo", ["--version"], { encoding: "utf8" }).status === 0;
const skipReal = cargoAvailable ? false : "cargo is not installed";

interface CargoRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Parsed while the output streamed, chunk by chunk, with arrival times. */
  readonly streamed: ParsedCargoOutput;
}

/** Runs the real `cargo test` as kiln does, capturing stdout and stderr separately. */
function cargoTest(cwd: string, targetDir: string): Promise<CargoRun> {
  return new Promise((resolve, reject) => {
    const child = spawn("cargo", ["test", "--offline", "--message-format=json-render-diagnostics", "--no-fail-fast"], {
      cwd,
      env: {
        ...process.env,
        CARGO_TARGET_DIR: targetDir,
        CARGO_TERM_COLOR: "never",
        CARGO_NET_OFFLINE: "true",
        CARGO_INCREMENTAL: "0",
        RUST_BACKTRACE: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const parser = new CargoOutputParser();
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      stdout += chunk;
      parser.pushText("stdout", chunk, Date.now());
    });
    child.stderr.on("data", (chunk: string) => {
      stderr += chunk;
      parser.pushText("stderr", chunk, Date.now());
    });
    child.on("error", reject);
    child.on("close", (code) => {
      parser.end();
      resolve({ code, stdout, stderr, streamed: parser.result() });
    });
  });
}

function writeTree(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

/** `binary | name | outcome`, sorted: libtest runs tests in parallel, so order is not stable. */
function triples(tests: readonly ParsedTest[]): string[] {
  return tests.map((t) => `${t.binary} | ${t.name} | ${t.outcome}`).sort();
}

/** Sums of the `test result:` lines, read straight from the raw stdout. */
function resultLineSums(stdout: string): { passed: number; failed: number; ignored: number; lines: number } {
  const sums = { passed: 0, failed: 0, ignored: 0, lines: 0 };
  for (const m of stdout.matchAll(/^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;/gm)) {
    sums.passed += Number(m[1]);
    sums.failed += Number(m[2]);
    sums.ignored += Number(m[3]);
    sums.lines += 1;
  }
  return sums;
}

/** The parse minus arrival-time durations (only a streamed parse has them). */
function withoutDurations(parsed: ParsedCargoOutput): ParsedCargoOutput {
  return { ...parsed, packages: parsed.packages.map((p) => ({ ...p, durationMs: null })) };
}

/** Checks a value against the TypeBox (JSON Schema) subset the contract's report items use. */
function schemaProblems(schema: unknown, value: unknown, path = "$"): string[] {
  const s = schema as Record<string, unknown>;
  if (Array.isArray(s.anyOf)) {
    return s.anyOf.some((alt) => schemaProblems(alt, value, path).length === 0)
      ? []
      : [`${path}: ${JSON.stringify(value)} matches no alternative`];
  }
  if ("const" in s) return value === s.const ? [] : [`${path}: expected ${JSON.stringify(s.const)}`];
  switch (s.type) {
    case "string":
      return typeof value === "string" ? [] : [`${path}: not a string`];
    case "boolean":
      return typeof value === "boolean" ? [] : [`${path}: not a boolean`];
    case "null":
      return value === null ? [] : [`${path}: not null`];
    case "integer": {
      const min = typeof s.minimum === "number" ? s.minimum : Number.NEGATIVE_INFINITY;
      return Number.isInteger(value) && (value as number) >= min ? [] : [`${path}: not an integer ≥ ${min}`];
    }
    case "array":
      return Array.isArray(value) ? value.flatMap((v, i) => schemaProblems(s.items, v, `${path}[${i}]`)) : [];
    case "object": {
      if (typeof value !== "object" || value === null) return [`${path}: not an object`];
      const record = value as Record<string, unknown>;
      const properties = (s.properties ?? {}) as Record<string, unknown>;
      const problems: string[] = [];
      for (const key of (s.required ?? []) as string[]) if (!(key in record)) problems.push(`${path}.${key}: missing`);
      for (const [key, sub] of Object.entries(properties)) {
        if (key in record) problems.push(...schemaProblems(sub, record[key], `${path}.${key}`));
      }
      if (s.additionalProperties === false) {
        for (const key of Object.keys(record)) if (!(key in properties)) problems.push(`${path}.${key}: not allowed`);
      }
      return problems;
    }
    default:
      return [];
  }
}

const reportSchema = JobEvidence.properties.report.properties;

function assertReportShapes(parsed: ParsedCargoOutput): ReturnType<typeof toReportItems> {
  const items = toReportItems(parsed, { attempt: 1 });
  assert.deepEqual(schemaProblems(reportSchema.crates, items.crates), []);
  assert.deepEqual(schemaProblems(reportSchema.tests, items.tests), []);
  return items;
}

// ---------------------------------------------------------------- real cargo: one crate

/** Source lines of the fixture library; doctest names carry the line of each opening fence. */
const LIB_SOURCE = [
  "//! Fixture for kiln's Cargo output parser.",
  "",
  "/// Adds.",
  "///",
  "/// ```",
  "/// assert_eq!(kiln_fixture::add(1, 2), 3);",
  "/// ```",
  "pub fn add(a: u64, b: u64) -> u64 {",
  "    a + b",
  "}",
  "",
  "/// A doctest that fails.",
  "///",
  "/// ```",
  "/// assert_eq!(kiln_fixture::add(2, 2), 5);",
  "/// ```",
  "pub fn broken_doc() {}",
  "",
  "/// A doctest that must not compile (run standalone, outside the merged doctests).",
  "///",
  "/// ```compile_fail",
  '/// let x: u32 = "not a number";',
  "/// ```",
  "pub fn must_not_compile() {}",
  "",
  "#[cfg(test)]",
  "mod tests {",
  "    use super::*;",
  "    #[test]",
  "    fn passes() { assert_eq!(add(2, 2), 4); }",
  "    #[test]",
  '    fn fails() { println!("captured before failing"); assert_eq!(add(2, 2), 5, "arithmetic is broken"); }',
  "    #[test]",
  '    fn fails_loudly() { for i in 0..400 { println!("noise line {i:04} ............................"); } panic!("loud"); }',
  "    #[test]",
  "    #[ignore]",
  "    fn ignored() {}",
  "    #[test]",
  '    #[ignore = "too slow"]',
  "    fn ignored_with_reason() {}",
  "    #[test]",
  '    #[should_panic(expected = "boom")]',
  '    fn panics_as_expected() { panic!("boom") }',
  "    mod nested {",
  "        #[test]",
  "        fn deep() {}",
  "    }",
  "}",
];
const fenceLines = LIB_SOURCE.flatMap((line, i) => (line.startsWith("/// ```") ? [i + 1] : []));
const [addFence, brokenFence, compileFailFence] = [fenceLines[0], fenceLines[2], fenceLines[4]];

describe("real cargo test: a crate with unit, integration and doc tests", { skip: skipReal, timeout: 120_000 }, () => {
  let root = "";
  let run: CargoRun;
  let parsed: ParsedCargoOutput;

  before(async () => {
    root = mkdtempSync(join(tmpdir(), "kiln-parse-crate-"));
    writeTree(join(root, "fixture"), {
      "Cargo.toml": '[package]\nname = "kiln-fixture"\nversion = "0.1.0"\nedition = "2024"\n',
      "src/lib.rs": `${LIB_SOURCE.join("\n")}\n`,
      "tests/integration.rs":
        "#[test]\nfn it_passes() { assert_eq!(kiln_fixture::add(1, 1), 2); }\n" +
        '#[test]\nfn it_fails() { panic!("integration failure"); }\n',
    });
    run = await cargoTest(join(root, "fixture"), join(root, "target"));
    parsed = parseCargoOutput(run.stdout, run.stderr);
  });
  after(() => {
    if (root !== "") rmSync(root, { recursive: true, force: true });
  });

  test("lists exactly the tests libtest ran, with outcomes and binaries", () => {
    assert.equal(run.code, 101, run.stderr);
    assert.deepEqual(
      triples(parsed.tests),
      [
        "kiln-fixture (lib) | tests::passes | passed",
        "kiln-fixture (lib) | tests::fails | failed",
        "kiln-fixture (lib) | tests::fails_loudly | failed",
        "kiln-fixture (lib) | tests::ignored | ignored",
        "kiln-fixture (lib) | tests::ignored_with_reason | ignored",
        "kiln-fixture (lib) | tests::panics_as_expected | passed",
        "kiln-fixture (lib) | tests::nested::deep | passed",
        "kiln-fixture::integration | it_passes | passed",
        "kiln-fixture::integration | it_fails | failed",
        `kiln-fixture (doc) | src/lib.rs - add (line ${addFence}) | passed`,
        `kiln-fixture (doc) | src/lib.rs - broken_doc (line ${brokenFence}) | failed`,
        `kiln-fixture (doc) | src/lib.rs - must_not_compile (line ${compileFailFence}) | passed`,
      ].sort(),
    );
    const byName = new Map(parsed.tests.map((t) => [t.name, t]));
    assert.equal(byName.get("tests::ignored_with_reason")?.ignoreReason, "too slow");
    assert.equal(byName.get("tests::panics_as_expected")?.mode, "should panic");
    assert.equal(byName.get(`src/lib.rs - must_not_compile (line ${compileFailFence})`)?.mode, "compile fail");

    assert.deepEqual(
      parsed.testBinaries.map((b) => [b.label, b.targetKind, b.status, b.libtest, b.rerunArgs]),
      [
        ["kiln-fixture (lib)", "lib", "failed", true, "--lib"],
        ["kiln-fixture::integration", "test", "failed", true, "--test integration"],
        ["kiln-fixture (doc)", "doc", "failed", true, "--doc"],
      ],
    );
    assert.deepEqual(parsed.failedTargets, ["--lib", "--test integration", "--doc"]);
  });

  test("counts equal the `test result` lines (merged doctests print two of them)", () => {
    const sums = resultLineSums(run.stdout);
    assert.equal(sums.lines, 4, "lib, integration, merged doctests, standalone doctests");
    const t = parsed.testTotals;
    assert.deepEqual([t.passed, t.failed, t.ignored, t.resultLines], [sums.passed, sums.failed, sums.ignored, 4]);
    assert.deepEqual(t.listed, { passed: sums.passed, failed: sums.failed, ignored: sums.ignored, bench: 0 });
    assert.deepEqual([t.binaries, t.failedBinaries], [3, 3]);
    const doc = parsed.testBinaries.find((b) => b.targetKind === "doc");
    assert.deepEqual([doc?.summary?.passed, doc?.summary?.failed], [2, 1]);
  });

  test("captures each failure's output, bounded", () => {
    const byName = new Map(parsed.tests.map((t) => [t.name, t]));
    const fails = byName.get("tests::fails");
    assert.match(fails?.failureOutput ?? "", /captured before failing/);
    assert.match(fails?.failureOutput ?? "", /arithmetic is broken/);
    assert.equal(fails?.failureOutputTruncated, false);
    const loud = byName.get("tests::fails_loudly");
    assert.equal(loud?.failureOutputTruncated, true);
    assert.ok((loud?.failureOutput?.length ?? 0) <= 4096);
    assert.match(loud?.failureOutput ?? "", /^noise line 0000/);
    assert.match(byName.get("it_fails")?.failureOutput ?? "", /integration failure/);
    assert.match(byName.get(`src/lib.rs - broken_doc (line ${brokenFence})`)?.failureOutput ?? "", /left: 4/);
    for (const t of parsed.tests) if (t.outcome !== "failed") assert.equal(t.failureOutput, null, t.name);
  });

  test("reports the units Cargo built and a successful build", () => {
    assert.deepEqual(parsed.build.success, true);
    assert.equal(parsed.build.compilerErrors, 0);
    assert.ok(parsed.units.length >= 3);
    for (const unit of parsed.units) {
      assert.deepEqual(
        [unit.package.name, unit.package.version, unit.package.sourceKind, unit.fresh],
        ["kiln-fixture", "0.1.0", "path", false],
      );
    }
    const kinds = parsed.units.map((u) => `${u.target.name}:${u.target.kinds.join("+")}:${u.profile.test}`).sort();
    assert.deepEqual(kinds, ["integration:test:true", "kiln_fixture:lib:false", "kiln_fixture:lib:true"]);
  });

  test("the streamed parse equals the parse of the whole output, in either stream order", () => {
    assert.deepEqual(withoutDurations(run.streamed), parsed);
    const reversed = new CargoOutputParser();
    reversed.pushText("stderr", run.stderr);
    reversed.pushText("stdout", run.stdout);
    reversed.end();
    assert.deepEqual(reversed.result(), parsed);
    const pkg = run.streamed.packages[0];
    assert.equal(pkg?.outcome, "compiled");
    assert.equal(typeof pkg?.durationMs, "number");
  });

  test("maps onto the contract's report items", () => {
    const items = assertReportShapes(parsed);
    assert.deepEqual(
      items.crates.map((c) => [c.name, c.version, c.source, c.outcome]),
      [["kiln-fixture", "0.1.0", "workspace", "compiled"]],
    );
    assert.equal(items.tests.length, 12);
    const failing = items.tests.find((t) => t.name === "tests::fails");
    assert.deepEqual([failing?.target, failing?.outcome, failing?.attempt], ["kiln-fixture (lib)", "failed", 1]);
    assert.match(failing?.failure_output ?? "", /arithmetic is broken/);
  });
});

// ---------------------------------------------------------------- real cargo: a workspace

describe("real cargo test: a two-member workspace, built twice", { skip: skipReal, timeout: 120_000 }, () => {
  let root = "";
  let first: CargoRun;
  let second: CargoRun;

  before(async () => {
    root = mkdtempSync(join(tmpdir(), "kiln-parse-ws-"));
    const ws = join(root, "ws");
    writeTree(ws, {
      "Cargo.toml": '[workspace]\nmembers = ["core", "app"]\nresolver = "2"\n',
      "core/Cargo.toml": '[package]\nname = "ws-core"\nversion = "0.2.0"\nedition = "2021"\n',
      "core/build.rs":
        'fn main() {\n    println!("cargo::rustc-check-cfg=cfg(from_build)");\n    println!("cargo::rustc-cfg=from_build");\n}\n',
      "core/src/lib.rs":
        "/// Doubles.\n///\n/// ```\n/// assert_eq!(ws_core::double(2), 4);\n/// ```\n" +
        "pub fn double(x: i32) -> i32 {\n    if cfg!(from_build) { x * 2 } else { 0 }\n}\n\n" +
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() { assert_eq!(super::double(3), 6); }\n}\n",
      "app/Cargo.toml":
        '[package]\nname = "ws-app"\nversion = "0.1.0"\nedition = "2021"\n\n' +
        '[dependencies]\nws-core = { path = "../core" }\n\n[[test]]\nname = "custom"\nharness = false\n',
      "app/src/main.rs":
        'fn main() {\n    println!("{}", ws_core::double(21));\n}\n\n' +
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn uses_core() { assert_eq!(ws_core::double(1), 2); }\n}\n",
      "app/tests/smoke.rs": "#[test]\nfn smoke() { assert_eq!(ws_core::double(5), 10); }\n",
      "app/tests/custom.rs": 'fn main() {\n    println!("custom harness ran");\n}\n',
    });
    first = await cargoTest(ws, join(root, "target"));
    second = await cargoTest(ws, join(root, "target"));
  });
  after(() => {
    if (root !== "") rmSync(root, { recursive: true, force: true });
  });

  const expectedTests = [
    "ws-app (bin ws-app) | tests::uses_core | passed",
    "ws-app::smoke | smoke | passed",
    "ws-core (lib) | tests::doubles | passed",
    "ws-core (doc) | core/src/lib.rs - double (line 3) | passed",
  ].sort();

  test("first build compiles both members and runs every binary", () => {
    assert.equal(first.code, 0, first.stderr);
    const parsed = parseCargoOutput(first.stdout, first.stderr);
    assert.equal(parsed.build.success, true);
    assert.deepEqual(parsed.packages.map((p) => [p.name, p.version, p.sourceKind, p.outcome]).sort(), [
      ["ws-app", "0.1.0", "path", "compiled"],
      ["ws-core", "0.2.0", "path", "compiled"],
    ]);
    assert.ok(parsed.units.some((u) => u.package.name === "ws-core" && u.target.kinds.includes("custom-build")));
    assert.deepEqual(
      parsed.buildScripts.map((b) => [b.package.name, b.cfgs]),
      [["ws-core", ["from_build"]]],
    );
    assert.deepEqual(triples(parsed.tests), expectedTests);
    // Doctest names are relative to the workspace root. The harness = false binary printed no
    // libtest block; the blocks after it still land right.
    const custom = parsed.testBinaries.find((b) => b.label === "ws-app::custom");
    assert.deepEqual([custom?.libtest, custom?.status, custom?.tests.length], [false, "passed", 0]);
    assert.equal(parsed.testTotals.binaries, 5);
    const sums = resultLineSums(first.stdout);
    assert.deepEqual([parsed.testTotals.passed, parsed.testTotals.resultLines], [sums.passed, sums.lines]);
    assert.deepEqual(withoutDurations(first.streamed), parsed);
  });

  test("second build reports every crate fresh", () => {
    assert.equal(second.code, 0, second.stderr);
    const parsed = parseCargoOutput(second.stdout, second.stderr);
    assert.ok(parsed.units.length >= 6);
    assert.deepEqual(
      parsed.units.filter((u) => !u.fresh).map((u) => u.target.name),
      [],
    );
    assert.deepEqual(
      parsed.packages.map((p) => p.outcome),
      ["fresh", "fresh"],
    );
    const items = assertReportShapes(parsed);
    assert.deepEqual(items.crates.map((c) => [c.name, c.source, c.outcome, c.duration_ms]).sort(), [
      ["ws-app", "workspace", "fresh", null],
      ["ws-core", "workspace", "fresh", null],
    ]);
    assert.deepEqual(triples(parsed.tests), expectedTests);
    assert.deepEqual(
      second.streamed.packages.map((p) => p.durationMs),
      [null, null],
    );
  });
});

// ---------------------------------------------------------------- hand-written fixtures

describe("package ids", () => {
  const cases: [string, string, string, string, string | null][] = [
    ["path+file:///work/demo#0.3.1", "demo", "0.3.1", "path", "file:///work/demo"],
    ["path+file:///tmp/my%20dir#spacey@0.1.0", "spacey", "0.1.0", "path", "file:///tmp/my%20dir"],
    ["path+file:///tmp/my%20crate#1.0.0", "my crate", "1.0.0", "path", "file:///tmp/my%20crate"],
    [
      "registry+https://github.com/rust-lang/crates.io-index#serde@1.0.197",
      "serde",
      "1.0.197",
      "registry",
      "https://github.com/rust-lang/crates.io-index",
    ],
    [
      "sparse+https://index.example.com/#my-dep@0.4.0-beta.1+build.5",
      "my-dep",
      "0.4.0-beta.1+build.5",
      "registry",
      "https://index.example.com/",
    ],
    [
      "git+https://github.com/o/regex.git?branch=dev#regex@1.4.3",
      "regex",
      "1.4.3",
      "git",
      "https://github.com/o/regex.git?branch=dev",
    ],
    ["git+https://github.com/rust-lang/cargo#0.52.0", "cargo", "0.52.0", "git", "https://github.com/rust-lang/cargo"],
    [
      "serde 1.0.197 (registry+https://github.com/rust-lang/crates.io-index)",
      "serde",
      "1.0.197",
      "registry",
      "https://github.com/rust-lang/crates.io-index",
    ],
    ["demo 0.3.1 (path+file:///work/demo)", "demo", "0.3.1", "path", "file:///work/demo"],
    [
      "foo 0.1.0 (git+https://github.com/o/foo?branch=main#0123456789abcdef)",
      "foo",
      "0.1.0",
      "git",
      "https://github.com/o/foo?branch=main#0123456789abcdef",
    ],
    ["vendored 2.0.0 (directory+file:///vendor)", "vendored", "2.0.0", "directory", "file:///vendor"],
  ];
  for (const [id, name, version, sourceKind, sourceUrl] of cases) {
    test(id, () => {
      assert.deepEqual(parsePackageId(id), { name, version, sourceKind, sourceUrl });
    });
  }
  test("anything else is not a package id", () => {
    assert.equal(parsePackageId("not a package id"), null);
    assert.equal(parsePackageId(""), null);
  });
});

const artifact = (name: string, kind: string, test: boolean, exe: string | null, pkg = "demo", fresh = false) =>
  JSON.stringify({
    reason: "compiler-artifact",
    package_id: `path+file:///src/${pkg}#0.3.1`,
    manifest_path: `/src/${pkg}/Cargo.toml`,
    target: { kind: [kind], crate_types: [kind === "lib" ? "lib" : "bin"], name, src_path: "/src/x.rs", test: true },
    profile: { opt_level: "0", debuginfo: 2, debug_assertions: true, overflow_checks: true, test },
    features: [],
    filenames: [],
    executable: exe,
    fresh,
  });

/** lib unittests, a criterion-style bench (harness = false, prints text), an integration test, merged doctests. */
const MIXED_STDOUT = [
  artifact("demo", "lib", false, null),
  artifact("demo", "lib", true, "/src/demo/target/debug/deps/demo-1111111111111111"),
  artifact("speed", "bench", true, "/src/demo/target/debug/deps/speed-2222222222222222"),
  artifact("api", "test", true, "/src/demo/target/debug/deps/api-3333333333333333"),
  '{"reason":"build-finished","success":true}',
  "",
  "running 2 tests",
  "test tests::a ... ok",
  "test tests::b ... ignored",
  "",
  "test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s",
  "",
  "Testing speed/fast",
  "Success",
  "",
  "",
  "running 1 test",
  "test api_works ... ok",
  "",
  "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
  "",
  "",
  "running 1 test",
  "test src/lib.rs - f (line 3) ... ok",
  "",
  "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s",
  "",
  "",
  "running 1 test",
  "test src/lib.rs - g (line 9) - compile fail ... ok",
  "",
  "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.02s",
  "",
  "all doctests ran in 0.20s; merged doctests compilation took 0.10s",
];
const MIXED_STDERR = [
  "   Compiling demo v0.3.1 (/src/demo)",
  "    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.20s",
  "     Running unittests src/lib.rs (target/debug/deps/demo-1111111111111111)",
  "     Running benches/speed.rs (target/debug/deps/speed-2222222222222222)",
  "     Running tests/api.rs (target/debug/deps/api-3333333333333333)",
  "   Doc-tests demo",
];
const MIXED_EXPECTED = [
  "demo (lib) | tests::a | passed",
  "demo (lib) | tests::b | ignored",
  "demo::api | api_works | passed",
  "demo (doc) | src/lib.rs - f (line 3) | passed",
  "demo (doc) | src/lib.rs - g (line 9) | passed",
].sort();

function parseInOrder(order: readonly ("stdout" | "stderr")[], stdout: string[], stderr: string[]): ParsedCargoOutput {
  const parser = new CargoOutputParser();
  const next = { stdout: 0, stderr: 0 };
  for (const stream of order) {
    const lines = stream === "stdout" ? stdout : stderr;
    const line = lines[next[stream]++];
    if (line !== undefined) parser.pushLine(stream, line);
  }
  parser.end();
  return parser.result();
}

/** A deterministic shuffle of the two streams that keeps each stream's own order. */
function interleaving(seed: number, stdoutLines: number, stderrLines: number): ("stdout" | "stderr")[] {
  let state = seed;
  const random = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
  const order: ("stdout" | "stderr")[] = [];
  let out = stdoutLines;
  let err = stderrLines;
  while (out + err > 0) {
    const pickOut = err === 0 || (out > 0 && random() < out / (out + err));
    order.push(pickOut ? "stdout" : "stderr");
    if (pickOut) out -= 1;
    else err -= 1;
  }
  return order;
}

describe("interleavings of stdout and stderr", () => {
  const reference = parseCargoOutput(MIXED_STDOUT.join("\n"), MIXED_STDERR.join("\n"));

  test("pairs blocks with binaries across a harness = false bench and two-block merged doctests", () => {
    assert.deepEqual(triples(reference.tests), MIXED_EXPECTED);
    assert.deepEqual(
      reference.testBinaries.map((b) => [b.label, b.libtest, b.status]),
      [
        ["demo (lib)", true, "passed"],
        ["demo (bench speed)", false, "passed"],
        ["demo::api", true, "passed"],
        ["demo (doc)", true, "passed"],
      ],
    );
    assert.equal(reference.tests.find((t) => t.name === "src/lib.rs - g (line 9)")?.mode, "compile fail");
  });

  test("every order of arrival gives the same result", () => {
    const n = MIXED_STDOUT.length;
    const m = MIXED_STDERR.length;
    const orders = [
      [...Array<"stdout">(n).fill("stdout"), ...Array<"stderr">(m).fill("stderr")],
      [...Array<"stderr">(m).fill("stderr"), ...Array<"stdout">(n).fill("stdout")],
      ...Array.from({ length: 25 }, (_, seed) => interleaving(seed + 1, n, m)),
    ];
    for (const order of orders) assert.deepEqual(parseInOrder(order, MIXED_STDOUT, MIXED_STDERR), reference);
  });

  test("while stderr lags, later blocks wait unattributed; they are placed once it arrives", () => {
    const parser = new CargoOutputParser();
    for (const line of MIXED_STDOUT) parser.pushLine("stdout", line);
    for (const line of MIXED_STDERR.slice(0, 3)) parser.pushLine("stderr", line);
    const partial = parser.result();
    assert.deepEqual(
      partial.testBinaries.map((b) => [b.label, b.status, b.tests.length]),
      [
        ["demo (lib)", "running", 2],
        ["(unattributed)", "passed", 3],
      ],
    );
    for (const line of MIXED_STDERR.slice(3)) parser.pushLine("stderr", line);
    parser.end();
    assert.deepEqual(parser.result(), reference);
  });

  test("a failed block is never given to a binary Cargo saw pass", () => {
    // Without the loose criterion text the only clue is the failure: api failed, speed did not.
    const stdout = MIXED_STDOUT.filter((l) => l !== "Testing speed/fast" && l !== "Success").map((l) =>
      l === "test api_works ... ok"
        ? "test api_works ... FAILED"
        : l.startsWith("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s")
          ? "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"
          : l,
    );
    const stderr = [
      ...MIXED_STDERR.slice(0, 5),
      "error: test failed, to rerun pass `--test api`",
      MIXED_STDERR[5] ?? "",
    ];
    const parsed = parseCargoOutput(stdout.join("\n"), stderr.join("\n"));
    assert.equal(parsed.tests.find((t) => t.name === "api_works")?.binary, "demo::api");
    assert.deepEqual(parsed.failedTargets, ["--test api"]);
  });
});

describe("hand-written output shapes", () => {
  test("a binary killed by a signal leaves an unterminated block", () => {
    const stdout = [
      artifact("c1", "lib", true, "/w/target/debug/deps/c1-e3dc88bf7acb958c", "c1"),
      artifact("it", "test", true, "/w/target/debug/deps/it-cd948c8a7a4fba6c", "c1"),
      '{"reason":"build-finished","success":true}',
      "",
      "running 2 tests",
      "test tests::a_ok ... ok",
      "",
      "running 1 test",
      "test x ... ok",
      "",
      "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
      "",
    ].join("\n");
    const stderr = [
      "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.01s",
      "     Running unittests src/lib.rs (target/debug/deps/c1-e3dc88bf7acb958c)",
      "error: test failed, to rerun pass `--lib`",
      "",
      "Caused by:",
      "  process didn't exit successfully: `/w/target/debug/deps/c1-e3dc88bf7acb958c` (signal: 6, SIGABRT: process abort signal)",
      "     Running tests/it.rs (target/debug/deps/it-cd948c8a7a4fba6c)",
      "error: 1 target failed:",
      "    `--lib`",
    ].join("\n");
    const parsed = parseCargoOutput(stdout, stderr);
    const [lib, it] = parsed.testBinaries;
    assert.deepEqual(
      [lib?.label, lib?.status, lib?.crashed, lib?.exitDetail, lib?.summary],
      ["c1 (lib)", "failed", true, "signal: 6, SIGABRT: process abort signal", null],
    );
    assert.deepEqual(triples(parsed.tests), ["c1 (lib) | tests::a_ok | passed", "c1::it | x | passed"]);
    assert.deepEqual([it?.status, it?.crashed], ["passed", false]);
    assert.deepEqual(parsed.failedTargets, ["--lib"]);
  });

  test("compile errors rendered on stderr (json-render-diagnostics emits no compiler-message)", () => {
    const stderr = [
      "   Compiling c1 v0.1.0 (/tmp/c1)",
      "error[E0308]: mismatched types",
      " --> src/lib.rs:1:21",
      "  |",
      '1 | pub fn f() -> u32 { "x" }',
      "  |                     ^^^ expected `u32`, found `&str`",
      "",
      "warning: unused variable: `unused`",
      " --> src/lib.rs:2:9",
      "",
      "error: cannot find macro `nope` in this scope",
      " --> src/lib.rs:3:5",
      "",
      "For more information about this error, try `rustc --explain E0308`.",
      "warning: `c1` (lib test) generated 1 warning",
      "error: could not compile `c1` (lib test) due to 2 previous errors; 1 warning emitted",
      "warning: build failed, waiting for other jobs to finish...",
      "warning: `c1` (lib) generated 1 warning (1 duplicate)",
      "error: could not compile `c1` (lib) due to 2 previous errors; 1 warning emitted",
    ].join("\n");
    const parsed = parseCargoOutput('{"reason":"build-finished","success":false}\n', stderr);
    assert.deepEqual(
      [parsed.build.finished, parsed.build.success, parsed.build.compilerErrors, parsed.build.compilerWarnings],
      [true, false, 2, 1],
    );
    assert.deepEqual(
      parsed.packages.map((p) => [p.name, p.version, p.sourceKind, p.outcome, p.failedTargets]),
      [["c1", "0.1.0", "path", "failed", ["lib test", "lib"]]],
    );
    const items = assertReportShapes(parsed);
    assert.deepEqual(
      items.crates.map((c) => [c.name, c.version, c.source, c.outcome]),
      [["c1", "0.1.0", "workspace", "failed"]],
    );
    assert.deepEqual(items.tests, []);
  });

  test("compiler-message objects (plain --message-format=json) are counted once each", () => {
    const message = (level: string, text: string, target: string) =>
      JSON.stringify({
        reason: "compiler-message",
        package_id: "path+file:///tmp/c1#0.1.0",
        target: { kind: ["lib"], name: target },
        message: { level, message: text, code: null, rendered: `${level}: ${text}\n` },
      });
    const stdout = [
      message("error", "mismatched types", "c1"),
      message("error", "mismatched types", "c1"),
      message("warning", "unused variable", "c1"),
      message("failure-note", "For more information about this error", "c1"),
      '{"reason":"build-finished","success":false}',
    ].join("\n");
    const parsed = parseCargoOutput(stdout, "");
    assert.deepEqual([parsed.build.compilerErrors, parsed.build.compilerWarnings], [1, 1]);
  });

  test("--nocapture with one thread: names print before the outcome", () => {
    const stdout = [
      "running 3 tests",
      "test tests::nocap ... hello from nocap",
      "no newlineok",
      "test tests::sp - should panic ... ",
      "thread 'tests::sp' panicked at src/lib.rs:31:57:",
      "abc def",
      "ok",
      "test tests::sp_wrong - should panic ... ",
      "thread 'tests::sp_wrong' panicked at src/lib.rs:32:63:",
      "zzz",
      "FAILED",
      "",
      "failures:",
      "",
      "---- tests::sp_wrong stdout ----",
      "note: panic did not contain expected string",
      '      panic message: "zzz"',
      "",
      "failures:",
      "    tests::sp_wrong",
      "",
      "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.08s",
    ].join("\n");
    const stderr =
      "     Running unittests src/lib.rs (target/debug/deps/d1-e509593571adb38f)\nerror: test failed, to rerun pass `--lib`\n";
    const parsed = parseCargoOutput(stdout, stderr);
    assert.deepEqual(triples(parsed.tests), [
      "d1 (lib) | tests::nocap | passed",
      "d1 (lib) | tests::sp | passed",
      "d1 (lib) | tests::sp_wrong | failed",
    ]);
    assert.match(parsed.tests.find((t) => t.name === "tests::sp_wrong")?.failureOutput ?? "", /expected string/);
  });

  test("cargo bench: measured benchmarks and tests ignored in bench mode", () => {
    const stdout = [
      "running 2 tests",
      "test tests::t1 ... ignored",
      "test tests::bench_add ... bench:       1,234.50 ns/iter (+/- 20.25) = 512 MB/s",
      "",
      "test result: ok. 0 passed; 0 failed; 1 ignored; 1 measured; 0 filtered out; finished in 2.85s",
    ].join("\n");
    const stderr = "     Running unittests src/lib.rs (target/release/deps/b1-1caf731a21640689)\n";
    const parsed = parseCargoOutput(stdout, stderr);
    const bench = parsed.tests.find((t) => t.name === "tests::bench_add");
    assert.deepEqual(
      [bench?.outcome, bench?.bench],
      ["bench", { nsPerIter: 1234.5, deviationNs: 20.25, mbPerSecond: 512 }],
    );
    assert.deepEqual([parsed.testTotals.measured, parsed.testTotals.listed.bench], [1, 1]);
    const items = assertReportShapes(parsed);
    const item = items.tests.find((t) => t.name === "tests::bench_add");
    assert.deepEqual([item?.outcome, item?.bench?.ns_per_iter], ["passed", 1234.5]);
  });

  test("cargo -v: only test binaries after `Finished` count as runs; terse (-q) output names failures", () => {
    const stdout = [
      artifact("app", "bin", true, "/ws/target/debug/deps/app-a8033806fc9d6e8f", "app"),
      '{"reason":"build-finished","success":true}',
      "",
      "running 3 tests",
      ".F. 3/3",
      "tests::broken --- FAILED",
      "",
      "failures:",
      "",
      "---- tests::broken stdout ----",
      "oops",
      "",
      "failures:",
      "    tests::broken",
      "",
      "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
      "",
    ].join("\n");
    const stderr = [
      "   Compiling app v0.1.0 (/ws/app)",
      "     Running `/root/.rustup/toolchains/stable/bin/rustc --crate-name app --edition=2021 app/src/main.rs`",
      "     Running `/ws/target/debug/build/app-d1fb2d6725825991/build-script-build`",
      "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.58s",
      "     Running `CARGO=/root/.cargo/bin/cargo /ws/target/debug/deps/app-a8033806fc9d6e8f --quiet`",
      "error: test failed, to rerun pass `-p app --bin app`",
    ].join("\n");
    const parsed = parseCargoOutput(stdout, stderr);
    assert.deepEqual(
      parsed.testBinaries.map((b) => [b.label, b.status, b.rerunArgs]),
      [["app (bin app)", "failed", "-p app --bin app"]],
    );
    assert.deepEqual(triples(parsed.tests), ["app (bin app) | tests::broken | failed"]);
    assert.equal(parsed.tests[0]?.failureOutput, "oops");
    assert.deepEqual([parsed.testTotals.passed, parsed.testTotals.failed], [2, 1]);
  });

  test("ANSI colours and CRLF line ends are ignored; chunks may split lines anywhere", () => {
    const esc = String.fromCharCode(27);
    const stderr = `${esc}[1m${esc}[92m   Compiling${esc}[0m demo v0.3.1 (/src/demo)\r\n${esc}[1m${esc}[92m     Running${esc}[0m unittests src/lib.rs (target/debug/deps/demo-1111111111111111)\r\n`;
    const stdout =
      "running 1 test\r\ntest a ... ok\r\n\r\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\r\n";
    const parser = new CargoOutputParser();
    for (let i = 0; i < Math.max(stdout.length, stderr.length); i += 7) {
      parser.pushText("stdout", stdout.slice(i, i + 7));
      parser.pushText("stderr", stderr.slice(i, i + 7));
    }
    parser.end();
    const parsed = parser.result();
    assert.deepEqual(triples(parsed.tests), ["demo (lib) | a | passed"]);
    assert.deepEqual(
      parsed.packages.map((p) => [p.name, p.outcome]),
      [["demo", "incomplete"]],
    );
  });
});
