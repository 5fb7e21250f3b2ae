import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, rm, stat, utimes } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { CrateCache } from "../src/gateway/crate-cache.js";
import { GatewayError } from "../src/gateway/gateway-error.js";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const crate = (text: string) => new TextEncoder().encode(text);

async function withCache<T>(maxBytes: number, body: (cache: CrateCache) => Promise<T>): Promise<T> {
  const root = await mkdtemp(join(tmpdir(), "kiln-crate-cache-test-"));
  try {
    return await body(new CrateCache(root, maxBytes));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

describe("crate cache", () => {
  it("downloads a crate once for concurrent askers, and never again once cached", async () => {
    await withCache(2 ** 20, async (cache) => {
      const bytes = crate("the crate");
      let downloads = 0;
      const fetch = async () => {
        downloads++;
        return { bytes, indexLine: '{"name":"x"}' };
      };
      const results = await Promise.all([1, 2, 3].map(() => cache.obtain("public", sha256(bytes), "x 1.0.0", fetch)));
      assert.equal(downloads, 1);
      assert.equal(results.filter((r) => r.fetched).length, 1);
      const later = await cache.obtain("public", sha256(bytes), "x 1.0.0", fetch);
      assert.equal(later.fetched, false);
      assert.equal(downloads, 1);
    });
  });

  it("refuses bytes that do not hash to the expected checksum and stores nothing", async () => {
    await withCache(2 ** 20, async (cache) => {
      const expected = sha256(crate("the real crate"));
      await assert.rejects(
        cache.obtain("public", expected, "x 1.0.0", async () => ({ bytes: crate("tampered"), indexLine: "{}" })),
        (error: unknown) => error instanceof GatewayError && error.kind === "checksum_mismatch",
      );
      assert.equal(await cache.lookup("public", expected), null);
      assert.equal(await cache.totalBytes(), 0);
    });
  });

  it("keeps a tenant's private crates from other users of the host; the links an attempt gets stay readable", async () => {
    const parent = await mkdtemp(join(tmpdir(), "kiln-crate-cache-private-"));
    try {
      // Directories anyone may traverse above the cache, as a data dir's parent often is.
      await chmod(parent, 0o755);
      const cache = new CrateCache(join(parent, "crates"), 2 ** 20);
      const bytes = crate("acme's private crate");
      const cached = await cache.obtain("tenant-acme", sha256(bytes), "secret 1.0.0", async () => ({
        bytes,
        indexLine: '{"name":"secret"}',
      }));
      const asNobody = (path: string) =>
        spawnSync("runuser", ["-u", "nobody", "--", "cat", path], { encoding: "utf8" });
      const denied = asNobody(cached.path);
      assert.notEqual(denied.status, 0, `nobody read the cached crate: ${denied.stdout}`);
      assert.match(denied.stderr, /Permission denied/);
      for (let dir = join(cached.path, ".."); dir !== parent; dir = join(dir, "..")) {
        assert.equal((await stat(dir)).mode & 0o777, 0o700, dir);
      }
      // An attempt's registry (its deps dir, which the sandbox reads through its binds) links it.
      const deps = join(parent, "deps");
      await mkdir(deps, { mode: 0o755 });
      await CrateCache.place(cached, join(deps, "secret-1.0.0.crate"));
      assert.equal(asNobody(join(deps, "secret-1.0.0.crate")).stdout, "acme's private crate");
    } finally {
      await rm(parent, { recursive: true, force: true });
    }
  });

  it("keeps scopes apart: a tenant's private crate is not another scope's hit", async () => {
    await withCache(2 ** 20, async (cache) => {
      const bytes = crate("private crate");
      await cache.obtain("tenant-a/r", sha256(bytes), "p 1.0.0", async () => ({ bytes, indexLine: "{}" }));
      assert.notEqual(await cache.lookup("tenant-a/r", sha256(bytes)), null);
      assert.equal(await cache.lookup("tenant-b/r", sha256(bytes)), null);
      assert.equal(await cache.lookup("public", sha256(bytes)), null);
    });
  });

  it("evicts the least recently used crates past its bound", async () => {
    await withCache(25, async (cache) => {
      const [a, b, c] = [crate("a".repeat(10)), crate("b".repeat(10)), crate("c".repeat(10))];
      const put = (bytes: Uint8Array) =>
        cache.obtain("public", sha256(bytes), "k", async () => ({ bytes, indexLine: "{}" }));
      const first = await put(a);
      const second = await put(b);
      // a was used before b: make the order explicit rather than depend on the clock's resolution.
      await utimes(first.path, new Date(1000), new Date(1000));
      await utimes(second.path, new Date(2000), new Date(2000));
      await put(c);
      assert.equal(await cache.lookup("public", sha256(a)), null, "the least recently used crate was evicted");
      assert.notEqual(await cache.lookup("public", sha256(b)), null);
      assert.notEqual(await cache.lookup("public", sha256(c)), null);
      assert.equal(await cache.totalBytes(), 20);
    });
  });
});
