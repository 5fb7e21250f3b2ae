import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { resolveRemembered } from "../src/agent/attempt/admit-attempt-toolchain.js";
import { admitToolchain, hostTriple, ToolchainNotAdmittedError } from "../src/executor/shared/admit-toolchains.js";

/**
 * An attempt's toolchain admission is remembered while what it was read from is unchanged:
 * the toolchains directory and the admitted toolchain's channel manifest. Each change (an
 * update in place, a toolchain installed or removed) resolves afresh; a refusal never sticks.
 */
describe("the attempt's toolchain admission, remembered", () => {
  const scratch: string[] = [];
  after(async () => {
    for (const dir of scratch) await rm(dir, { recursive: true, force: true });
  });

  it("resolves once while nothing changed, again after each change, and never remembers a refusal", async () => {
    const rustupHome = await mkdtemp(join(tmpdir(), "kiln-rustup-remembered-"));
    scratch.push(rustupHome);
    const manifestOf = (name: string) =>
      join(rustupHome, "toolchains", name, "lib", "rustlib", "multirust-channel-manifest.toml");
    const make = async (name: string, rustcVersion: string) => {
      const dir = join(rustupHome, "toolchains", name);
      await mkdir(join(dir, "bin"), { recursive: true });
      await mkdir(join(dir, "lib", "rustlib"), { recursive: true });
      await writeFile(join(dir, "bin", "cargo"), "");
      await writeFile(join(dir, "bin", "rustc"), "");
      await writeFile(manifestOf(name), `[pkg.rustc]\nversion = "${rustcVersion} (abcdef012 2026-01-01)"\n`);
    };
    const stable = `stable-${hostTriple()}`;
    await make(stable, "1.95.0");
    let resolutions = 0;
    const resolve = (name: string) => {
      resolutions += 1;
      return admitToolchain(name, { rustupHome });
    };

    assert.equal((await resolveRemembered(resolve, "stable")).version, "1.95.0");
    assert.equal((await resolveRemembered(resolve, "stable")).version, "1.95.0");
    assert.equal(resolutions, 1, "unchanged: resolved once");

    // stable updated in place: its manifest is rewritten (a later modification time).
    await writeFile(manifestOf(stable), '[pkg.rustc]\nversion = "1.96.0 (abcdef012 2026-02-01)"\n');
    const later = new Date(Date.now() + 5_000);
    await utimes(manifestOf(stable), later, later);
    assert.equal((await resolveRemembered(resolve, "stable")).version, "1.96.0");
    assert.equal(resolutions, 2);

    // Not installed: refused, each time (nothing remembered), until it is installed.
    await assert.rejects(resolveRemembered(resolve, "nightly"), ToolchainNotAdmittedError);
    await assert.rejects(resolveRemembered(resolve, "nightly"), ToolchainNotAdmittedError);
    assert.equal(resolutions, 4);
    await make(`nightly-${hostTriple()}`, "1.97.0-nightly");
    // A toolchain installed changes the toolchains directory: stable is resolved afresh too.
    const dirLater = new Date(Date.now() + 10_000);
    await utimes(join(rustupHome, "toolchains"), dirLater, dirLater);
    assert.equal((await resolveRemembered(resolve, "nightly")).version, "1.97.0-nightly");
    assert.equal((await resolveRemembered(resolve, "stable")).version, "1.96.0");
    assert.equal(resolutions, 6);
    assert.equal((await resolveRemembered(resolve, "stable")).version, "1.96.0");
    assert.equal((await resolveRemembered(resolve, "nightly")).version, "1.97.0-nightly");
    assert.equal(resolutions, 6, "both remembered now");
  });
});
