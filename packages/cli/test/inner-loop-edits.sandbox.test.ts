import assert from "node:assert/strict";
import { appendFileSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import { type CliRun, freshConfigHome, runCli, startListeningEmbedded } from "./harness.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON documents read loosely in assertions.
type Doc = any;

/** Debian's crate fixtures, from @kiln/server/testing. */
const debian = () => import("@kiln/server/testing");

const jsonLines = (run: CliRun): Doc[] =>
  run.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));

/** What semver's lib.rs gets appended (a marker function) and the integration test that reads it. */
const marker = (value: number) => `\n#[doc(hidden)]\npub fn kiln_edit_marker() -> u32 {\n    ${value}\n}\n`;
const MARKER_TEST = "#[test]\nfn marker_is_one() {\n    assert_eq!(semver::kiln_edit_marker(), 1);\n}\n";

/**
 * Issue 21: the inner loop must never serve a stale binary from a reused lineage. On a real
 * crate (Debian's semver) through the real CLI and sandbox, every run of one repository is warm
 * after the first, and each edit of a library source file changes what its test sees: the
 * result follows the edit, also when an edit brings back bytes the lineage built before.
 */
describe("kiln cargo test after edits on a warm lineage (real cargo, real sandbox)", () => {
  let embedded: Awaited<ReturnType<typeof startListeningEmbedded>>;
  let env: Record<string, string>;
  const scratch: string[] = [];

  before(async () => {
    embedded = await startListeningEmbedded();
    env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: embedded.endpoint, KILN_TOKEN: embedded.token };
  });
  after(async () => {
    await embedded.close();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  it("an edit is always rebuilt: the test result follows each edit of lib.rs, and the earlier bytes restored pass again", async (t) => {
    const { debianCrate, debianCrateInstalled, materialize } = await debian();
    if (!debianCrateInstalled("semver", "1.0.14")) {
      t.skip("apt-get install librust-semver-dev librust-serde-dev");
      return;
    }
    await onboardRepository(
      embedded.storage,
      { tenantId: embedded.tenant, name: "acme/edits", onboardedBy: "test" },
      new Date(),
    );
    const dir = materialize(debianCrate("semver", "1.0.14"));
    scratch.push(dir);
    const lib = join(dir, "src", "lib.rs");
    const original = readFileSync(lib, "utf8");
    appendFileSync(lib, marker(1));
    writeFileSync(join(dir, "tests", "kiln_edit.rs"), MARKER_TEST);

    const run = async (expected: { exit: number; cache: "cold" | "warm" }) => {
      // --no-fail-fast: every test binary runs, also after the edited one failed.
      const cli = await runCli(["cargo", "test", "--no-fail-fast", "--repository", "acme/edits", "--json"], {
        cwd: dir,
        env,
      });
      assert.equal(cli.code, expected.exit, `${cli.stderr}\n${cli.stdout.slice(-3000)}`);
      const result = jsonLines(cli).find((l) => l.type === "result");
      const evidence = await embedded.jobs.evidence(result.job);
      const cache = evidence.report.caches[0];
      assert.equal(cache.outcome, expected.cache, JSON.stringify(cache));
      const semver = (evidence.report.crates as Doc[]).find((c) => c.name === "semver");
      return { result, semver: semver?.outcome as string | undefined };
    };

    const first = await run({ exit: 0, cache: "cold" });
    assert.equal(first.result.tests.failed, 0);
    const passedBefore = first.result.tests.passed;

    // Unchanged: warm and nothing compiled, the marker test still passes.
    const again = await run({ exit: 0, cache: "warm" });
    assert.equal(again.semver, "fresh");
    assert.equal(again.result.tests.passed, passedBefore);

    // The same file, one byte different: the library is compiled again and its test sees 2.
    writeFileSync(lib, original + marker(2));
    const edited = await run({ exit: 101, cache: "warm" });
    assert.equal(edited.result.status, "failed");
    assert.equal(edited.semver, "compiled");
    assert.equal(edited.result.tests.failed_tests.length, 1, JSON.stringify(edited.result.tests));
    assert.match(edited.result.tests.failed_tests[0], /kiln_edit.*marker_is_one/);
    assert.equal(edited.result.tests.passed, passedBefore - 1);

    // The earlier bytes again (which the lineage built two runs ago): compiled again, passing.
    writeFileSync(lib, original + marker(1));
    const restored = await run({ exit: 0, cache: "warm" });
    assert.equal(restored.result.status, "passed");
    assert.equal(restored.semver, "compiled");
    assert.equal(restored.result.tests.passed, passedBefore);
    assert.equal(restored.result.tests.failed, 0);

    // And the failing bytes once more, right after: the lineage now holds a passing build of them.
    writeFileSync(lib, original + marker(2));
    const failingAgain = await run({ exit: 101, cache: "warm" });
    assert.equal(failingAgain.result.tests.failed_tests.length, 1, JSON.stringify(failingAgain.result.tests));
    assert.match(failingAgain.result.tests.failed_tests[0], /kiln_edit.*marker_is_one/);
  });
});
