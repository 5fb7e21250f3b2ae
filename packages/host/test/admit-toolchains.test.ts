import assert from "node:assert/strict";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  admitToolchain,
  admittedToolchainNames,
  hostTriple,
  listAdmittedToolchains,
  resolveToolchain,
  ToolchainNotAdmittedError,
} from "../src/executor/shared/admit-toolchains.js";
import { removeJobDirectories } from "../src/executor/shared/remove-job-directories.js";

describe("toolchain admission", () => {
  it("admits the host's stable toolchain by channel, by full name and by its version", async () => {
    const stable = await admitToolchain("stable");
    assert.equal(stable.name, `stable-${hostTriple()}`);
    assert.ok(stable.path.endsWith(`/toolchains/stable-${hostTriple()}`));
    assert.equal((await admitToolchain(`stable-${hostTriple()}`)).path, stable.path);
    assert.ok(stable.version !== null && /^\d+\.\d+\.\d+$/.test(stable.version), `version ${stable.version}`);
    assert.equal((await admitToolchain(stable.version)).name, stable.name);
  });

  it("refuses an unknown toolchain with a typed error naming the admitted ones", async () => {
    const admitted = await listAdmittedToolchains();
    await assert.rejects(admitToolchain("1.0.0-bogus"), (error: unknown) => {
      assert.ok(error instanceof ToolchainNotAdmittedError);
      assert.equal(error.requested, "1.0.0-bogus");
      for (const t of admitted) assert.match(error.message, new RegExp(t.name));
      assert.match(error.message, /stable-/);
      return true;
    });
  });

  describe("with a fixture RUSTUP_HOME", () => {
    let rustupHome: string;
    before(async () => {
      rustupHome = await mkdtemp(join(tmpdir(), "kiln-rustup-"));
      const make = async (name: string, rustcVersion: string) => {
        const dir = join(rustupHome, "toolchains", name);
        await mkdir(join(dir, "bin"), { recursive: true });
        await mkdir(join(dir, "lib", "rustlib"), { recursive: true });
        await writeFile(join(dir, "bin", "cargo"), "");
        await writeFile(join(dir, "bin", "rustc"), "");
        await writeFile(
          join(dir, "lib", "rustlib", "multirust-channel-manifest.toml"),
          `[pkg.cargo]\nversion = "0.1"\n\n[pkg.rustc]\nversion = "${rustcVersion} (abcdef012 2026-01-01)"\n`,
        );
      };
      await make(`stable-${hostTriple()}`, "1.95.0");
      await make(`nightly-${hostTriple()}`, "1.97.0-nightly");
      await make(`1.90.0-${hostTriple()}`, "1.90.0");
      await mkdir(join(rustupHome, "toolchains", "broken-without-cargo"), { recursive: true });
    });
    after(() => removeJobDirectories([rustupHome]));

    it("lists only complete toolchains and resolves channel, version and full names", async () => {
      const admitted = await listAdmittedToolchains({ rustupHome });
      assert.deepEqual(
        admitted.map((t) => [t.name, t.version]),
        [
          [`1.90.0-${hostTriple()}`, "1.90.0"],
          [`nightly-${hostTriple()}`, "1.97.0-nightly"],
          [`stable-${hostTriple()}`, "1.95.0"],
        ],
      );
      assert.equal(resolveToolchain("nightly", admitted).name, `nightly-${hostTriple()}`);
      assert.equal(resolveToolchain("1.90.0", admitted).name, `1.90.0-${hostTriple()}`);
      assert.equal(resolveToolchain("1.95.0", admitted).name, `stable-${hostTriple()}`);
      // A release version never silently resolves to a nightly of the same number.
      assert.throws(() => resolveToolchain("1.97.0", admitted), ToolchainNotAdmittedError);
      assert.throws(() => resolveToolchain("beta", admitted), /admitted: 1\.90\.0-.*nightly-.*stable-/);
    });

    it("advertises exactly the names it resolves: full names, channels and release versions", async () => {
      const admitted = await listAdmittedToolchains({ rustupHome });
      const names = admittedToolchainNames(admitted);
      assert.deepEqual(names, [
        "1.90.0",
        `1.90.0-${hostTriple()}`,
        "1.95.0",
        "nightly",
        `nightly-${hostTriple()}`,
        "stable",
        `stable-${hostTriple()}`,
      ]);
      for (const name of names) assert.ok(resolveToolchain(name, admitted), name);
      // A nightly's version is not a name: resolving it would fail on the host too.
      assert.ok(!names.includes("1.97.0"));
    });
  });
});
