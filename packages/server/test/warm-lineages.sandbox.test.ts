import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createSandboxExecutor } from "@kiln/host";
import { onboardRepository } from "@kiln/storage";
import { DEBIAN_SOURCE_CONFIG, debianCrate, debianCrateInstalled } from "../src/testing/debian-crates.js";
import { crate, type Doc, type Embedded, explainJob, Jobs, startEmbedded } from "../src/testing/e2e-jobs.js";

/**
 * Warm lineages end to end (SQLite, real cargo, real sandbox): the second job of a repository
 * and class gets the first one's target dir back and cargo finds every crate fresh; a one-file
 * edit rebuilds that crate only; two concurrent jobs of one lineage both pass, one of them cold.
 *
 * The source is a three-member workspace without a Cargo.lock (so cargo generates one each
 * run, which the lineage must handle) whose `gamma` depends on `alpha` and on Debian's semver
 * (a registry crate from the directory source, with a build script without rerun-if-changed).
 */
/**
 * A member's Cargo.toml. Without doctests (the members have none): `cargo test` would otherwise
 * run rustdoc on each of the three libraries in every job, warm ones included, which no
 * lineage keeps.
 */
const MEMBER = (name: string, deps = "") =>
  `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[lib]\ndoctest = false\n\n[dependencies]\n${deps}`;

function workspace(options: { betaAnswer?: number; sleepSeconds?: number } = {}) {
  const sleep =
    options.sleepSeconds === undefined
      ? ""
      : `\n#[test]\nfn takes_a_while() { std::thread::sleep(std::time::Duration::from_secs(${options.sleepSeconds})); }\n`;
  return crate("unused", {
    "Cargo.toml": `[workspace]\nmembers = ["alpha", "beta", "gamma"]\nresolver = "2"\n`,
    ".cargo/config.toml": DEBIAN_SOURCE_CONFIG,
    "alpha/Cargo.toml": MEMBER("alpha"),
    "alpha/src/lib.rs":
      "pub fn double(x: u32) -> u32 { x * 2 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() { assert_eq!(super::double(21), 42); }\n}\n",
    "beta/Cargo.toml": MEMBER("beta"),
    "beta/src/lib.rs": `pub fn answer() -> u32 { ${options.betaAnswer ?? 42} }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn answers() { assert!(super::answer() > 0); }\n}\n${sleep}`,
    "gamma/Cargo.toml": MEMBER("gamma", 'alpha = { path = "../alpha" }\nsemver = "1"\n'),
    "gamma/src/lib.rs":
      'pub fn bumped() -> String {\n    let mut v = semver::Version::parse("1.2.3").unwrap();\n    v.minor += alpha::double(1) as u64;\n    v.to_string()\n}\n',
    "gamma/tests/integration.rs": '#[test]\nfn bumps() { assert_eq!(gamma::bumped(), "1.4.3"); }\n',
  });
}

const cacheOf = (evidence: Doc): Doc => {
  const caches = evidence.report.caches as Doc[];
  assert.equal(caches.length, 1, JSON.stringify(caches));
  return caches[0];
};
const phaseMs = (evidence: Doc, name: string): number =>
  (evidence.report.phases as Doc[]).find((p) => p.name === name)?.duration_ms ?? Number.NaN;
const crateOutcomes = (evidence: Doc): Record<string, string> =>
  Object.fromEntries((evidence.report.crates as Doc[]).map((c) => [c.name, c.outcome]));

