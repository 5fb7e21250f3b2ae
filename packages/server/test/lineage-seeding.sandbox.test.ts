import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { type SparseRegistry, startSparseRegistry } from "@kiln/host/testing";
import { onboardRepository } from "@kiln/storage";
import { REGISTRY_CRATE_DEPENDENCIES, REGISTRY_CRATE_LIB, registryCrateManifest } from "../src/testing/crates.js";
import { crate, type Doc, type Embedded, explainJob, injectApi, Jobs, startEmbedded } from "../src/testing/e2e-jobs.js";
import { personWithToken } from "../src/testing/harness.js";

const run = promisify(execFile);

/**
 * Lineage seeding end to end (issue 38; SQLite, real cargo on Debian's crate sources through the
 * dependency gateway, real sandbox): a new repository depending on crates another repository of
 * the same tenant built starts from a copy of that lineage, with a cold run's test results; a
 * second tenant with the same dependencies starts cold; a repository with lineage_seeding off
 * starts cold.
 */
/** A Cargo.lock for `registryCrateManifest(name)` resolved against the test registry, as a developer's machine would have it. */
async function lockfileFor(name: string, registry: SparseRegistry, scratch: string): Promise<string> {
  const project = await mkdtemp(join(scratch, `lock-${name}-`));
  await mkdir(join(project, "src"));
  await writeFile(join(project, "Cargo.toml"), registryCrateManifest(name));
  await writeFile(join(project, "src", "lib.rs"), "");
  await run(
    "cargo",
    [
      "generate-lockfile",
      "--config",
      'source.crates-io.replace-with="test-registry"',
      "--config",
      `source.test-registry.registry="${registry.indexUrl}"`,
    ],
    { cwd: project, env: { ...process.env, CARGO_HOME: join(project, ".cargo-home") } },
  );
  return readFile(join(project, "Cargo.lock"), "utf8");
}

const cacheOf = (evidence: Doc): Doc => {
  const lineage = (evidence.report.caches as Doc[]).find((c) => c.class !== "dependency-gateway");
  assert.ok(lineage !== undefined, JSON.stringify(evidence.report.caches));
  return lineage;
};

const testResults = (evidence: Doc): string[] =>
  (evidence.report.tests as Doc[]).map((t) => `${t.target}:${t.name}=${t.outcome}`).sort();

let keys = 0;
/** A passing test job of `registryCrateManifest(name)` with `lockfile`, or with none (the gateway has cargo generate it: null). */
async function testJob(jobs: Jobs, name: string, lockfile: string | null): Promise<Doc> {
  const id = await jobs.submit(
    crate(name, {
      "Cargo.toml": registryCrateManifest(name),
      ...(lockfile === null ? {} : { "Cargo.lock": lockfile }),
      "src/lib.rs": REGISTRY_CRATE_LIB,
    }),
    `seeding-${++keys}`,
  );
  const job = await jobs.settle(id, 600_000);
  assert.equal(job.status, "passed", await explainJob(jobs, id));
  return jobs.evidence(id);
}

