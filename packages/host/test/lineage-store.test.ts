import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type LineageIdentity, type LineageLease, LineageStore, lineageKey } from "../src/agent/lineage-store.js";
import { measureTreeBytes } from "../src/agent/measure-tree-bytes.js";

const MiB = 2 ** 20;
const identity = (repository: string): LineageIdentity => ({
  tenant: "ten_test",
  repository,
  jobClass: "build/dev/stable",
});

describe("LineageStore", () => {
  let scratch: string;
  let store: LineageStore;
  let attempts = 0;

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "kiln-lineages-test-"));
    store = new LineageStore(join(scratch, "lineages"));
  });
  after(() => rm(scratch, { recursive: true, force: true }));

  /** A fresh attempt directory, as the runner makes one under its work root. */
  const attemptDir = async () => {
    const dir = join(scratch, "attempts", `job-a${++attempts}`);
    await mkdir(dir, { recursive: true });
    return { dir, id: `job-a${attempts}` };
  };
  const checkout = async (repository: string) => {
    const attempt = await attemptDir();
    return store.checkout(identity(repository), attempt.dir, attempt.id);
  };
  const checkIn = async (lease: LineageLease, record: unknown = { note: lease.attemptId }) =>
    store.checkIn(lease, { bytes: (await measureTreeBytes(lease.targetDir)) ?? 0, record, at: new Date() });

  /** Fills a target dir with `files` files of 1 MiB each (real bytes, not sparse). */
  async function fill(targetDir: string, files: number): Promise<void> {
    const block = Buffer.alloc(MiB, 7);
    await mkdir(join(targetDir, "debug", "deps"), { recursive: true });
    for (let i = 0; i < files; i++) await writeFile(join(targetDir, "debug", "deps", `unit-${i}.rlib`), block);
  }

  it("keys lineages by tenant, repository and class", () => {
    const a = lineageKey(identity("acme/widget"));
    assert.match(a, /^lin_[0-9a-f]{32}$/);
    assert.equal(a, lineageKey(identity("acme/widget")));
    assert.notEqual(a, lineageKey(identity("acme/gadget")));
    assert.notEqual(a, lineageKey({ ...identity("acme/widget"), jobClass: "build/release/stable" }));
    assert.notEqual(a, lineageKey({ ...identity("acme/widget"), tenant: "ten_other" }));
  });

  it("starts cold, then hands over what was checked in, record and measured size included", async () => {
    const first = await checkout("acme/first");
    assert.equal(first.outcome, "cold");
    assert.equal(first.reason, "first job of the class");
    assert.equal(first.baseGeneration, 0);
    assert.ok((await stat(first.targetDir)).isDirectory(), "a fresh, empty target dir");
    await writeFile(join(first.targetDir, "marker"), "built by the first attempt");
    const saved = await checkIn(first, { manifest: "first" });
    assert.deepEqual(saved, { saved: true, generation: 1, root: 1 });
    assert.equal(existsSync(first.slotDir), false, "the slot moved out of the attempt directory");

    const second = await checkout("acme/first");
    assert.equal(second.outcome, "warm");
    assert.equal(second.reason, null);
    assert.equal(second.baseGeneration, 1);
    assert.deepEqual(second.record, { manifest: "first" });
    assert.equal(second.restoredBytes, await measureTreeBytes(second.targetDir));
    assert.equal(await readFile(join(second.targetDir, "marker"), "utf8"), "built by the first attempt");
    assert.deepEqual(await checkIn(second), { saved: true, generation: 2, root: 1 });
  });

  it("hands a lineage over by rename, never by copy: every directory and file keeps its inode through check-in and checkout", async () => {
    /** Inode of every entry under `dir` by relative path: a copy, even a hard-linked one, makes new directory inodes. */
    const inodes = async (dir: string): Promise<Map<string, number>> => {
      const found = new Map<string, number>([[".", (await stat(dir)).ino]]);
      for (const entry of await readdir(dir, { recursive: true })) found.set(entry, (await stat(join(dir, entry))).ino);
      return found;
    };
    const seed = await checkout("acme/moved");
    await fill(seed.targetDir, 8);
    await writeFile(join(seed.targetDir, "debug", ".fingerprint"), "fresh");
    const built = await inodes(seed.targetDir);
    assert.ok(built.size >= 12, `a tree of ${built.size} entries`);
    await checkIn(seed);

    const lease = await checkout("acme/moved");
    assert.equal(lease.outcome, "warm");
    assert.deepEqual(await inodes(lease.targetDir), built, "checkout moved the checked-in tree");
    assert.ok(lease.restoredBytes >= 8 * MiB, `restored_bytes ${lease.restoredBytes}`);
    const saved = await store.checkIn(lease, { bytes: lease.restoredBytes, record: null, at: new Date() });
    assert.equal(saved.saved, true);
    const again = await checkout("acme/moved");
    assert.deepEqual(await inodes(again.targetDir), built, "check-in and checkout moved it again");
    await checkIn(again);
  });

  it("a second attempt while the lineage is checked out starts cold; the first to finish is saved, the other superseded", async () => {
    const seed = await checkout("acme/busy");
    await writeFile(join(seed.targetDir, "generation"), "1");
    await checkIn(seed);

    // The warm attempt finishes first.
    const a = await checkout("acme/busy");
    const b = await checkout("acme/busy");
    assert.equal(a.outcome, "warm");
    assert.equal(b.outcome, "cold");
    assert.equal(b.reason, "lineage in use");
    assert.equal(b.baseGeneration, 1, "the cold attempt descends from the generation current when it started");
    await writeFile(join(a.targetDir, "generation"), "2 by a");
    assert.deepEqual(await checkIn(a), { saved: true, generation: 2, root: 1 });
    const late = await checkIn(b);
    assert.equal(late.saved, false);
    assert.match(late.saved ? "" : late.detail, /^superseded: the lineage moved to generation 2 .*started from 1/);
    const c = await checkout("acme/busy");
    assert.equal(await readFile(join(c.targetDir, "generation"), "utf8"), "2 by a");

    // The cold attempt finishes first: its save wins, the warm one's is dropped.
    const d = await checkout("acme/busy");
    assert.equal(d.outcome, "cold");
    assert.equal(d.reason, "lineage in use");
    await writeFile(join(d.targetDir, "generation"), "3 by d");
    assert.deepEqual(await checkIn(d), { saved: true, generation: 3, root: 3 });
    // While c still holds its slot, d's save is the lineage's slot: a new attempt gets it warm.
    const e = await checkout("acme/busy");
    assert.equal(e.outcome, "warm");
    assert.equal(await readFile(join(e.targetDir, "generation"), "utf8"), "3 by d");
    assert.equal((await checkIn(c)).saved, false, "c started from generation 2, the lineage is at 3");
    assert.deepEqual(await checkIn(e), { saved: true, generation: 4, root: 3 });
  });

  it("a discarded slot leaves the lineage cold with the reason, and the next check-in continues its generations", async () => {
    const seed = await checkout("acme/cancelled");
    await checkIn(seed);
    const lease = await checkout("acme/cancelled");
    assert.equal(lease.outcome, "warm");
    await store.discard(lease, "was cancelled while cargo ran", new Date());
    const next = await checkout("acme/cancelled");
    assert.equal(next.outcome, "cold");
    assert.equal(next.reason, "the lineage's last attempt was cancelled while cargo ran; its target dir was discarded");
    assert.deepEqual(await checkIn(next), { saved: true, generation: 2, root: 2 });
    assert.equal((await checkout("acme/cancelled")).outcome, "warm");
  });

  it("a slot given back (the attempt ended before cargo ran) is the lineage's again, as it was; a cold slot or a superseded one is not", async () => {
    const first = await checkout("acme/given-back");
    await writeFile(join(first.targetDir, "marker"), "generation 1");
    await checkIn(first, { manifest: "one" });
    const failing = await checkout("acme/given-back");
    assert.equal(failing.outcome, "warm");
    assert.equal(await store.giveBack(failing), true);
    assert.equal(existsSync(failing.slotDir), false, "the slot left the attempt directory");
    const next = await checkout("acme/given-back");
    assert.deepEqual([next.outcome, next.baseGeneration, next.record], ["warm", 1, { manifest: "one" }]);
    assert.equal(await readFile(join(next.targetDir, "marker"), "utf8"), "generation 1");

    // While `next` holds the slot, another attempt starts cold: nothing of it to give back, and the
    // lineage is not marked discarded for it.
    const cold = await checkout("acme/given-back");
    assert.equal(cold.outcome, "cold");
    assert.equal(await store.giveBack(cold), false);
    // `next` saves generation 2; an attempt still holding generation 1 cannot give it back over it.
    const stale = { ...next };
    await checkIn(next, { manifest: "two" });
    assert.equal(await store.giveBack(stale), false);
    const after = await checkout("acme/given-back");
    assert.deepEqual([after.outcome, after.baseGeneration, after.record], ["warm", 2, { manifest: "two" }]);
  });

  it("a lineage checked out by an agent that stopped is lost: the next agent starts cold and saves anew", async () => {
    const seed = await checkout("acme/crashed");
    await checkIn(seed);
    await checkout("acme/crashed"); // never checked back in: this agent "crashes"
    const restarted = new LineageStore(store.root);
    const attempt = await attemptDir();
    const lease = await restarted.checkout(identity("acme/crashed"), attempt.dir, attempt.id);
    assert.equal(lease.outcome, "cold");
    assert.match(lease.reason ?? "", /lost/);
    assert.deepEqual(await restarted.checkIn(lease, { bytes: 0, record: null, at: new Date() }), {
      saved: true,
      generation: 2,
      root: 2,
    });
  });

  it("keeps its files root-only: the lineage root is mode 0700", async () => {
    assert.equal((await stat(store.root)).mode & 0o777, 0o700);
    // And the measured size counts allocated bytes of real files.
    const file = join(scratch, "sized");
    const handle = await open(file, "w");
    await handle.write(Buffer.alloc(MiB, 1));
    await handle.close();
    assert.ok(((await measureTreeBytes(file)) ?? 0) >= MiB);
  });

  it("drops a slot descending from a purged or evicted generation; keeps one whose chain started cold after it", async () => {
    const repo = "acme/dropped";
    const dropOrder = async (throughGeneration: number, reason: "purged" | "evicted" = "purged") => {
      const attempt = await attemptDir();
      return store.checkout(identity(repo), attempt.dir, attempt.id, { reason, throughGeneration });
    };
    const g1 = await checkout(repo);
    assert.deepEqual(await checkIn(g1), { saved: true, generation: 1, root: 1 });
    const warm = await checkout(repo);
    assert.equal(warm.rootGeneration, 1);
    assert.deepEqual(await checkIn(warm), { saved: true, generation: 2, root: 1 });
    // Purged through generation 1: generation 2 descends from it (root 1), so it is dropped.
    const dropped = await dropOrder(1);
    assert.equal(dropped.outcome, "cold");
    assert.equal(dropped.reason, "purged");
    assert.equal(dropped.baseGeneration, 2);
    // Until a save, the lineage stays dropped, and says why.
    const again = await dropOrder(2);
    assert.equal(again.reason, "purged");
    await store.discard(again, "test", new Date());
    assert.deepEqual(await checkIn(dropped), { saved: true, generation: 3, root: 3 });
    // The same order again (the control plane has not heard of generation 3 yet) keeps the new chain.
    const kept = await dropOrder(2, "evicted");
    assert.equal(kept.outcome, "warm");
    assert.equal(kept.baseGeneration, 3);
    await checkIn(kept);
    const evicted = await dropOrder(4, "evicted");
    assert.equal(evicted.reason, "evicted");
  });
});
