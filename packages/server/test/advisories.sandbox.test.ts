import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { crate, type Doc, type Embedded, explainJob, injectApi, startEmbedded } from "../src/testing/e2e-jobs.js";
import { personWithToken } from "../src/testing/harness.js";

/** The repository root (tests run from packages/server/dist/test). */
const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));

/**
 * A proc macro that takes its time: rustc spends it expanding the crate that uses it, the way a
 * crate with a slow macro expansion compiles slowly, without burning the CPU a heavy generic
 * library would (the advisory rests on cargo's measured times, not on what rustc did in them).
 * It pauses at least 8 s (critical-path-crate's floor is 3 s) and at least three times as long
 * as has passed since kiln wrote the crate's source (the provision phase, before the build
 * phase began), so that the crate's share of the build phase stays above one half however long
 * the sandbox's start, cargo and the other crates took before it on a loaded machine.
 */
const SLOW_MACRO = `use proc_macro::TokenStream;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn since_the_source_was_written() -> Duration {
    let manifest = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("Cargo.toml");
    let Ok(written) = std::fs::metadata(manifest) else { return Duration::ZERO };
    let written = Duration::new(written.ctime().max(0) as u64, written.ctime_nsec().clamp(0, 999_999_999) as u32);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    now.saturating_sub(written).min(Duration::from_secs(60))
}

#[proc_macro]
pub fn slowly(input: TokenStream) -> TokenStream {
    std::thread::sleep(Duration::from_secs(8).max(since_the_source_was_written() * 3));
    input
}
`;

/** A workspace of one heavy crate (slow to expand) and one light one, independent of each other. */
const workspace = () =>
  crate("unused", {
    "Cargo.toml": `[workspace]\nmembers = ["heavy", "light", "slowmacro"]\nresolver = "2"\n`,
    "heavy/Cargo.toml": `[package]\nname = "heavy"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nslowmacro = { path = "../slowmacro" }\n`,
    "heavy/src/lib.rs": "slowmacro::slowly! {\n    pub fn heavy() -> u32 {\n        2\n    }\n}\n",
    "light/Cargo.toml": `[package]\nname = "light"\nversion = "0.1.0"\nedition = "2021"\n`,
    "light/src/lib.rs": "pub fn one() -> u32 { 1 }\n",
    "slowmacro/Cargo.toml": `[package]\nname = "slowmacro"\nversion = "0.1.0"\nedition = "2021"\n\n[lib]\nproc-macro = true\n`,
    "slowmacro/src/lib.rs": SLOW_MACRO,
  });

/**
 * Advisories end to end (SQLite, real cargo, real sandbox): three `cargo build` jobs of one
 * repository with its lineage purged before the second and the third, so every job is cold and
 * compiles the heavy crate, which dominates the build phase. repositories.get shows
 * lineage-always-cold and critical-path-crate with their measured basis; a dismissal (settings
 * scope, keyed, audited) hides one from get and list.
 */
