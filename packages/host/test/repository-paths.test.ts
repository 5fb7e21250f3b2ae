import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { cargoWorkspaceRoot, inRepository } from "../src/agent/repository-paths.js";
import { printedLocation } from "../src/evidence/index.js";

describe("failure locations as paths of the submitted repository", () => {
  const root = mkdtempSync(join(tmpdir(), "kiln-repository-paths-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  write("Cargo.toml", '[package]\nname = "top"\nversion = "0.1.0"\n');
  write("rust/Cargo.toml", '[workspace]\nmembers = ["crates/*"]\n');
  write("rust/crates/parser/Cargo.toml", '[package]\nname = "parser"\nversion = "0.1.0"\n');
  write("alone/Cargo.toml", '[package]\nname = "alone"\nversion = "0.1.0"\n');
  write("pointed/member/Cargo.toml", '[package]\nname = "m"\nversion = "0.1.0"\nworkspace = "../root"\n');

  it("finds the Cargo workspace root cargo would use from the job's working directory", async () => {
    assert.equal(await cargoWorkspaceRoot(root, "."), ".");
    assert.equal(await cargoWorkspaceRoot(root, "rust/crates/parser"), "rust");
    assert.equal(await cargoWorkspaceRoot(root, "rust/crates/parser/src"), "rust");
    assert.equal(await cargoWorkspaceRoot(root, "alone"), "alone");
    assert.equal(await cargoWorkspaceRoot(root, "pointed/member"), "pointed/root");
  });

  it("names a workspace member's file by its repository path, and leaves a dependency's file as printed", () => {
    const mount = "/kiln/src";
    assert.deepEqual(inRepository(printedLocation("crates/parser/src/lib.rs", 3, 18), "rust", mount), {
      file: "rust/crates/parser/src/lib.rs",
      line: 3,
      column: 18,
      in_repository: true,
      printed: "crates/parser/src/lib.rs:3:18",
    });
    assert.equal(inRepository(printedLocation("src/lib.rs", 1, 1), ".", mount).file, "src/lib.rs");
    assert.equal(
      inRepository(printedLocation("/kiln/src/vendor/x/src/lib.rs", 1, 1), "rust", mount).file,
      "vendor/x/src/lib.rs",
    );
    const registry = inRepository(
      printedLocation("/kiln/home/registry/src/index/itoa-1.0.0/src/lib.rs", 2, 1),
      ".",
      mount,
    );
    assert.deepEqual(
      [registry.file, registry.in_repository],
      ["/kiln/home/registry/src/index/itoa-1.0.0/src/lib.rs", false],
    );
    assert.equal(inRepository(printedLocation("../outside.rs", 1, 1), ".", mount).in_repository, false);
  });
});
