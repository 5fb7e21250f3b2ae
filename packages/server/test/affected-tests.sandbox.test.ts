import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { crate, type Doc, type Embedded, explainJob, injectApi, startEmbedded } from "../src/testing/e2e-jobs.js";
import { personWithToken } from "../src/testing/harness.js";

/**
 * affected_tests end to end (SQLite, real cargo, real sandbox): a three-package workspace
 * where `app` depends on `core` by path and `util` stands alone. With the setting on, each
 * job of the lineage runs only the tests of the packages the change since the last passing
 * full test run affects; nothing changed → cargo does not run and the job passes, saying so.
 */
const member = (name: string, deps = "") =>
  `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n${deps}`;

function workspace(edits: { core?: number; util?: number } = {}) {
  return crate("unused", {
    "Cargo.toml": '[workspace]\nmembers = ["core", "app", "util"]\nresolver = "2"\n',
    "core/Cargo.toml": member("core"),
    "core/src/lib.rs": `pub fn base() -> u32 { ${40 + (edits.core ?? 0)} }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn core_base() { assert!(super::base() >= 40); }\n}\n`,
    "app/Cargo.toml": member("app", 'core = { path = "../core" }\n'),
    "app/src/lib.rs":
      "pub fn answer() -> u32 { core::base() + 2 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn app_answer() { assert!(super::answer() >= 42); }\n}\n",
    "util/Cargo.toml": member("util"),
    "util/src/lib.rs": `pub fn helper() -> u32 { ${7 + (edits.util ?? 0)} }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn util_helper() { assert!(super::helper() >= 7); }\n}\n`,
  });
}

/** The packages whose tests ran, from the evidence's test results (target `name (lib)`). */
const testedPackages = (evidence: Doc): string[] =>
  [...new Set((evidence.report.tests as Doc[]).map((t) => String(t.target).split(" ")[0] ?? ""))].sort();

const affectedOf = (evidence: Doc): Doc => {
  const items = evidence.report.affected_tests as Doc[];
  assert.equal(items.length, 1, JSON.stringify(items));
  return items[0];
};

describe("affected_tests end to end (SQLite, real cargo, real sandbox)", () => {
  let e: Embedded;
  let keys = 0;
  let settingsVersion = 0;

  before(async () => {
    e = await startEmbedded();
  });
  after(() => e.close());

  const setAffectedTests = async (on: boolean) => {
    const admin = await personWithToken(e.storage, { tenant: e.tenant, role: "admin", now: new Date() });
    const res = await injectApi(e.app, admin.token)("POST", "/api/repositories/acme/widget/settings", {
      key: `settings-${++keys}`,
      body: { version: settingsVersion, changes: { affected_tests: on } },
    });
    assert.equal(res.status, 200, res.body);
    settingsVersion++;
  };

  async function run(files: ReturnType<typeof workspace>, invocation: Record<string, unknown> = {}): Promise<Doc> {
    const id = await e.jobs.submit(files, `affected-${++keys}`, invocation);
    const job = await e.jobs.settle(id, 300_000);
    assert.equal(job.status, "passed", await explainJob(e.jobs, id));
    return { ...(await e.jobs.evidence(id)), id, log: await e.jobs.logText(id) };
  }

  it("runs only the affected packages' tests, none when nothing changed, and everything when asked for packages", async () => {
    await setAffectedTests(true);

    const cold = await run(workspace());
    assert.deepEqual(testedPackages(cold), ["app", "core", "util"]);
    assert.equal(affectedOf(cold).applied, false);
    assert.match(affectedOf(cold).reason, /^no baseline: the lineage is cold/);

    const utilEdited = await run(workspace({ util: 1 }));
    const a2 = affectedOf(utilEdited);
    assert.deepEqual(testedPackages(utilEdited), ["util"], utilEdited.log);
    assert.deepEqual(
      {
        applied: a2.applied,
        affected: a2.affected,
        skipped: a2.skipped,
        changed: a2.changed_files,
        job: a2.baseline.job,
      },
      { applied: true, affected: ["util"], skipped: ["app", "core"], changed: 1, job: cold.id },
    );
    assert.match(utilEdited.log, /cargo test --message-format=json-render-diagnostics --timings -p util \(/);

    const coreEdited = await run(workspace({ util: 1, core: 1 }));
    const a3 = affectedOf(coreEdited);
    assert.deepEqual(testedPackages(coreEdited), ["app", "core"]);
    assert.deepEqual([a3.affected, a3.skipped, a3.baseline.job], [["app", "core"], ["util"], utilEdited.id]);

    const unchanged = await run(workspace({ util: 1, core: 1 }));
    const a4 = affectedOf(unchanged);
    assert.deepEqual(testedPackages(unchanged), []);
    assert.deepEqual(
      [a4.applied, a4.ran_cargo, a4.changed_files, a4.affected, a4.skipped],
      [true, false, 0, [], ["app", "core", "util"]],
    );
    assert.match(
      a4.reason,
      new RegExp(`^nothing changed since the baseline \\(job ${coreEdited.id}'s passing test run`),
    );
    assert.match(unchanged.log, /kiln: cargo did not run/);
    assert.doesNotMatch(unchanged.log, /kiln: cargo test/);
    const testPhase = (unchanged.report.phases as Doc[]).find((p) => p.name === "test");
    assert.equal(testPhase?.status, "skipped");
    // The lineage was checked back in: the next job is warm and still compares against job 3.
    const cache4 = (unchanged.report.caches as Doc[])[0];
    assert.equal(cache4.outcome, "warm");
    assert.equal(typeof cache4.saved_generation, "number", JSON.stringify(cache4));

    const utilAgain = await run(workspace({ util: 2, core: 1 }));
    const a5 = affectedOf(utilAgain);
    assert.equal((utilAgain.report.caches as Doc[])[0].outcome, "warm");
    assert.equal((utilAgain.report.caches as Doc[])[0].restored_generation, cache4.saved_generation);
    assert.deepEqual([testedPackages(utilAgain), a5.affected, a5.baseline.job], [["util"], ["util"], coreEdited.id]);

    // Arguments that select packages: run as asked, with why.
    const asked = await run(workspace({ util: 2, core: 2 }), { arguments: ["-p", "util"] });
    const a6 = affectedOf(asked);
    assert.deepEqual(testedPackages(asked), ["util"]);
    assert.equal(a6.applied, false);
    assert.match(a6.reason, /select packages themselves \(-p\)/);
  });

  it("with affected_tests off the same kind of edit runs every test", async () => {
    await setAffectedTests(false);
    const off = await run(workspace({ util: 3, core: 2 }));
    assert.deepEqual(testedPackages(off), ["app", "core", "util"]);
    const a = affectedOf(off);
    assert.deepEqual([a.enabled, a.applied], [false, false]);
    assert.match(a.reason, /affected_tests setting was off/);
  });
});
