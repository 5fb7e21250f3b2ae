import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { lockedCrateDigests } from "../src/agent/lineage-seeding.js";
import { type LineageIdentity, type LineageLease, LineageStore, lineageKey } from "../src/agent/lineage-store.js";

const identity = (tenant: string, repository: string): LineageIdentity => ({
  tenant,
  repository,
  jobClass: "build/dev/stable",
});

const lock = (crates: readonly [string, string][]) =>
  `version = 3\n\n${crates
    .map(
      ([name, version]) =>
        `[[package]]\nname = "${name}"\nversion = "${version}"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "${"ab".repeat(32)}"\n`,
    )
    .join("\n")}\n[[package]]\nname = "app"\nversion = "0.1.0"\n`;

describe("lineage seeding in the LineageStore", () => {
  let scratch: string;
  let store: LineageStore;
  let attempts = 0;

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "kiln-seeding-store-"));
    store = new LineageStore(join(scratch, "lineages"));
  });
  after(() => rm(scratch, { recursive: true, force: true }));

  const checkout = async (who: LineageIdentity): Promise<LineageLease> => {
    const dir = join(scratch, "attempts", `job-a${++attempts}`);
    await mkdir(dir, { recursive: true });
    return store.checkout(who, dir, `job-a${attempts}`);
  };
  /** A saved lineage whose target holds `marker` and whose run locked `crates`. */
  const saved = async (who: LineageIdentity, marker: string, crates: readonly [string, string][]) => {
    const lease = await checkout(who);
    await writeFile(join(lease.targetDir, "marker"), marker);
    const result = await store.checkIn(lease, {
      bytes: marker.length,
      record: null,
      at: new Date(),
      built: { job: `job-of-${marker}`, crates: lockedCrateDigests(lock(crates)) ?? [] },
    });
    assert.equal(result.saved, true);
    return { lineage: lineageKey(who), repository: who.repository, class: who.jobClass };
  };

  it("copies the candidate sharing the most locked crates, never another tenant's, and passes over a checked-out one", async () => {
    const few = await saved(identity("acme", "acme/few"), "few", [["itoa", "1.0.9"]]);
    const most = await saved(identity("acme", "acme/most"), "most", [
      ["itoa", "1.0.9"],
      ["serde", "1.0.200"],
      ["serde_json", "1.0.100"],
    ]);
    // Shares everything, but another tenant's: even offered by mistake, it is passed over.
    const foreign = await saved(identity("globex", "globex/all"), "foreign", [
      ["itoa", "1.0.9"],
      ["serde", "1.0.200"],
      ["serde_json", "1.0.100"],
      ["ryu", "1.0.15"],
    ]);
    const crates =
      lockedCrateDigests(
        lock([
          ["itoa", "1.0.9"],
          ["serde", "1.0.200"],
          ["serde_json", "1.0.100"],
          ["ryu", "1.0.15"],
        ]),
      ) ?? [];
    assert.equal(crates.length, 4, "the workspace's own package is not a locked crate");

    const lease = await checkout(identity("acme", "acme/new"));
    assert.equal(lease.outcome, "cold");
    const { lease: seeded, note } = await store.seed(lease, [few, foreign, most], crates);
    assert.equal(seeded.seed?.lineage, most.lineage, note);
    assert.equal(seeded.seed?.sharedCrates, 3);
    assert.equal(seeded.seed?.lockedCrates, 4);
    assert.equal(seeded.seed?.job, "job-of-most");
    assert.equal(seeded.outcome, "cold");
    assert.match(seeded.reason ?? "", /^seeded: first job of the class; started from a copy of lineage /);
    assert.equal(await readFile(join(seeded.targetDir, "marker"), "utf8"), "most");
    // The seed itself is untouched and still checked in: its next job is warm.
    const seedAgain = await checkout(identity("acme", "acme/most"));
    assert.equal(seedAgain.outcome, "warm");

    // While "most" is checked out, the next best ("few") is copied instead.
    const other = await checkout(identity("acme", "acme/other"));
    const second = await store.seed(other, [most, few], crates);
    assert.equal(second.lease.seed?.lineage, few.lineage, second.note);
    assert.equal(await readFile(join(second.lease.targetDir, "marker"), "utf8"), "few");
  });

  it("does not seed a lineage that is not new, nor from candidates sharing no crate", async () => {
    const unrelated = await saved(identity("acme", "acme/unrelated"), "unrelated", [["regex", "1.10.0"]]);
    const lease = await checkout(identity("acme", "acme/lonely"));
    const none = await store.seed(lease, [unrelated], lockedCrateDigests(lock([["itoa", "1.0.9"]])) ?? []);
    assert.equal(none.lease.seed, undefined);
    assert.equal(none.lease.reason, "first job of the class");
    assert.match(none.note, /shares a locked crate/);

    const warm = await checkout(identity("acme", "acme/unrelated"));
    const refused = await store.seed(warm, [unrelated], lockedCrateDigests(lock([["regex", "1.10.0"]])) ?? []);
    assert.equal(refused.lease, warm);
    assert.match(refused.note, /not new/);
  });
});
