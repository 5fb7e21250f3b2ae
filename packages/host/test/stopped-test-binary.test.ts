import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cargoOutputObserver } from "../src/agent/cargo-output-observer.js";

/**
 * What cargo printed of a `cargo test` whose test binary was still running when the process tree
 * was killed (recorded from a real job cancelled by Ctrl-C): the binary announced on stderr, its
 * libtest block open on stdout, one test reported of two, nothing after.
 */
const STDOUT = [
  JSON.stringify({
    reason: "compiler-artifact",
    package_id: "path+file:///kiln/src#sleepy@0.1.0",
    manifest_path: "/kiln/src/Cargo.toml",
    target: { kind: ["lib"], crate_types: ["lib"], name: "sleepy", src_path: "/kiln/src/src/lib.rs", test: true },
    profile: { opt_level: "0", debuginfo: 2, debug_assertions: true, overflow_checks: true, test: true },
    features: [],
    filenames: ["/kiln/target/debug/deps/sleepy-1cd9eadd71e81588"],
    executable: "/kiln/target/debug/deps/sleepy-1cd9eadd71e81588",
    fresh: false,
  }),
  '{"reason":"build-finished","success":true}',
  "",
  "running 2 tests",
  "test quick ... ok",
];
const STDERR = [
  "   Compiling sleepy v0.1.0 (/kiln/src)",
  "    Finished `test` profile [unoptimized + debuginfo] target(s) in 5.17s",
  "     Running unittests src/lib.rs (/kiln/target/debug/deps/sleepy-1cd9eadd71e81588)",
];

function observed(stoppedFromOutside: boolean) {
  const observer = cargoOutputObserver(1);
  for (const line of STDOUT) observer.pushLine("stdout", line);
  for (const line of STDERR) observer.pushLine("stderr", line);
  observer.end(stoppedFromOutside);
  return observer.summary();
}

describe("a test binary running when cargo is stopped", () => {
  it("stopped from outside (cancelled): the reported test stays with its binary, and nothing is called crashed", () => {
    const summary = observed(true);
    assert.deepEqual(
      summary.tests.map((t) => [t.target, t.name, t.outcome]),
      [["sleepy (lib)", "quick", "passed"]],
    );
    assert.equal(summary.failedTests, 0);
  });

  it("ended on its own (a real crash): the binary is reported as one failed item, as before", () => {
    const summary = observed(false);
    assert.ok(
      summary.tests.some((t) => t.outcome === "failed" && /crashed before reporting its tests/.test(t.name)),
      JSON.stringify(summary.tests),
    );
  });
});
