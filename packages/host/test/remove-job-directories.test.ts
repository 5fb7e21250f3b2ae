import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { removeJobDirectories } from "../src/executor/shared/remove-job-directories.js";

describe("removeJobDirectories", () => {
  it("removes trees the job made read-only, without following its symlinks out", async () => {
    const root = await mkdtemp(join(tmpdir(), "kiln-remove-"));
    const outside = await mkdtemp(join(tmpdir(), "kiln-remove-outside-"));
    await writeFile(join(outside, "keep.txt"), "must survive");
    const job = join(root, "job");
    await mkdir(join(job, "locked", "deeper"), { recursive: true });
    await writeFile(join(job, "locked", "deeper", "file.txt"), "x", { mode: 0o400 });
    await symlink(outside, join(job, "link-out"));
    await chmod(join(job, "locked", "deeper"), 0o500);
    await chmod(join(job, "locked"), 0o000);
    await removeJobDirectories([job, join(root, "never-existed")]);
    assert.equal(existsSync(job), false);
    assert.equal(existsSync(join(outside, "keep.txt")), true);
    await removeJobDirectories([root, outside]);
    assert.equal(existsSync(root), false);
  });
});
