import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import { crate, type Doc, type Embedded, explainJob, injectApi, Jobs, startEmbedded } from "../src/testing/e2e-jobs.js";
import { personWithToken } from "../src/testing/harness.js";

/**
 * Purge and eviction end to end (SQLite, real cargo, real sandbox): the control plane's word
 * reaches the host, which drops the lineage before the next job of its class; that job runs
 * cold saying why, and the one after it is warm again.
 */
/**
 * A binary with one unit test: `cargo test` builds one test binary and, unlike for a library,
 * runs no rustdoc (which it would on every job, warm ones too). What a lineage holds is measured,
 * not assumed (savedBytes).
 */
const files = () =>
  crate("widget", {
    "src/main.rs":
      'fn answer() -> u32 { 42 }\n\nfn main() {\n    println!("{}", answer());\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn answers() { assert_eq!(super::answer(), 42); }\n}\n',
  });

const cacheOf = (evidence: Doc): Doc => {
  const caches = evidence.report.caches as Doc[];
  assert.equal(caches.length, 1, JSON.stringify(caches));
  return caches[0];
};

let keys = 0;
async function run(jobs: Jobs): Promise<Doc> {
  const id = await jobs.submit(files(), `purge-evict-${++keys}`);
  const job = await jobs.settle(id, 300_000);
  assert.equal(job.status, "passed", job.status === "passed" ? undefined : await explainJob(jobs, id));
  return cacheOf(await jobs.evidence(id));
}

/** What one lineage of the test crate holds once saved (measured by the purge test, used to size the quota). */
let savedBytes = 0;

describe("lineage purge and eviction end to end (SQLite, real cargo, real sandbox)", () => {
  const started: Embedded[] = [];
  after(async () => {
    for (const e of started) await e.close();
  });

  it("job 1 cold, job 2 warm; purged through the API, job 3 cold (purged), job 4 warm again", async () => {
    const e = await startEmbedded();
    started.push(e);
    const admin = await personWithToken(e.storage, { tenant: e.tenant, role: "admin", now: new Date() });
    const api = injectApi(e.app, admin.token);

    const first = await run(e.jobs);
    assert.equal(first.outcome, "cold");
    assert.equal(first.reason, "first job of the class");
    savedBytes = first.saved_bytes;
    assert.ok(savedBytes > 0);
    const second = await run(e.jobs);
    assert.equal(second.outcome, "warm", JSON.stringify(second));

    const repo = (await api("GET", "/api/repositories/acme/widget")).json();
    assert.deepEqual(
      repo.lineages.map((l: Doc) => [l.lineage, l.class, l.bytes]),
      [[first.lineage, first.class, second.saved_bytes]],
    );
    assert.equal(repo.total_bytes, second.saved_bytes);

    const refused = await api("POST", "/api/repositories/acme/widget/purges", {
      key: "purge-unconfirmed",
      body: { lineage: first.lineage, confirm: "" },
    });
    assert.equal(refused.json().code, "confirmation_required");
    const purged = await api("POST", "/api/repositories/acme/widget/purges", {
      key: "purge-1",
      body: { lineage: first.lineage, confirm: first.lineage },
    });
    assert.equal(purged.status, 200, purged.body);
    assert.equal(purged.json().consequence, "the next matching job starts cold");
    assert.equal((await api("GET", "/api/repositories/acme/widget")).json().total_bytes, 0);

    const third = await run(e.jobs);
    assert.equal(third.outcome, "cold", JSON.stringify(third));
    assert.equal(third.reason, "purged");
    assert.ok(third.saved_bytes > 0);
    const fourth = await run(e.jobs);
    assert.equal(fourth.outcome, "warm", JSON.stringify(fourth));
    assert.equal((await api("GET", "/api/repositories/acme/widget")).json().total_bytes, fourth.saved_bytes);
  });

  it("over a small quota the least recently used lineage is evicted; its next job is cold (evicted)", async () => {
    assert.ok(savedBytes > 0, "the purge test measured a lineage");
    // Room for one lineage of the crate, not two.
    const e = await startEmbedded({ storageQuotaBytes: Math.floor(savedBytes * 1.5) });
    started.push(e);
    await onboardRepository(e.storage, { tenantId: e.tenant, name: "acme/gadget", onboardedBy: "test" }, new Date());
    const widget = e.jobs;
    const gadget = new Jobs(e.jobs.api, "acme/gadget");
    const list = async () => (await e.jobs.api("GET", "/api/repositories")).json();

    const a = await run(widget);
    assert.equal(a.outcome, "cold");
    assert.deepEqual(
      (await list()).lineages.map((l: Doc) => l.lineage),
      [a.lineage],
    );
    const b = await run(gadget);
    assert.equal(b.outcome, "cold");
    // Two lineages are over the quota: widget's, used least recently, is evicted.
    const afterB = await list();
    assert.deepEqual(
      afterB.lineages.map((l: Doc) => l.lineage),
      [b.lineage],
    );
    assert.equal(afterB.total_bytes, b.saved_bytes);
    assert.ok(afterB.total_bytes <= afterB.storage_quota_bytes);

    const c = await run(widget);
    assert.equal(c.outcome, "cold", JSON.stringify(c));
    assert.equal(c.reason, "evicted");
    // Now gadget's is the least recently used one.
    assert.deepEqual(
      (await list()).lineages.map((l: Doc) => l.lineage),
      [a.lineage],
    );
    const d = await run(widget);
    assert.equal(d.outcome, "warm", JSON.stringify(d));
  });
});
