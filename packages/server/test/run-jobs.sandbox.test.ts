import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import type { FastifyInstance } from "fastify";
import { type SourceFile, testedCrate } from "../src/testing/crates.js";
import { type Embedded, startEmbedded } from "../src/testing/e2e-jobs.js";
import { bearer } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";

/**
 * Real cargo through the whole service: submission, scheduler, local host, sandbox,
 * logs, evidence. The embedded default (SQLite, local host) on the real clock.
 */
describe("running cargo jobs end to end", () => {
  let embedded: Embedded;
  let app: FastifyInstance;
  let token: string;

  before(async () => {
    embedded = await startEmbedded();
    app = embedded.app;
    token = embedded.token;
  });
  after(() => embedded.close());

  async function submit(files: SourceFile[], key: string, invocation: Record<string, unknown> = {}) {
    const res = await app.inject({
      method: "POST",
      url: "/api/v4/jobs",
      headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
      payload: JSON.stringify(inlineSubmission("acme/widget", "test", files, { invocation })),
    });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as string;
  }

  async function settle(id: string, timeoutMs = 240_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = (await app.inject({ method: "GET", url: `/api/jobs/${id}`, headers: bearer(token) })).json();
      if (TERMINAL_JOB_STATUSES.has(job.status)) return job;
      if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  it("a crate whose tests pass passes; one with a failing test fails with cause test_failure", async () => {
    const good = await submit(testedCrate("goodcrate", 0), "good", { arguments: ["--no-fail-fast"] });
    const bad = await submit(testedCrate("badcrate", 2), "bad", { arguments: ["--no-fail-fast"] });
    const [passed, failed] = await Promise.all([settle(good), settle(bad)]);
    assert.equal(passed.status, "passed", JSON.stringify(passed));
    assert.equal(failed.status, "failed", JSON.stringify(failed));
    assert.equal(failed.failure.cause, "test_failure");
    assert.deepEqual(
      passed.transitions.map((t: { to: string }) => t.to),
      ["queued", "running", "passed"],
    );
    assert.equal(passed.units[0].isolation, "sandbox");

    // Every test of every test binary, doctests included, with its outcome.
    const evidence = (id: string) =>
      app.inject({ method: "GET", url: `/api/jobs/${id}/evidence`, headers: bearer(token) });
    const tests = async (id: string) =>
      ((await evidence(id)).json().report.tests as { target: string; name: string; outcome: string }[])
        .map((t) => `${t.target} | ${t.name} | ${t.outcome}`)
        .sort();
    assert.deepEqual(await tests(good), [
      "goodcrate (doc) | src/lib.rs - add (line 3) | passed",
      "goodcrate (lib) | tests::adds | passed",
      "goodcrate (lib) | tests::adds_zero | passed",
      "goodcrate (lib) | tests::slow | ignored",
      "goodcrate::integration | integrates | passed",
    ]);
    assert.deepEqual(await tests(bad), [
      "badcrate (doc) | src/lib.rs - add (line 3) | passed",
      "badcrate (lib) | tests::adds | passed",
      "badcrate (lib) | tests::adds_zero | passed",
      "badcrate (lib) | tests::fails_0 | failed",
      "badcrate (lib) | tests::fails_1 | failed",
      "badcrate (lib) | tests::slow | ignored",
      "badcrate::integration | integrates | passed",
    ]);
    const report = (await evidence(bad)).json();
    assert.equal(report.report.admitted.toolchain, "stable");
    assert.equal(report.report.admitted.network_policy, "offline");
    assert.equal(report.settlement.attempts, 1);
    assert.ok(report.usage.vcpu_seconds >= 0);
    assert.ok(report.report.phases.some((p: { name: string }) => p.name === "test"));
  });

  it("the paged log equals the streamed log, and both carry every line cargo printed", async () => {
    const id = await submit(testedCrate("loggedcrate", 1), "logged");
    await settle(id);
    const paged: string[] = [];
    let cursor: string | null = "";
    while (cursor !== null) {
      const page: { records: { sequence: number; text: string }[]; next_cursor: string | null } = (
        await app.inject({
          method: "GET",
          url: `/api/jobs/${id}/logs?limit=7${cursor === "" ? "" : `&cursor=${encodeURIComponent(cursor)}`}`,
          headers: bearer(token),
        })
      ).json();
      paged.push(...page.records.map((r) => `${r.sequence} ${r.text}`));
      cursor = page.next_cursor;
    }
    const streamed = await app.inject({
      method: "GET",
      url: `/api/jobs/${id}/logs/stream?limit=5`,
      headers: bearer(token),
    });
    const lines: string[] = [];
    for (const frame of streamed.body.split("\n\n")) {
      const data = frame.split("\n").find((l) => l.startsWith("data: "));
      if (data === undefined) continue;
      const { page } = JSON.parse(data.slice(6)) as { page: { records: { sequence: number; text: string }[] } };
      lines.push(...page.records.map((r) => `${r.sequence} ${r.text}`));
    }
    assert.deepEqual(lines, paged);
    assert.ok(paged.some((l) => l.includes("test tests::fails_0 ... FAILED")));
    assert.ok(paged.some((l) => l.includes("Compiling loggedcrate")));
    assert.ok(paged.some((l) => l.includes("kiln: cargo exited with 101")));
  });

  it("an uninstalled toolchain is refused at submission, naming the installed ones the host advertised", async () => {
    // The embedded host advertised its rustup toolchains when it enrolled (issue 36: the job was
    // placed and only then failed toolchain_not_admitted).
    const res = await app.inject({
      method: "POST",
      url: "/api/v4/jobs",
      headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": "old-toolchain" },
      payload: JSON.stringify(
        inlineSubmission("acme/widget", "test", testedCrate("pinnedcrate", 0), { invocation: { toolchain: "1.10.0" } }),
      ),
    });
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(res.json().code, "invalid_request");
    assert.match(res.json().detail, /toolchain 1\.10\.0, which no kiln host has installed \(installed: [^)]*stable/);
  });

  it("publishes the artifacts the invocation asks for; their bytes download", async () => {
    const id = await submit(testedCrate("artcrate", 0), "artifacts", {
      operation: "build",
      artifacts: ["debug/libartcrate.rlib"],
    });
    const job = await settle(id);
    assert.equal(job.status, "passed", JSON.stringify(job.failure));
    const inventory = (
      await app.inject({ method: "GET", url: `/api/jobs/${id}/artifacts`, headers: bearer(token) })
    ).json();
    const files = inventory.publications[0].files as { index: number; path: string; bytes: number; sha256: string }[];
    assert.deepEqual(
      files.map((f) => f.path),
      // Beside what it asked for, every build job publishes cargo's --timings report (issue 37).
      ["debug/libartcrate.rlib", "cargo-timings/cargo-timing.html"],
    );
    const bytes = await app.inject({ method: "GET", url: `/api/jobs/${id}/artifacts/1/0`, headers: bearer(token) });
    assert.equal(bytes.statusCode, 200);
    assert.equal(bytes.rawPayload.length, files[0]?.bytes);
    assert.equal(createHash("sha256").update(bytes.rawPayload).digest("hex"), files[0]?.sha256);
    assert.ok(inventory.expires_at > new Date().toISOString());
  });
});
