/**
 * A dependency-gateway job's fetch phase end to end (embedded server and host, SQLite, the real
 * sandbox, the gateway in its worker process): what a workspace names that the egress policy
 * refuses fails the job with cause `dependencies` and reaches nothing; an upstream that never
 * answers ends at the job's wall-clock ceiling; cancellation ends the fetch at once with no
 * retry; and a tenant's dependency failure leaves its warm lineage as it was (issue 33).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { gatewayEgressOf } from "@kiln/host";
import { type RecordingServer, startHostileRegistry, startRecordingServer } from "@kiln/host/testing";
import { crate, type Doc, type Embedded, explainJob, type Jobs, startEmbedded } from "../src/testing/e2e-jobs.js";

const CHECKSUM = "ef".repeat(32);
const CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index";

/** A crate depending on `victim`, locked to `source`; the workspace may name registries. */
function dependingOn(source: string, files: Record<string, string> = {}) {
  return crate("fetcher", {
    "Cargo.toml": `[package]\nname = "fetcher"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nvictim = "1"\n`,
    "Cargo.lock": `version = 3\n\n[[package]]\nname = "fetcher"\nversion = "0.1.0"\ndependencies = ["victim"]\n\n[[package]]\nname = "victim"\nversion = "1.0.0"\nsource = "${source}"\nchecksum = "${CHECKSUM}"\n`,
    "src/lib.rs": "",
    ...files,
  });
}

