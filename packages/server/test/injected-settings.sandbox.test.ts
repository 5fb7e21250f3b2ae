import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { crate, type Doc, type Embedded, explainJob, startEmbedded } from "../src/testing/e2e-jobs.js";

/**
 * Injected build settings end to end (SQLite, real cargo, real sandbox): what admission decided
 * is what cargo ran with — the crate's own test reads its environment — and what the evidence
 * says. A setting the repository's configuration makes is reported `not applied` and cargo sees
 * the repository's value, not kiln's.
 */
const envTest = (expectJobs: string | null) =>
  crate("envprobe", {
    "src/lib.rs": `#[cfg(test)]
mod tests {
    #[test]
    fn sees_the_injected_environment() {
        assert_eq!(std::env::var("CARGO_BUILD_JOBS").ok().as_deref(), ${expectJobs === null ? "None" : `Some("${expectJobs}")`});
        assert_eq!(std::env::var("CARGO_PROFILE_DEV_DEBUG").ok().as_deref(), Some("line-tables-only"));
    }
}
`,
  });

const injectionsOf = (evidence: Doc) =>
  Object.fromEntries((evidence.report.injections as Doc[]).map((i) => [i.setting, i]));

describe("injected build settings reach cargo and the evidence (SQLite, real cargo, real sandbox)", () => {
  let e: Embedded;
  before(async () => {
    e = await startEmbedded();
  });
  after(async () => {
    await e?.close();
  });

  it("applies the platform set: cargo runs with one job per vCPU and line-table debuginfo", async () => {
    const id = await e.jobs.submit(envTest("2"), "inject-1");
    const job = await e.jobs.settle(id, 300_000);
    assert.equal(job.status, "passed", await explainJob(e.jobs, id));
    const injections = injectionsOf(await e.jobs.evidence(id));
    assert.equal(injections["build.jobs"].status, "applied");
    assert.equal(injections["build.jobs"].value, "2");
    assert.equal(injections["build.jobs"].origin, "platform default");
    assert.equal(injections["profile.dev.debug"].status, "applied");
    assert.equal(injections["profile.dev.debug"].attempt, 1);
  });

  it("leaves build.jobs alone when the repository's .cargo/config.toml sets it: not applied, never replaced", async () => {
    const files = [
      ...envTest(null),
      { path: ".cargo/config.toml", bytes: [...Buffer.from("[build]\njobs = 1\n")], executable: false },
    ].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
    const id = await e.jobs.submit(files, "inject-2");
    const job = await e.jobs.settle(id, 300_000);
    assert.equal(job.status, "passed", await explainJob(e.jobs, id));
    const injections = injectionsOf(await e.jobs.evidence(id));
    assert.equal(injections["build.jobs"].status, "not applied");
    assert.match(injections["build.jobs"].detail, /\.cargo\/config\.toml sets build\.jobs; it is never replaced/);
    assert.equal(injections["profile.dev.debug"].status, "applied");
  });
});
