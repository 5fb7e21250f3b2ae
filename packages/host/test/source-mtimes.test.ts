import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  captureGeneratedLockfiles,
  lockfileCandidates,
  resolutionInputsUnchanged,
  restoreGeneratedLockfiles,
} from "../src/agent/generated-lockfiles.js";
import type { SourceEntry } from "../src/agent/host-protocol.js";
import {
  applySourceMtimes,
  parseSourceManifest,
  planSourceMtimes,
  withoutRewrittenFiles,
} from "../src/agent/source-mtimes.js";

const entry = (path: string, sha256: string): SourceEntry => ({ path, sha256, bytes: 1, executable: false });

describe("deterministic source mtimes", () => {
  let scratch: string;
  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "kiln-mtimes-test-"));
  });
  after(() => rm(scratch, { recursive: true, force: true }));

  it("unchanged bytes keep the previous run's mtime; changed and new files get the attempt's time", () => {
    const first = planSourceMtimes([entry("Cargo.toml", "a"), entry("src/lib.rs", "b")], null, 1_000_000.7);
    assert.deepEqual(
      { ...first.manifest },
      {
        "Cargo.toml": { sha256: "a", mtime_ms: 1_000_000 },
        "src/lib.rs": { sha256: "b", mtime_ms: 1_000_000 },
      },
    );
    assert.equal(first.unchanged, 0);
    const second = planSourceMtimes(
      [entry("Cargo.toml", "a"), entry("src/lib.rs", "B"), entry("src/new.rs", "c")],
      first.manifest,
      2_000_000,
    );
    assert.deepEqual(
      { ...second.manifest },
      {
        "Cargo.toml": { sha256: "a", mtime_ms: 1_000_000 },
        "src/lib.rs": { sha256: "B", mtime_ms: 2_000_000 },
        "src/new.rs": { sha256: "c", mtime_ms: 2_000_000 },
      },
    );
    assert.deepEqual([second.unchanged, second.changed], [1, 2]);
  });

  it("treats names like __proto__ as plain paths", () => {
    const manifest = parseSourceManifest(JSON.parse('{"__proto__": {"sha256": "x", "mtime_ms": 5}}'));
    assert.ok(manifest !== null);
    const plan = planSourceMtimes([entry("__proto__", "x"), entry("constructor", "y")], manifest, 9);
    const at = (path: string) => Object.getOwnPropertyDescriptor(plan.manifest, path)?.value?.mtime_ms;
    assert.equal(at("__proto__"), 5);
    assert.equal(at("constructor"), 9);
    assert.equal(parseSourceManifest({ "a.rs": { sha256: "x", mtime_ms: 1.5 } }), null, "not an integer");
    assert.equal(parseSourceManifest([]), null);
  });

  it("gives an unchanged file the same on-disk timestamp, to the nanosecond, in every attempt", async () => {
    const plan = planSourceMtimes([entry("src/lib.rs", "b")], null, 1_795_336_801_551);
    const stamps: bigint[] = [];
    for (const attempt of ["one", "two"]) {
      const dir = join(scratch, attempt);
      await mkdir(join(dir, "src"), { recursive: true });
      await writeFile(join(dir, "src", "lib.rs"), "pub fn f() {}\n");
      await applySourceMtimes(dir, plan.manifest);
      stamps.push((await stat(join(dir, "src", "lib.rs"), { bigint: true })).mtimeNs);
    }
    assert.equal(stamps[0], stamps[1]);
    assert.equal(Number((stamps[0] ?? 0n) / 1_000_000n), 1_795_336_801_551);
  });

  it("drops files the job rewrote while it ran from the manifest it saves", async () => {
    const dir = join(scratch, "rewritten");
    await mkdir(dir, { recursive: true });
    for (const name of ["kept.rs", "rewritten.rs", "removed.rs"]) await writeFile(join(dir, name), name);
    const plan = planSourceMtimes(
      [entry("kept.rs", "k"), entry("rewritten.rs", "r"), entry("removed.rs", "x")],
      null,
      1_700_000_000_000,
    );
    await applySourceMtimes(dir, plan.manifest);
    await writeFile(join(dir, "rewritten.rs"), "changed by a build script");
    await rm(join(dir, "removed.rs"));
    assert.deepEqual(Object.keys(await withoutRewrittenFiles(dir, plan.manifest)), ["kept.rs"]);
  });
});

describe("generated lockfiles", () => {
  let scratch: string;
  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "kiln-lockfiles-test-"));
  });
  after(() => rm(scratch, { recursive: true, force: true }));

  it("are candidates at the working directory and above, unless the source has one there", () => {
    assert.deepEqual(lockfileCandidates([entry("Cargo.toml", "a")], "."), ["Cargo.lock"]);
    assert.deepEqual(lockfileCandidates([entry("Cargo.lock", "l")], "crates/app"), [
      "crates/app/Cargo.lock",
      "crates/Cargo.lock",
    ]);
  });

  it("are put back only when every resolution input is byte-identical", () => {
    const before = planSourceMtimes(
      [entry("Cargo.toml", "a"), entry(".cargo/config.toml", "c"), entry("src/lib.rs", "s")],
      null,
      1,
    ).manifest;
    const same = [entry("Cargo.toml", "a"), entry(".cargo/config.toml", "c"), entry("src/lib.rs", "CHANGED")];
    assert.equal(resolutionInputsUnchanged(same, before), true, "a source edit does not change resolution");
    assert.equal(resolutionInputsUnchanged([entry("Cargo.toml", "A"), same[1] as SourceEntry], before), false);
    assert.equal(resolutionInputsUnchanged([entry("Cargo.toml", "a")], before), false, "config removed");
    assert.equal(
      resolutionInputsUnchanged([...same, entry("member/Cargo.toml", "m")], before),
      false,
      "a member added",
    );
  });

  it("are captured with their exact mtime and put back identical", async () => {
    const job = join(scratch, "job");
    await mkdir(job, { recursive: true });
    await writeFile(join(job, "Cargo.lock"), "# generated by cargo\n");
    // As cargo leaves it: nanoseconds no JavaScript number (nor Date) can carry this far from the epoch.
    execFileSync("touch", ["-m", "-d", "@1795336801.550838517", join(job, "Cargo.lock")]);
    const original = (await stat(join(job, "Cargo.lock"), { bigint: true })).mtimeNs;
    assert.equal(original, 1_795_336_801_550_838_517n);
    const [captured] = await captureGeneratedLockfiles(job, ["Cargo.lock", "missing/Cargo.lock"]);
    assert.ok(captured !== undefined);
    assert.equal(captured.path, "Cargo.lock");

    const next = join(scratch, "next");
    await mkdir(next, { recursive: true });
    await restoreGeneratedLockfiles(next, [captured]);
    assert.equal(await readFile(join(next, "Cargo.lock"), "utf8"), "# generated by cargo\n");
    assert.equal((await stat(join(next, "Cargo.lock"), { bigint: true })).mtimeNs, original);
  });

  it("never follow a link the job planted, at the file or above it", async () => {
    const secret = join(scratch, "host-secret");
    await writeFile(secret, "host only\n");
    const job = join(scratch, "hostile");
    await mkdir(join(job, "real"), { recursive: true });
    await symlink(secret, join(job, "Cargo.lock"));
    await mkdir(join(scratch, "elsewhere"));
    await writeFile(join(scratch, "elsewhere", "Cargo.lock"), "host only\n");
    await symlink(join(scratch, "elsewhere"), join(job, "sub"));
    assert.deepEqual(await captureGeneratedLockfiles(job, ["Cargo.lock", "sub/Cargo.lock"]), []);
  });
});