describe("the dependency gateway's fetch phase in a job", () => {
  let e: Embedded;
  let silent: RecordingServer & { indexUrl: string };
  let recorder: RecordingServer;
  /** Jobs through an app whose platform wall-clock ceiling is 5 s. */
  let ceilingJobs: Jobs;

  before(async () => {
    // crates.io's stand-in (the operator's upstream): its index answers, its downloads never do.
    silent = await startHostileRegistry({
      crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
      download: { kind: "never" },
    });
    recorder = await startRecordingServer((_req, res) => res.writeHead(200).end("UPSTREAM-BYTES"));
    e = await startEmbedded({ cratesIoIndex: silent.indexUrl, gateway: gatewayEgressOf({}) });
    ceilingJobs = await e.extraApp({ wallClockSeconds: 5 });
  });
  after(async () => {
    await e.close();
    await silent.close();
    await recorder.close();
  });

  const downloads = () => silent.requests.filter((r) => r.url.startsWith("/dl")).length;

  it("a tenant's registry on loopback and an `fd::` git dependency fail with cause dependencies, naming the URL and the rule; nothing reaches the upstream", async () => {
    const index = `sparse+${recorder.origin}/index/`;
    const loopback = await e.jobs.submit(
      dependingOn(index, { ".cargo/config.toml": `[registries.evil]\nindex = "${index}"\n` }),
      "gateway-loopback-registry",
    );
    // Refused before anything runs: it never waits for a ceiling (the probe's ran 8 min past one).
    const fd = await e.jobs.submit(
      crate("fdgit", {
        "Cargo.toml": `[package]\nname = "fdgit"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nd = { git = "fd::17" }\n`,
        "src/lib.rs": "",
      }),
      "gateway-fd-git",
    );
    for (const [id, rule] of [
      [
        loopback,
        /egress_refused: .*http:\/\/127\.0\.0\.1:\d+\/index\/.* is refused: registries are reached over https only/,
      ],
      [
        fd,
        /egress_refused: the git dependency fd::17 is refused: git dependencies are fetched over https only \(fd is never used/,
      ],
    ] as const) {
      const job = await e.jobs.settle(id);
      assert.equal(job.status, "failed", await explainJob(e.jobs, id));
      assert.equal(job.failure?.cause, "dependencies", await explainJob(e.jobs, id));
      assert.equal(job.failure?.phase, "fetch");
      assert.match(job.failure?.detail ?? "", rule);
      assert.doesNotMatch(JSON.stringify(job), /UPSTREAM-BYTES/);
    }
    assert.equal(recorder.connections(), 0);
  });

  it("an upstream that never answers ends at the job's wall-clock ceiling (cause wall_clock_ceiling, phase fetch), retrying nothing", async () => {
    const before = downloads();
    const id = await ceilingJobs.submit(dependingOn(CRATES_IO), "gateway-ceiling");
    const job = await ceilingJobs.settle(id);
    assert.equal(job.status, "failed", await explainJob(ceilingJobs, id));
    assert.deepEqual(
      { cause: job.failure?.cause, phase: job.failure?.phase },
      { cause: "wall_clock_ceiling", phase: "fetch" },
      JSON.stringify(job.failure),
    );
    assert.match(job.failure?.detail ?? "", /ran past its 5 s wall-clock ceiling while its dependencies were fetched/);
    const attempts = (await ceilingJobs.evidence(id)).attempts.attempts as Doc[];
    assert.equal(attempts.length, 1, "the ceiling is the job's answer, not a reason to retry");
    // Asked once at most (under load the ceiling may come first); its retry would come only after 30 s idle.
    assert.ok(downloads() - before <= 1, `the download was asked ${downloads() - before} times`);
  });

  it("cancel ends a fetch at once: the job is cancelled in its fetch phase and the upstream is asked nothing more", async () => {
    const before = downloads();
    const id = await e.jobs.submit(dependingOn(CRATES_IO), "gateway-cancel");
    const deadline = Date.now() + 120_000;
    while (downloads() === before) {
      assert.ok(Date.now() < deadline, await explainJob(e.jobs, id));
      await new Promise((r) => setTimeout(r, 50));
    }
    const receipt = await e.jobs.cancel(id, "gateway-cancel-request");
    assert.equal(receipt.status, 200, receipt.body);
    const job = await e.jobs.settle(id);
    assert.equal(job.status, "cancelled", await explainJob(e.jobs, id));
    assert.equal(job.failure?.cause, "cancelled", JSON.stringify(job.failure));
    assert.equal(job.failure?.phase, "fetch");
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(downloads() - before, 1, "nothing was retried after the cancellation");
  });

  it("a tenant's dependency failure leaves its warm lineage as it was: the next job restores the same generation, warm", async () => {
    const plain = crate("lineaged", { "src/lib.rs": "pub fn one() -> u32 { 1 }\n" });
    const first = await e.jobs.submit(plain, "gateway-lineage-1", { operation: "build" });
    const saved = await e.jobs.settle(first);
    assert.equal(saved.status, "passed", await explainJob(e.jobs, first));
    const savedItem = ((await e.jobs.evidence(first)).report.caches as Doc[]).find((c) =>
      c.lineage?.startsWith("lin_"),
    );
    assert.ok(savedItem?.saved_generation !== null && savedItem !== undefined, JSON.stringify(savedItem));

    // Same repository and class (build), but its dependency comes from a refused registry.
    const index = `sparse+https://127.0.0.1:${recorder.port}/index/`;
    const failing = await e.jobs.submit(
      dependingOn(index, { ".cargo/config.toml": `[registries.evil]\nindex = "${index}"\n` }),
      "gateway-lineage-2",
      { operation: "build" },
    );
    const failed = await e.jobs.settle(failing);
    assert.equal(failed.failure?.cause, "dependencies", await explainJob(e.jobs, failing));
    assert.match(
      await e.jobs.logText(failing),
      /lineage lin_[0-9a-f]+: kept as it was \(generation \d+\): the attempt ended before cargo ran/,
    );

    const third = await e.jobs.submit(plain, "gateway-lineage-3", { operation: "build" });
    const warm = await e.jobs.settle(third);
    assert.equal(warm.status, "passed", await explainJob(e.jobs, third));
    const restored = ((await e.jobs.evidence(third)).report.caches as Doc[]).find(
      (c) => c.lineage === savedItem.lineage,
    );
    assert.equal(restored?.outcome, "warm", JSON.stringify(restored));
    assert.equal(restored?.restored_generation, savedItem.saved_generation);
  });
});