describe("warm lineages end to end (SQLite, real cargo, real sandbox)", {
  skip: !debianCrateInstalled("semver", "1.0.14"),
}, () => {
  let e: Embedded;
  let keys = 0;

  async function passes(jobs: Jobs, id: string): Promise<Doc> {
    const job = await jobs.settle(id, 300_000);
    assert.equal(job.status, "passed", await explainJob(jobs, id));
    return { ...(await jobs.evidence(id)), id };
  }
  const run = async (jobs: Jobs, files: ReturnType<typeof workspace>) =>
    passes(jobs, await jobs.submit(files, `lineage-${++keys}`));

  before(async () => {
    // Each attempt's disk quota lowered to 2 GiB (these crates write under 100 MB): the host claims
    // a job only while the disk's free space covers its quota (disk-headroom.ts), and at the sizes'
    // 16 GiB two concurrent jobs needed 32 GiB free on this machine; with less, the concurrent test
    // below ran its jobs one after the other and failed.
    e = await startEmbedded({ executor: createSandboxExecutor({ maxDiskBytes: 2 * 2 ** 30 }) });
  });
  after(() => e.close());

  it("the second job of a repository and class is warm: every crate fresh, nothing compiled again", async (t) => {
    const first = await run(e.jobs, workspace());
    const firstCache = cacheOf(first);
    assert.equal(firstCache.outcome, "cold");
    assert.equal(firstCache.reason, "first job of the class");
    assert.equal(firstCache.class, "build/dev/stable");
    assert.equal(firstCache.restored_bytes, 0);
    assert.ok(firstCache.saved_bytes > 1_000_000, `saved ${firstCache.saved_bytes} bytes`);
    assert.ok(
      Object.values(crateOutcomes(first)).every((o) => o === "compiled"),
      JSON.stringify(crateOutcomes(first)),
    );

    const second = await run(e.jobs, workspace());
    const cache = cacheOf(second);
    assert.equal(cache.outcome, "warm", JSON.stringify(cache));
    assert.equal(cache.reason, null);
    assert.equal(cache.lineage, firstCache.lineage);
    assert.equal(cache.restored_bytes, firstCache.saved_bytes, "handed over what was saved, as measured then");
    assert.ok(cache.saved_bytes > 0);
    const outcomes = crateOutcomes(second);
    assert.deepEqual(Object.keys(outcomes).sort(), ["alpha", "beta", "gamma", "semver"]);
    assert.ok(
      Object.values(outcomes).every((o) => o === "fresh"),
      `every crate fresh: ${JSON.stringify(outcomes)}\n${await e.jobs.logText(second.id)}`,
    );
    assert.equal((second.report.tests as Doc[]).filter((x) => x.outcome === "passed").length, 3);
    // Every crate fresh is what makes the warm job faster; the times depend on the machine's load.
    const [cold, warm] = [phaseMs(first, "test"), phaseMs(second, "test")];
    t.diagnostic(`test phase: cold ${cold} ms, warm ${warm} ms; restore ${phaseMs(second, "restore")} ms`);
    const log = await e.jobs.logText(second.id);
    t.diagnostic(
      log
        .split("\n")
        .filter((l) => l.includes("kiln: lineage"))
        .join("\n"),
    );
  });

  it("a single-package crate without a Cargo.lock (Debian's semver) is fresh on its second job, build script included", async () => {
    await onboardRepository(e.storage, { tenantId: e.tenant, name: "acme/semver", onboardedBy: "test" }, new Date());
    const jobs = new Jobs(e.jobs.api, "acme/semver");
    const files = debianCrate("semver", "1.0.14");
    assert.ok(!files.some((f) => f.path === "Cargo.lock"), "the source has no lockfile: cargo generates one");
    assert.equal(cacheOf(await run(jobs, files)).outcome, "cold");
    const second = await run(jobs, files);
    assert.equal(cacheOf(second).outcome, "warm");
    // Without the generated lockfile put back (same bytes, same mtime), the build script
    // (no rerun-if-changed: it watches every file of the package) would rerun and semver rebuild.
    assert.deepEqual(crateOutcomes(second), { semver: "fresh" }, await e.jobs.logText(second.id));
    assert.match(await e.jobs.logText(second.id), /Cargo\.lock put back as cargo generated it last time/);
  });

  it("a one-file edit rebuilds only that crate", async () => {
    const edited = await run(e.jobs, workspace({ betaAnswer: 7 }));
    assert.equal(cacheOf(edited).outcome, "warm");
    assert.deepEqual(crateOutcomes(edited), { alpha: "fresh", beta: "compiled", gamma: "fresh", semver: "fresh" });
  });

  it("a job cancelled while cargo runs gives its lineage up: the next job is cold and says why, the one after is warm again", async () => {
    await onboardRepository(e.storage, { tenantId: e.tenant, name: "acme/cancelled", onboardedBy: "test" }, new Date());
    const jobs = new Jobs(e.jobs.api, "acme/cancelled");
    await run(jobs, workspace());
    const id = await jobs.submit(workspace({ sleepSeconds: 120 }), `lineage-${++keys}`);
    const deadline = Date.now() + 120_000;
    while (!(await jobs.logText(id)).includes("Running unittests") && Date.now() < deadline) await sleep(200);
    assert.equal((await jobs.cancel(id, `cancel-${keys}`)).status, 200);
    const cancelled = await jobs.settle(id, 60_000);
    assert.equal(cancelled.status, "cancelled");
    const cache = cacheOf(await jobs.evidence(id));
    assert.equal(cache.outcome, "warm");
    assert.equal(cache.save, "not saved: the attempt was cancelled while cargo ran");
    assert.equal(cache.saved_bytes, null);

    const next = cacheOf(await run(jobs, workspace()));
    assert.equal(next.outcome, "cold");
    assert.equal(next.reason, "the lineage's last attempt was cancelled while cargo ran; its target dir was discarded");
    assert.equal(cacheOf(await run(jobs, workspace())).outcome, "warm");
  });

  it("two concurrent jobs of one lineage both pass; one is cold because the lineage is in use; the older save never overwrites the newer", async () => {
    await onboardRepository(
      e.storage,
      { tenantId: e.tenant, name: "acme/concurrent", onboardedBy: "test" },
      new Date(),
    );
    const jobs = new Jobs(e.jobs.api, "acme/concurrent");
    // Each job's tests take 3 s, so the two overlap.
    const files = workspace({ sleepSeconds: 3 });
    const seed = cacheOf(await run(jobs, files));
    assert.equal(seed.outcome, "cold");

    const ids = await Promise.all([jobs.submit(files, `lineage-${++keys}`), jobs.submit(files, `lineage-${++keys}`)]);
    const caches = (await Promise.all(ids.map((id) => passes(jobs, id)))).map(cacheOf);
    const warm = caches.filter((c) => c.outcome === "warm");
    const cold = caches.filter((c) => c.outcome === "cold");
    assert.equal(warm.length, 1, JSON.stringify(caches));
    assert.equal(cold.length, 1, JSON.stringify(caches));
    assert.equal(cold[0].reason, "lineage in use");
    assert.equal(cold[0].restored_bytes, 0);
    // Both started from generation 1: whichever finished first saved generation 2, the other was superseded.
    const saved = caches.filter((c) => c.save === "saved as generation 2");
    const superseded = caches.filter((c) => String(c.save).startsWith("not saved: superseded"));
    assert.equal(saved.length, 1, JSON.stringify(caches));
    assert.equal(superseded.length, 1, JSON.stringify(caches));
    assert.equal(superseded[0].saved_bytes, null);

    const next = cacheOf(await run(jobs, files));
    assert.equal(next.outcome, "warm");
    assert.equal(next.restored_generation, 2);
    assert.equal(next.restored_bytes, saved[0].saved_bytes);
  });
});
