import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { link, mkdir, mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { measureTreeBytes } from "../src/agent/measure-tree-bytes.js";

const du = (path: string) =>
  Number(
    /^(\d+)/.exec(
      execFileSync("du", ["-s", "--block-size=1", "--one-file-system", "--", path], { encoding: "utf8" }),
    )?.[1],
  );

describe("measureTreeBytes: du's figure, from lstat for a file or a flat directory", () => {
  let scratch: string;
  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "kiln-measure-"));
  });
  after(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it("a target dir holding a sparse image (and a hard link to it) measures what du measures", async () => {
    const target = join(scratch, "target");
    await mkdir(target);
    const image = await open(join(target, "kiln-target.ext4"), "w");
    await image.truncate(64 * 2 ** 20);
    await image.write(Buffer.alloc(300_000, 7), 0, 300_000, 5 * 2 ** 20);
    await image.close();
    await link(join(target, "kiln-target.ext4"), join(target, "linked"));
    await writeFile(join(target, "small"), "x");
    const measured = await measureTreeBytes(target);
    assert.equal(measured, du(target));
    assert.ok((measured ?? 0) < 64 * 2 ** 20, "allocated bytes, not the sparse file's length");
    assert.equal(await measureTreeBytes(join(target, "small")), du(join(target, "small")));
  });

  it("a tree with subdirectories is walked by du", async () => {
    const tree = join(scratch, "tree");
    await mkdir(join(tree, "debug", "deps"), { recursive: true });
    await writeFile(join(tree, "debug", "deps", "a"), Buffer.alloc(10_000, 1));
    await writeFile(join(tree, "b"), Buffer.alloc(5_000, 1));
    assert.equal(await measureTreeBytes(tree), du(tree));
  });

  it("is null for what does not exist", async () => {
    assert.equal(await measureTreeBytes(join(scratch, "absent")), null);
  });
});
