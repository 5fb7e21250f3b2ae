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
});
