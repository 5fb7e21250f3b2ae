import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { chooseScratchRoot, reapStaleAttempts } from "../src/index.js";

const TMPFS_MAGIC = 0x01021994;
const shmIsTmpfs = (() => {
  try {
    return statfsSync("/dev/shm").type === TMPFS_MAGIC;
  } catch {
    return false;
  }
})();

describe("the scratch root (attempt workspaces and homes)", () => {
  it("is a directory of the host's own on /dev/shm when that is tmpfs, named after the work root", (t) => {
    if (!shmIsTmpfs) return t.skip("/dev/shm is not tmpfs here");
    const a = chooseScratchRoot("/var/lib/kiln/attempts", {});
    const b = chooseScratchRoot("/srv/other/attempts", {});
    assert.match(a ?? "", /^\/dev\/shm\/kiln-scratch-[0-9a-f]{16}$/);
    assert.notEqual(a, b);
    assert.equal(chooseScratchRoot("/var/lib/kiln/attempts", {}), a);
  });

  it("is off with KILN_SCRATCH_ROOT=off and the named directory otherwise", () => {
    assert.equal(chooseScratchRoot("/w", { KILN_SCRATCH_ROOT: "off" }), undefined);
    assert.equal(chooseScratchRoot("/w", { KILN_SCRATCH_ROOT: "/mnt/fast/scratch" }), "/mnt/fast/scratch");
  });

  it("is reaped with the work root when an agent starts: a killed agent's workspaces do not pile up", async () => {
    const base = mkdtempSync(join(tmpdir(), "kiln-reap-scratch-"));
    try {
      const workRoot = join(base, "attempts");
      const scratchRoot = join(base, "scratch");
      mkdirSync(join(workRoot, "job_x-a1", "lineage"), { recursive: true });
      mkdirSync(join(scratchRoot, "job_x-a1", "src"), { recursive: true });
      writeFileSync(join(scratchRoot, "job_x-a1", "src", "lib.rs"), "fn main() {}\n");
      const removed = await reapStaleAttempts({ workRoot, scratchRoot, cgroupParentName: "kiln-test-none" });
      assert.ok(removed.includes(join(scratchRoot, "job_x-a1")));
      assert.ok(removed.includes(join(workRoot, "job_x-a1")));
      assert.equal(existsSync(join(scratchRoot, "job_x-a1")), false);
      assert.equal(existsSync(join(workRoot, "job_x-a1")), false);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
