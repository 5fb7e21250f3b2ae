import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { type SparseRegistry, sparseIndexPath, startSparseRegistry } from "../src/testing/sparse-registry.js";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function withRegistry<T>(
  options: Parameters<typeof startSparseRegistry>[0],
  body: (registry: SparseRegistry) => Promise<T>,
): Promise<T> {
  const registry = await startSparseRegistry(options);
  try {
    return await body(registry);
  } finally {
    await registry.close();
  }
}

interface CargoRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

// Asynchronous on purpose: the registry answers from this process's event loop, which
// spawnSync would block until cargo gave up.
function cargo(args: readonly string[], cwd: string, cargoHome: string): Promise<CargoRun> {
  return new Promise((resolve) => {
    execFile(
      "cargo",
      args,
      // The timeout only bounds a hang; a healthy run takes seconds.
      { cwd, env: { ...process.env, CARGO_HOME: cargoHome }, timeout: 300_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A project depending on `itoa = "1"` and a CARGO_HOME that replaces crates.io with the fixture. */
async function itoaProject(registry: SparseRegistry): Promise<{ dir: string; project: string; cargoHome: string }> {
  const dir = await mkdtemp(join(tmpdir(), "kiln-sparse-registry-test-"));
  const project = join(dir, "project");
  const cargoHome = join(dir, "cargo-home");
  await mkdir(join(project, "src"), { recursive: true });
  await mkdir(cargoHome);
  await writeFile(
    join(project, "Cargo.toml"),
    '[package]\nname = "uses-itoa"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nitoa = "1"\n',
  );
  await writeFile(join(project, "src", "lib.rs"), "");
  await writeFile(
    join(cargoHome, "config.toml"),
    `[source.crates-io]\nreplace-with = "fixture"\n\n[source.fixture]\nregistry = "${registry.indexUrl}"\n`,
  );
  return { dir, project, cargoHome };
}

describe("sparse registry fixture", () => {
  it("lays out index paths as cargo does", () => {
    assert.equal(sparseIndexPath("a"), "1/a");
    assert.equal(sparseIndexPath("cc"), "2/cc");
    assert.equal(sparseIndexPath("syn"), "3/s/syn");
    assert.equal(sparseIndexPath("itoa"), "it/oa/itoa");
    assert.equal(sparseIndexPath("Serde_JSON"), "se/rd/serde_json");
  });

  it("serves config.json, index entries and downloads whose sha256 is the index cksum", async () => {
    await withRegistry({ crates: ["itoa", "semver"] }, async (registry) => {
      assert.match(registry.indexUrl, /^sparse\+http:\/\/127\.0\.0\.1:\d+\/index\/$/);
      assert.equal(registry.indexUrl, `sparse+${registry.origin}/index/`);

      const config = await fetch(`${registry.origin}/index/config.json`);
      assert.equal(config.status, 200);
      assert.deepEqual(await config.json(), { dl: `${registry.origin}/api/v1/crates`, api: null });

      const index = await fetch(`${registry.origin}/index/it/oa/itoa`);
      assert.equal(index.status, 200);
      const lines = (await index.text()).split("\n").filter((line) => line !== "");
      assert.ok(lines.length >= 1);
      const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      const entry = entries[0];
      assert.ok(entry !== undefined);
      assert.equal(entry.name, "itoa");
      assert.equal(entry.yanked, false);
      assert.deepEqual(entry.deps, []);
      const served = registry.crates.get("itoa");
      assert.ok(served !== undefined && served.length === entries.length);
      assert.equal(served[0]?.version, entry.vers);
      assert.equal(served[0]?.checksum, entry.cksum);

      const before = registry.downloadBytes();
      const download = await fetch(`${registry.origin}/api/v1/crates/itoa/${String(entry.vers)}/download`);
      assert.equal(download.status, 200);
      const bytes = new Uint8Array(await download.arrayBuffer());
      assert.equal(sha256(bytes), entry.cksum);
      assert.equal(bytes.length, served[0]?.bytes);
      assert.equal(registry.downloadBytes() - before, bytes.length);
      assert.ok(registry.requests.includes(`/api/v1/crates/itoa/${String(entry.vers)}/download`));

      // semver's optional serde dependency is present in Debian's sources, so it is served too.
      const semver = await fetch(`${registry.origin}/index/se/mv/semver`);
      assert.equal(semver.status, 200);
      const semverEntry = JSON.parse((await semver.text()).split("\n")[0] ?? "") as {
        deps: { name: string; optional: boolean; default_features: boolean; kind: string; registry: null }[];
      };
      const serdeDep = semverEntry.deps.find((dep) => dep.name === "serde");
      assert.ok(serdeDep !== undefined, "semver's index entry lists its serde dependency");
      assert.equal(serdeDep.optional, true);
      assert.equal(serdeDep.default_features, false);
      assert.equal(serdeDep.kind, "normal");
      assert.equal(serdeDep.registry, null);
      assert.ok(registry.crates.has("serde"));
      assert.equal((await fetch(`${registry.origin}/index/se/rd/serde`)).status, 200);

      assert.equal((await fetch(`${registry.origin}/index/no/-s/no-such-crate`)).status, 404);
      assert.equal((await fetch(`${registry.origin}/api/v1/crates/itoa/0.0.0/download`)).status, 404);
    });
  });

  it("builds the same .crate bytes on every run", async () => {
    const first = await withRegistry({ crates: ["itoa"] }, async (r) => r.crates.get("itoa"));
    const second = await withRegistry({ crates: ["itoa"] }, async (r) => r.crates.get("itoa"));
    assert.ok(first !== undefined && first.length > 0);
    assert.deepEqual(second, first);
  });

  it("refuses a crate the source root lacks, naming it", async () => {
    await assert.rejects(startSparseRegistry({ crates: ["kiln-no-such-crate"] }), /kiln-no-such-crate/);
  });

  it("answers 401 without the authorization an auth-required registry demands, 200 with it", async () => {
    const authorization = "Bearer fixture-token";
    await withRegistry({ crates: ["itoa"], authorization }, async (registry) => {
      const served = registry.crates.get("itoa")?.[0];
      assert.ok(served !== undefined);
      const paths = ["/index/config.json", "/index/it/oa/itoa", `/api/v1/crates/itoa/${served.version}/download`];
      for (const path of paths) {
        const refused = await fetch(`${registry.origin}${path}`);
        assert.equal(refused.status, 401, path);
        await refused.arrayBuffer();
        const wrong = await fetch(`${registry.origin}${path}`, { headers: { authorization: "Bearer other" } });
        assert.equal(wrong.status, 401, path);
        await wrong.arrayBuffer();
        const allowed = await fetch(`${registry.origin}${path}`, { headers: { authorization } });
        assert.equal(allowed.status, 200, path);
        await allowed.arrayBuffer();
      }
      const config = await fetch(`${registry.origin}/index/config.json`, { headers: { authorization } });
      assert.deepEqual(await config.json(), {
        dl: `${registry.origin}/api/v1/crates`,
        api: null,
        "auth-required": true,
      });
      assert.equal(registry.downloadBytes(), served.bytes);
    });
  });

  it("serves real cargo: generate-lockfile and fetch record the fixture's checksum", async () => {
    await withRegistry({ crates: ["itoa"] }, async (registry) => {
      const served = registry.crates.get("itoa")?.[0];
      assert.ok(served !== undefined);
      const { dir, project, cargoHome } = await itoaProject(registry);
      try {
        const lock = await cargo(["generate-lockfile"], project, cargoHome);
        assert.equal(lock.code, 0, `cargo generate-lockfile failed:\n${lock.stderr}`);
        assert.equal(registry.downloadBytes(), 0, "resolving reads the index only");
        const fetched = await cargo(["fetch"], project, cargoHome);
        assert.equal(fetched.code, 0, `cargo fetch failed:\n${fetched.stderr}`);

        const lockfile = await readFile(join(project, "Cargo.lock"), "utf8");
        const block = lockfile.split("[[package]]").find((b) => /\nname = "itoa"\n/.test(b));
        assert.ok(block !== undefined, `Cargo.lock has no itoa package:\n${lockfile}`);
        assert.match(block, new RegExp(`\\nversion = "${served.version.replaceAll(".", "\\.")}"\\n`));
        assert.match(block, new RegExp(`\\nchecksum = "${served.checksum}"`));
        assert.equal(registry.downloadBytes(), served.bytes);
        assert.ok(registry.requests.includes("/index/it/oa/itoa"));
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  it("serves tampered bytes that real cargo refuses for their checksum", async () => {
    await withRegistry({ crates: ["itoa"] }, async (registry) => {
      const served = registry.crates.get("itoa")?.[0];
      assert.ok(served !== undefined);
      registry.tamper("itoa", served.version, new TextEncoder().encode("not a crate"));
      const download = await fetch(`${registry.origin}/api/v1/crates/itoa/${served.version}/download`);
      assert.equal(await download.text(), "not a crate");

      const { dir, project, cargoHome } = await itoaProject(registry);
      try {
        const fetched = await cargo(["fetch"], project, cargoHome);
        assert.notEqual(fetched.code, 0, "cargo fetch accepted a tampered .crate");
        assert.match(fetched.stderr, /checksum/i);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
});
