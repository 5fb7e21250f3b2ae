import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import {
  debianCrate,
  debianCrateInstalled,
  directTestCounts,
  evidenceTestCounts,
  materialize,
  referenceCargoTest,
  withoutEmpty,
} from "../src/testing/debian-crates.js";
import { type Embedded, injectApi, Jobs, startEmbedded } from "../src/testing/e2e-jobs.js";

/**
 * A real crate, as Debian ships it (librust-semver-dev), through the whole service: its
 * dependencies resolve offline from Debian's directory source (/usr/share/cargo/registry,
 * read-only inside the sandbox), and the evidence lists the same tests, per binary, as
 * `cargo test` run directly on the same files.
 */
const CRATE = { name: "semver", version: "1.0.14", debian: "librust-semver-dev" };

describe("a Debian-packaged crate end to end", () => {
  let embedded: Embedded;
  let jobs: Jobs;
  const scratch: string[] = [];

  before(async () => {
    assert.ok(
      debianCrateInstalled(CRATE.name, CRATE.version),
      `${CRATE.name} ${CRATE.version} is not installed: apt-get install ${CRATE.debian} librust-serde-dev (npm test's setup does)`,
    );
    embedded = await startEmbedded();
    await onboardRepository(
      embedded.storage,
      { tenantId: embedded.tenant, name: "acme/semver", onboardedBy: "test" },
      new Date(),
    );
    jobs = new Jobs(injectApi(embedded.app, embedded.token), "acme/semver");
  });
  after(async () => {
    await embedded.close();
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  });

  it("cargo test of semver passes in kiln with the same tests per binary as a direct run", async () => {
    const files = debianCrate(CRATE.name, CRATE.version);
    assert.ok(files.some((f) => f.path === "Cargo.toml") && files.some((f) => f.path === ".cargo/config.toml"));
    assert.ok(!files.some((f) => f.path === ".cargo-checksum.json"));

    // Kiln and the direct run go at the same time; each has its own fresh target dir.
    const id = await jobs.submit(files, "semver-test");
    const workspace = materialize(files);
    const targetDir = mkdtempSync(join(tmpdir(), "kiln-direct-target-"));
    scratch.push(workspace, targetDir);
    const [direct, job] = await Promise.all([referenceCargoTest(workspace, { targetDir }), jobs.settle(id, 150_000)]);

    assert.equal(direct.exitCode, 0, `direct cargo test failed:\n${direct.output.slice(-4000)}`);
    assert.equal(job.status, "passed", `${JSON.stringify(job)}\n${await jobs.logText(id)}`);

    const directCounts = directTestCounts(direct.output);
    // lib unittests, four integration test binaries and the doctests.
    assert.deepEqual(
      [...directCounts.keys()].sort(),
      ["doc", "lib", "test_autotrait", "test_identifier", "test_version", "test_version_req"],
      direct.output.slice(-4000),
    );
    const total = [...directCounts.values()].reduce((n, c) => n + c.passed + c.failed + c.ignored, 0);
    assert.ok(total >= 30, `semver has dozens of tests; the direct run counted ${total}`);

    const evidence = await jobs.evidence(id);
    const tests = evidence.report.tests as { target: string; name: string; outcome: string }[];
    const keyed = (m: Map<string, unknown>) => Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)));
    assert.deepEqual(keyed(evidenceTestCounts(tests)), keyed(withoutEmpty(directCounts)));
    assert.equal(tests.length, total);

    // The crate itself was compiled from the workspace; nothing else was needed (serde stays optional).
    const crates = evidence.report.crates as { name: string; version: string; source: string; outcome: string }[];
    const own = crates.find((c) => c.name === CRATE.name);
    assert.equal(own?.version, CRATE.version, JSON.stringify(crates));
    assert.equal(own?.source, "workspace");
    assert.equal(own?.outcome, "compiled");
  });
});