describe("advisories from real jobs (SQLite, real cargo, real sandbox)", () => {
  let e: Embedded;
  let api: ReturnType<typeof injectApi>;
  let admin: { userId: string };
  let keys = 0;

  /** Runs one build job to a pass; its lineage's cache item. */
  async function build(): Promise<Doc> {
    const id = await e.jobs.submit(workspace(), `advisories-${++keys}`, { operation: "build" });
    const job = await e.jobs.settle(id, 300_000);
    assert.equal(job.status, "passed", await explainJob(e.jobs, id));
    const evidence = await e.jobs.evidence(id);
    const crates = Object.fromEntries((evidence.report.crates as Doc[]).map((c) => [c.name, c]));
    const phase = (evidence.report.phases as Doc[]).find((p) => p.name === "build");
    const unit = (evidence.report.units as Doc[])[0];
    // cpu-saturated rests on the cgroup's CPU seconds: the real evidence carries them.
    assert.ok(typeof unit?.cpu_seconds === "number" && unit.cpu_seconds > 0, JSON.stringify(unit));
    process.stdout.write(
      `# job ${id}: build ${phase?.duration_ms} ms, heavy ${crates.heavy?.duration_ms} ms, light ${crates.light?.duration_ms} ms, ${unit.cpu_seconds} CPU s on ${unit.vcpus} vCPUs\n`,
    );
    return (evidence.report.caches as Doc[])[0];
  }
  async function purge(lineage: string) {
    const res = await api("POST", "/api/repositories/acme/widget/purges", {
      key: `purge-${++keys}`,
      body: { lineage, confirm: lineage },
    });
    assert.equal(res.status, 200, res.body);
  }
  const repository = async (): Promise<Doc> => {
    const res = await api("GET", "/api/repositories/acme/widget");
    assert.equal(res.status, 200, res.body);
    return res.json();
  };
  const listed = async (): Promise<Doc[]> => {
    const res = await api("GET", "/api/repositories");
    assert.equal(res.status, 200, res.body);
    return res.json().advisories;
  };

  before(async () => {
    e = await startEmbedded();
    const person = await personWithToken(e.storage, { tenant: e.tenant, role: "admin", now: new Date() });
    admin = person;
    api = injectApi(e.app, person.token);
  });
  after(() => e.close());

  it("a lineage cold every time and a crate dominating the build are advised, with their measured basis", async () => {
    assert.deepEqual((await repository()).advisories, [], "no evidence, no advisory");
    const first = await build();
    assert.equal(first.reason, "first job of the class");
    await purge(first.lineage);
    assert.equal((await build()).reason, "purged");
    await purge(first.lineage);
    assert.equal((await build()).reason, "purged");

    const advisories: Doc[] = (await repository()).advisories;
    const byKey = Object.fromEntries(advisories.map((a) => [a.key, a]));
    const cold = byKey["lineage-always-cold"];
    assert.ok(cold, JSON.stringify(advisories, null, 2));
    assert.equal(
      cold.measured_value,
      `lineage ${first.lineage} (class ${first.class}) was cold in all of its last 3 jobs: purged ×2, first job of the class ×1`,
    );
    assert.match(cold.recommendation, /stop purging it/);
    const crateAdvisory = byKey["critical-path-crate"];
    assert.ok(crateAdvisory, JSON.stringify(advisories, null, 2));
    assert.match(crateAdvisory.measured_value, /^crate heavy compiled in [0-9.]+ s, \d+ % of the build phase/);
    for (const a of advisories) {
      assert.match(a.basis_signature, /^[0-9a-f]{32}$/);
      assert.equal(a.remediation_href, `docs/advisories/${a.key}.md`);
      assert.ok(existsSync(join(ROOT, a.remediation_href)), `${a.remediation_href} is a page of the project`);
    }
    assert.deepEqual(
      (await listed())
        .filter((a) => a.repository === "acme/widget")
        .map((a) => a.id)
        .sort(),
      advisories.map((a) => a.id).sort(),
    );
    const text = (await listed()).find((a) => a.id === cold.id)?.text;
    assert.ok(text?.includes(cold.measured_value) && text.includes(cold.recommendation), text);
  });

  it("a dismissal is remembered and attributed: gone from get and list, audited, replayed under its key", async () => {
    const before = (await repository()).advisories as Doc[];
    const cold = before.find((a) => a.key === "lineage-always-cold");
    assert.ok(cold, "the first test found it");
    const path = `/api/repositories/acme/widget/advisories/${cold.id}/dismissal`;

    const member = await e.jobs.api("POST", path, { key: "dismiss-member" });
    assert.equal(member.status, 403, "dismissing needs the settings scope");

    const dismissed = await api("POST", path, { key: "dismiss-1" });
    assert.equal(dismissed.status, 200, dismissed.body);
    assert.deepEqual(dismissed.json(), { advisory: cold.id, dismissed_by: admin.userId });
    const replay = await api("POST", path, { key: "dismiss-1" });
    assert.equal(replay.status, 200);
    assert.equal(replay.body, dismissed.body);
    const again = await api("POST", path, { key: "dismiss-2" });
    assert.deepEqual(again.json(), { advisory: cold.id, dismissed_by: admin.userId }, "the first dismissal is kept");

    const after = (await repository()).advisories as Doc[];
    assert.deepEqual(
      after.map((a) => a.id),
      before.filter((a) => a.id !== cold.id).map((a) => a.id),
    );
    assert.ok(
      after.some((a) => a.key === "critical-path-crate"),
      "the other advisory stays",
    );
    assert.ok(!(await listed()).some((a) => a.id === cold.id));

    const audit = (await api("GET", "/api/audit")).json().entries as Doc[];
    const entries = audit.filter((x) => x.target === `advisory:${cold.id}`);
    assert.equal(entries.length, 1, JSON.stringify(audit));
    assert.equal(entries[0].actor, admin.userId);
    assert.match(entries[0].value, /^dismissed \(acme\/widget, lineage-always-cold, basis [0-9a-f]{32}\)$/);
  });

  it("an advisory not computed for the repository, or an unknown repository, is not_found", async () => {
    const unknown = await api("POST", "/api/repositories/acme/widget/advisories/adv_nothing_0123/dismissal", {
      key: "dismiss-unknown",
    });
    assert.equal(unknown.status, 404, unknown.body);
    assert.equal(unknown.json().code, "not_found");
    const id = ((await repository()).advisories as Doc[])[0]?.id;
    assert.ok(id);
    const elsewhere = await api("POST", `/api/repositories/acme/other/advisories/${id}/dismissal`, {
      key: "dismiss-elsewhere",
    });
    assert.equal(elsewhere.json().code, "not_found");
  });
});