describe("lineage seeding end to end (SQLite, real cargo through the dependency gateway, real sandbox)", () => {
  let upstream: SparseRegistry;
  let e: Embedded;
  let scratch: string;
  let lock: (name: string) => Promise<string>;
  let seed: Doc;
  let seeded: Doc;

  before(async () => {
    upstream = await startSparseRegistry({ crates: REGISTRY_CRATE_DEPENDENCIES });
    scratch = await mkdtemp(join(tmpdir(), "kiln-seeding-test-"));
    lock = (name) => lockfileFor(name, upstream, scratch);
    e = await startEmbedded({ cratesIoIndex: upstream.indexUrl });
    for (const name of ["acme/seed", "acme/fresh", "acme/unseeded", "acme/lockless"]) {
      await onboardRepository(e.storage, { tenantId: e.tenant, name, onboardedBy: "test" }, new Date());
    }
  });
  after(async () => {
    await e?.close();
    await upstream?.close();
    if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
  });

  it("a new repository of the tenant starts from a copy of the lineage that built its crates", async () => {
    const seedJobs = new Jobs(e.jobs.api, "acme/seed");
    seed = cacheOf(await testJob(seedJobs, "seedling", await lock("seedling")));
    assert.equal(seed.outcome, "cold");
    assert.equal(seed.reason, "first job of the class", JSON.stringify(seed));
    assert.equal(seed.seeded_from, undefined);
    assert.ok(seed.saved_bytes > 0);

    const fresh = new Jobs(e.jobs.api, "acme/fresh");
    seeded = await testJob(fresh, "sprout", await lock("sprout"));
    const cache = cacheOf(seeded);
    assert.equal(cache.outcome, "cold", "the lineage itself had nothing: a seeded first run is not warm");
    assert.match(cache.reason, /^seeded: first job of the class; started from a copy of lineage /);
    assert.equal(cache.seeded_from?.lineage, seed.lineage, JSON.stringify(cache));
    assert.equal(cache.seeded_from.repository, "acme/seed");
    assert.equal(cache.seeded_from.class, seed.class);
    assert.ok(
      cache.seeded_from.shared_crates > 0 && cache.seeded_from.shared_crates <= cache.seeded_from.locked_crates,
    );
    assert.ok(cache.reused_units > 0, JSON.stringify(cache));
    assert.equal(cache.restored_bytes, seed.saved_bytes, "the seed's saved state was what was copied");
    // The dependencies came fresh out of the copy; the new repository's own crate was compiled.
    const crates = seeded.report.crates as Doc[];
    assert.equal(crates.find((c) => c.name === "fnv")?.outcome, "fresh", JSON.stringify(crates));
    assert.equal(crates.find((c) => c.name === "sprout")?.outcome, "compiled");
    assert.deepEqual(testResults(seeded), [
      "sprout (lib):tests::formats_with_itoa=passed",
      "sprout (lib):tests::hashes_with_fnv=passed",
    ]);
    // The seeded lineage is the repository's own from now on: its next job is plainly warm.
    const next = cacheOf(await testJob(fresh, "sprout", await lock("sprout")));
    assert.equal(next.outcome, "warm", JSON.stringify(next));
    assert.equal(next.seeded_from, undefined);
    // Both lineages count against the tenant's storage, the copy with its own bytes.
    const listed = (await e.jobs.api("GET", "/api/repositories")).json();
    assert.deepEqual((listed.lineages as Doc[]).map((l) => l.lineage).sort(), [seed.lineage, cache.lineage].sort());
  });

  it("a new repository without a Cargo.lock is seeded too, ranked by the lock the dependency gateway had cargo generate", async () => {
    assert.ok(seeded !== undefined, "the seeding test ran");
    const jobs = new Jobs(e.jobs.api, "acme/lockless");
    const evidence = await testJob(jobs, "sprout", null);
    const cache = cacheOf(evidence);
    assert.equal(cache.outcome, "cold");
    assert.match(
      cache.reason,
      /^seeded: first job of the class; started from a copy of lineage /,
      JSON.stringify(cache),
    );
    assert.ok(["acme/seed", "acme/fresh"].includes(cache.seeded_from?.repository), JSON.stringify(cache));
    assert.equal(cache.seeded_from.shared_crates, REGISTRY_CRATE_DEPENDENCIES.length, JSON.stringify(cache));
    assert.ok(cache.reused_units > 0, JSON.stringify(cache));
    assert.equal((evidence.report.crates as Doc[]).find((c) => c.name === "fnv")?.outcome, "fresh");
    assert.deepEqual(testResults(evidence), testResults(seeded), "a seeded run's results are a cold run's");
    const log = await jobs.logText(evidence.job.id);
    assert.match(log, /generate-lockfile/, "the source had no Cargo.lock: cargo generated one");
    assert.match(log, /seeded from lineage \S+ .*ranked by the Cargo\.lock cargo generated/);
  });

  it("another tenant with the same dependencies starts cold, with the same test results", async () => {
    assert.ok(seeded !== undefined, "the seeding test ran");
    const globex = await personWithToken(e.storage, { role: "admin", now: new Date() });
    await onboardRepository(
      e.storage,
      { tenantId: globex.tenant, name: "globex/fresh", onboardedBy: "test" },
      new Date(),
    );
    const jobs = new Jobs(injectApi(e.app, globex.token), "globex/fresh");
    const evidence = await testJob(jobs, "sprout", await lock("sprout"));
    const cache = cacheOf(evidence);
    assert.equal(cache.outcome, "cold");
    assert.equal(cache.reason, "first job of the class", JSON.stringify(cache));
    assert.equal(cache.seeded_from, undefined);
    assert.equal(cache.reused_units, undefined);
    assert.equal((evidence.report.crates as Doc[]).find((c) => c.name === "fnv")?.outcome, "compiled");
    assert.deepEqual(testResults(evidence), testResults(seeded), "a seeded run's results are a cold run's");

    // Nor when the source has no Cargo.lock and seeds are ranked by the one cargo generated: the
    // seed is globex's own lineage just built, never one of acme's.
    await onboardRepository(
      e.storage,
      { tenantId: globex.tenant, name: "globex/lockless", onboardedBy: "test" },
      new Date(),
    );
    const lockless = new Jobs(injectApi(e.app, globex.token), "globex/lockless");
    const own = cacheOf(await testJob(lockless, "sprout", null));
    assert.equal(own.seeded_from?.lineage, cache.lineage, JSON.stringify(own));
    assert.equal(own.seeded_from.repository, "globex/fresh");
  });

  it("a repository whose lineage_seeding setting is off starts cold, saying why", async () => {
    assert.ok(seed !== undefined, "the seeding test ran");
    const admin = await personWithToken(e.storage, { tenant: e.tenant, role: "admin", now: new Date() });
    const api = injectApi(e.app, admin.token);
    const written = await api("POST", "/api/repositories/acme/unseeded/settings", {
      key: "seeding-off",
      body: { version: 0, changes: { lineage_seeding: false } },
    });
    assert.equal(written.status, 200, written.body);
    const jobs = new Jobs(e.jobs.api, "acme/unseeded");
    const evidence = await testJob(jobs, "sprout", await lock("sprout"));
    assert.equal(evidence.report.admitted?.lineage_seeding, false);
    const cache = cacheOf(evidence);
    assert.equal(cache.outcome, "cold");
    assert.equal(cache.reason, "first job of the class; lineage seeding is off for this repository");
    assert.equal(cache.seeded_from, undefined);
    assert.equal((evidence.report.crates as Doc[]).find((c) => c.name === "fnv")?.outcome, "compiled");
  });
});
