/**
 * The disk headroom a host claims with (agent/disk-headroom.ts), on a 16 MiB tmpfs mounted for
 * the test: its free space is known exactly and nothing else writes there.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { diskHeadroom } from "../src/agent/disk-headroom.js";
import { TARGET_DISK_FILE } from "../src/executor/target-disk.js";

const MiB = 2 ** 20;

describe("a host's disk headroom", () => {
  let volume: string;
  before(() => {
    volume = mkdtempSync(join(tmpdir(), "kiln-headroom-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=16m,mode=0700", "kiln-headroom", volume]);
  });
  after(() => {
    execFileSync("umount", [volume]);
    rmdirSync(volume);
  });

  it("measures the volume a work root not made yet will be on", async () => {
    assert.equal(await diskHeadroom(join(volume, "attempts", "not-yet"), []), 16 * MiB);
  });

  it("holds back what running attempts may still write: their quota less what their target disk holds", async () => {
    const workRoot = join(volume, "attempts");
    const cold = join(workRoot, "job_a-a1");
    const warm = join(workRoot, "job_b-a1");
    mkdirSync(join(cold, "target"), { recursive: true });
    mkdirSync(join(warm, "lineage", "target"), { recursive: true });
    // 1 MiB written into each target disk: taken from the free space, and from what each may still write.
    writeFileSync(join(cold, "target", TARGET_DISK_FILE), Buffer.alloc(MiB, 1));
    writeFileSync(join(warm, "lineage", "target", TARGET_DISK_FILE), Buffer.alloc(MiB, 1));
    const placed = join(workRoot, "job_c-a1"); // placed, nothing written yet: its whole quota
    const headroom = await diskHeadroom(workRoot, [
      { attemptDir: cold, quotaBytes: 4 * MiB },
      { attemptDir: warm, quotaBytes: 4 * MiB },
      { attemptDir: placed, quotaBytes: 2 * MiB },
    ]);
    // 16 MiB less the 2 written (and the directories' few pages), less 3 + 3 + 2 still to come.
    assert.ok(headroom <= 6 * MiB && headroom > 5 * MiB, `${headroom} bytes`);
    const overcommitted = await diskHeadroom(workRoot, [{ attemptDir: placed, quotaBytes: 64 * MiB }]);
    assert.equal(overcommitted, 0, "never negative");
  });
});
