import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { onboardRepository, systemClock } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/build-app.js";
import { startLocalHost } from "../src/local-host.js";
import type { SourceFile } from "./crates.js";
import {
  debianCrate,
  debianCrateInstalled,
  directCargoTest,
  directTestCounts,
  evidenceTestCounts,
  materialize,
  withoutEmpty,
} from "./debian-crates.js";
import { bearer, personWithToken, testBlobs } from "./harness.js";

/**
 * A real crate, as Debian ships it (librust-semver-dev), through the whole service: its
 * dependencies resolve offline from Debian's directory source (/usr/share/cargo/registry,
 * read-only inside the sandbox), and the evidence lists the same tests, per binary, as
 * `cargo test` run directly on the same files.
 */
const CRATE = { name: "semver", version: "1.0.14", debian: "librust-semver-dev" };

describe("a Debian-packaged crate end to end", () => {
  let app: FastifyInstance;
  let host: { wake: () => void; stop: () => Promise<void> };
  let token: string;
  let closeStorage: () => Promise<void>;
  const scratch: string[] = [];

  before(async () => {
    assert.ok(
      debianCrateInstalled(CRATE.name, CRATE.version),
      `${CRATE.name} ${CRATE.version} is not installed: apt-get install ${CRATE.debian} librust-serde-dev (npm test's setup does)`,
    );
    const storage = await openSqliteForTest();
    closeStorage = () => storage.close();
    const blobs = testBlobs();
    let wake = () => {};
    app = buildApp({
      storage,
      blobs,
      clock: systemClock,
      version: "test",
      publicOrigin: "http://kiln.test",
      checkResponses: true,
      wakeScheduler: () => wake(),
    });
    await app.ready();
    const workRoot = mkdtempSync(join(tmpdir(), "kiln-attempts-"));
    scratch.push(workRoot);
    const lineageRoot = mkdtempSync(join(tmpdir(), "kiln-lineages-"));
    scratch.push(lineageRoot);
    host = await startLocalHost({ storage, blobs, clock: systemClock }, { workRoot, lineageRoot });
    wake = host.wake;
    const member = await personWithToken(storage, { role: "member", now: new Date() });
    token = member.token;
    await onboardRepository(storage, { tenantId: member.tenant, name: "acme/semver", onboardedBy: "test" });
  });
  after(async () => {
    await host.stop();
    await app.close();
    await closeStorage();
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  });

  async function submit(files: SourceFile[], key: string) {
    const res = await app.inject({
      method: "POST",
      url: "/api/v4/jobs",
      headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
      payload: JSON.stringify({
        schema_version: 1,
        repository: "acme/semver",
        size: "kiln2-cpu",
        workspace: {
          base_commit: "0123456789abcdef0123456789abcdef01234567",
          branch: "main",
          invocation: { operation: "test", arguments: [] },
          source: { files },
        },
      }),
    });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as string;
  }

  async function settle(id: string, timeoutMs = 150_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = (await app.inject({ method: "GET", url: `/api/jobs/${id}`, headers: bearer(token) })).json();
      if (["passed", "failed", "cancelled"].includes(job.status)) return job;
      if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async function logText(id: string): Promise<string> {
    const res = await app.inject({ method: "GET", url: `/api/jobs/${id}/logs`, headers: bearer(token) });
    return res.body.slice(-4000);
  }

  it("cargo test of semver passes in kiln with the same tests per binary as a direct run", async () => {
    const files = debianCrate(CRATE.name, CRATE.version);
    assert.ok(files.some((f) => f.path === "Cargo.toml") && files.some((f) => f.path === ".cargo/config.toml"));
    assert.ok(!files.some((f) => f.path === ".cargo-checksum.json"));

    // Kiln and the direct run go at the same time; each has its own fresh target dir.
    const id = await submit(files, "semver-test");
    const workspace = materialize(files);
    const targetDir = mkdtempSync(join(tmpdir(), "kiln-direct-target-"));
    scratch.push(workspace, targetDir);
    const [direct, job] = await Promise.all([directCargoTest(workspace, { targetDir }), settle(id)]);

    assert.equal(direct.exitCode, 0, `direct cargo test failed:\n${direct.output.slice(-4000)}`);
    assert.equal(job.status, "passed", `${JSON.stringify(job)}\n${await logText(id)}`);

    const directCounts = directTestCounts(direct.output);
    // lib unittests, four integration test binaries and the doctests.
    assert.deepEqual(
      [...directCounts.keys()].sort(),
      ["doc", "lib", "test_autotrait", "test_identifier", "test_version", "test_version_req"],
      direct.output.slice(-4000),
    );
    const total = [...directCounts.values()].reduce((n, c) => n + c.passed + c.failed + c.ignored, 0);
    assert.ok(total >= 30, `semver has dozens of tests; the direct run counted ${total}`);

    const evidence = (
      await app.inject({ method: "GET", url: `/api/jobs/${id}/evidence`, headers: bearer(token) })
    ).json();
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
