import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { onboardRepository, systemClock } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/build-app.js";
import { startLocalHost } from "../src/local-host.js";
import { type SourceFile, testedCrate } from "./crates.js";
import { bearer, personWithToken, testBlobs } from "./harness.js";

/**
 * Real cargo through the whole service: submission, scheduler, local host, sandbox,
 * logs, evidence. The embedded default (SQLite, local host) on the real clock.
 */
describe("running cargo jobs end to end", () => {
  let app: FastifyInstance;
  let host: { wake: () => void; stop: () => Promise<void> };
  let token: string;
  let closeStorage: () => Promise<void>;

  before(async () => {
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
    host = await startLocalHost(
      { storage, blobs, clock: systemClock },
      { workRoot: mkdtempSync(join(tmpdir(), "kiln-attempts-")) },
    );
    wake = host.wake;
    const member = await personWithToken(storage, { role: "member", now: new Date() });
    token = member.token;
    await onboardRepository(storage, { tenantId: member.tenant, name: "acme/widget", onboardedBy: "test" });
  });
  after(async () => {
    await host.stop();
    await app.close();
    await closeStorage();
  });

  async function submit(files: SourceFile[], key: string, invocation: Record<string, unknown> = {}) {
    const res = await app.inject({
      method: "POST",
      url: "/api/v4/jobs",
      headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
      payload: JSON.stringify({
        schema_version: 1,
        repository: "acme/widget",
        size: "kiln2-cpu",
        workspace: {
          base_commit: "0123456789abcdef0123456789abcdef01234567",
          branch: "main",
          invocation: { operation: "test", arguments: [], ...invocation },
          source: { files },
        },
      }),
    });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as string;
  }

  async function settle(id: string, timeoutMs = 240_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = (await app.inject({ method: "GET", url: `/api/jobs/${id}`, headers: bearer(token) })).json();
      if (["passed", "failed", "cancelled"].includes(job.status)) return job;
      if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  it("a crate whose tests pass passes; one with a failing test fails with cause test_failure", async () => {
    const good = await submit(testedCrate("goodcrate", 0), "good");
    const bad = await submit(testedCrate("badcrate", 2), "bad");
    const [passed, failed] = await Promise.all([settle(good), settle(bad)]);
    assert.equal(passed.status, "passed", JSON.stringify(passed));
    assert.equal(failed.status, "failed", JSON.stringify(failed));
    assert.equal(failed.failure.cause, "test_failure");
    assert.deepEqual(
      passed.transitions.map((t: { to: string }) => t.to),
      ["queued", "running", "passed"],
    );
    assert.equal(passed.units[0].isolation, "sandbox");
  });
});
