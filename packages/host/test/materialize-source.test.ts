import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, readlink, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { materializeSource } from "../src/agent/materialize-source.js";
import { planSourceMtimes } from "../src/agent/source-mtimes.js";

const digest = (text: string) => createHash("sha256").update(text).digest("hex");

describe("materializing a source", () => {
  it("writes files with their modes and creates symlinks as links", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kiln-materialize-"));
    try {
      const blobs = new Map([
        [digest("lib"), Buffer.from("lib")],
        [digest("run"), Buffer.from("run")],
      ]);
      const source = [
        { path: "bin/run.sh", sha256: digest("run"), bytes: 3, executable: true },
        {
          path: "src/alias.rs",
          sha256: digest("lib.rs"),
          bytes: 0,
          executable: false,
          kind: "symlink" as const,
          target: "lib.rs",
        },
        { path: "src/lib.rs", sha256: digest("lib"), bytes: 3, executable: false },
      ];
      await materializeSource(dir, source, async (sha) => blobs.get(sha) ?? Buffer.alloc(0));
      assert.equal((await stat(join(dir, "bin/run.sh"))).mode & 0o777, 0o755);
      assert.equal((await stat(join(dir, "src/lib.rs"))).mode & 0o777, 0o644);
      assert.equal(await readlink(join(dir, "src/alias.rs")), "lib.rs");
      assert.equal(await readFile(join(dir, "src/alias.rs"), "utf8"), "lib");
      // mtimes are planned for regular files only (setting one on a link would follow it).
      const plan = planSourceMtimes(source, null, 1000);
      assert.deepEqual(Object.keys(plan.manifest).sort(), ["bin/run.sh", "src/lib.rs"]);
      assert.equal(plan.changed, 2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("assembles a streamed archive's files from slices of its parts, fetching each part once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kiln-materialize-"));
    try {
      const pack = Buffer.from("fn a() {}\nfn b() {}\n");
      const big = [Buffer.from("first half, "), Buffer.from("second half\n")];
      const blobs = new Map([pack, ...big].map((b) => [createHash("sha256").update(b).digest("hex"), b]));
      const [packDigest, firstDigest, secondDigest] = [...blobs.keys()];
      const fetched: string[] = [];
      const source = [
        {
          path: "big.txt",
          sha256: digest("first half, second half\n"),
          bytes: 24,
          executable: false,
          segments: [
            { part: firstDigest as string, offset: 0, length: 12 },
            { part: secondDigest as string, offset: 0, length: 12 },
          ],
        },
        {
          path: "src/a.rs",
          sha256: digest("fn a() {}\n"),
          bytes: 10,
          executable: false,
          segments: [{ part: packDigest as string, offset: 0, length: 10 }],
        },
        {
          path: "src/b.rs",
          sha256: digest("fn b() {}\n"),
          bytes: 10,
          executable: true,
          segments: [{ part: packDigest as string, offset: 10, length: 10 }],
        },
      ];
      await materializeSource(dir, source, async (sha) => {
        fetched.push(sha);
        return blobs.get(sha) ?? Buffer.alloc(0);
      });
      assert.equal(await readFile(join(dir, "big.txt"), "utf8"), "first half, second half\n");
      assert.equal(await readFile(join(dir, "src/a.rs"), "utf8"), "fn a() {}\n");
      assert.equal(await readFile(join(dir, "src/b.rs"), "utf8"), "fn b() {}\n");
      assert.equal((await stat(join(dir, "src/b.rs"))).mode & 0o777, 0o755);
      assert.equal(fetched.filter((d) => d === packDigest).length, 1, "the pack both files share is fetched once");
      assert.ok(!fetched.some((d) => !blobs.has(d)), "only part blobs are fetched, never a file's own digest");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
