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
 * A library that takes rustc seconds to compile in the dev profile: HEAVY_FUNCTIONS generic
 * functions, each instantiated with four types. Sized so that its compile time stays above
 * critical-path-crate's 3 s floor on an idle machine too (about 15 s on a loaded 2-core one).
 */
const HEAVY_FUNCTIONS = 1200;
function heavyLib(): string {
  const lines: string[] = [];
  for (let i = 0; i < HEAVY_FUNCTIONS; i++) {
    lines.push(
      `pub fn f${i}<T: std::fmt::Debug + Clone>(x: T) -> String { let v = vec![x.clone(), x.clone(), x]; format!("{:?}-{}", v, ${i}) }`,
    );
  }
  lines.push("pub fn all() -> usize {", "    let mut n = 0;");
  for (let i = 0; i < HEAVY_FUNCTIONS; i++) {
    lines.push(
      `    n += f${i}(1u8).len() + f${i}("s").len() + f${i}((${i}u64, "t")).len() + f${i}(Some(1.5f32)).len();`,
    );
  }
  lines.push("    n", "}");
  return `${lines.join("\n")}\n`;
}

/** A workspace of one heavy crate and one light one, independent of each other. */
const workspace = () =>
  crate("unused", {
    "Cargo.toml": `[workspace]\nmembers = ["heavy", "light"]\nresolver = "2"\n`,
    "heavy/Cargo.toml": `[package]\nname = "heavy"\nversion = "0.1.0"\nedition = "2021"\n`,
    "heavy/src/lib.rs": heavyLib(),
    "light/Cargo.toml": `[package]\nname = "light"\nversion = "0.1.0"\nedition = "2021"\n`,
    "light/src/lib.rs": "pub fn one() -> u32 { 1 }\n",
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
