import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { changedPaths, decideAffected, packageSelectingArgument } from "../src/agent/affected-packages.js";

const pkg = (name: string, deps = "", extra = "") =>
  `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n${deps}\n${extra}`;

/**
 * A virtual workspace: app → core (a dev-dependency by path), util independent, and inside
 * core's directory the package core-macros that core depends on (a member without being listed).
 */
const WORKSPACE = new Map([
  ["Cargo.toml", '[workspace]\nmembers = ["crates/*", "util"]\nresolver = "2"\n'],
  ["crates/core/Cargo.toml", pkg("core", 'core-macros = { path = "macros" }\n')],
  ["crates/core/macros/Cargo.toml", pkg("core-macros")],
  ["crates/app/Cargo.toml", pkg("app", "", '[dev-dependencies]\ncore = { path = "../core" }\n')],
  ["util/Cargo.toml", pkg("util")],
]);

const decide = (changed: string[], manifests = WORKSPACE, workingDirectory = ".") =>
  decideAffected({ manifests, changed, workingDirectory });

describe("affected packages (crate granularity)", () => {
  it("a file belongs to the package with the deepest directory containing it", () => {
    assert.deepEqual(decide(["crates/core/macros/src/lib.rs"]), {
      kind: "subset",
      tested: ["app", "core", "core-macros", "util"],
      affected: ["app", "core", "core-macros"],
      skipped: ["util"],
    });
    assert.deepEqual(decide(["util/src/lib.rs"]), {
      kind: "subset",
      tested: ["app", "core", "core-macros", "util"],
      affected: ["util"],
      skipped: ["app", "core", "core-macros"],
    });
  });

  it("affected reaches every package depending on a changed one, transitively (dev, target and workspace deps too)", () => {
    assert.deepEqual(decide(["crates/core/src/lib.rs"]), {
      kind: "subset",
      tested: ["app", "core", "core-macros", "util"],
      affected: ["app", "core"],
      skipped: ["core-macros", "util"],
    });
    const chain = new Map([
      ["Cargo.toml", '[workspace]\nmembers = ["a", "b", "c", "d"]\n[workspace.dependencies]\na = { path = "a" }\n'],
      ["a/Cargo.toml", pkg("a")],
      ["b/Cargo.toml", pkg("b", "a = { workspace = true }\n")],
      ["c/Cargo.toml", pkg("c", "", "[target.'cfg(unix)'.build-dependencies]\nb = { path = \"../b\" }\n")],
      ["d/Cargo.toml", pkg("d")],
    ]);
    assert.deepEqual(decide(["a/src/lib.rs"], chain), {
      kind: "subset",
      tested: ["a", "b", "c", "d"],
      affected: ["a", "b", "c"],
      skipped: ["d"],
    });
  });

  it("nothing changed: nothing affected, everything skipped", () => {
    const d = decide([]);
    assert.equal(d.kind, "subset");
    assert.deepEqual(d.kind === "subset" ? d.affected : null, []);
  });

  it("a changed file no package owns, a manifest, the lockfile or cargo configuration makes everything affected", () => {
    for (const [path, why] of [
      ["README.md", "belongs to no package"],
      ["Cargo.lock", "configures the whole build"],
      [".cargo/config.toml", "configures the whole build"],
      ["rust-toolchain.toml", "configures the whole build"],
      ["util/Cargo.toml", "a manifest can change"],
      ["Cargo.toml", "a manifest can change"],
    ] as const) {
      const d = decide(["util/src/lib.rs", path]);
      assert.equal(d.kind, "everything", path);
      assert.match(d.kind === "everything" ? d.reason : "", new RegExp(`^${path.replace(".", "\\.")} changed.*${why}`));
    }
  });

  it("an unparseable manifest, [patch] or duplicate names: the packages cannot be determined, everything runs", () => {
    const broken = new Map(WORKSPACE).set("util/Cargo.toml", "[package\nname = ");
    const d = decide(["crates/core/src/lib.rs"], broken);
    assert.equal(d.kind, "everything");
    assert.match(d.kind === "everything" ? d.reason : "", /util\/Cargo\.toml could not be parsed/);
    const patched = new Map(WORKSPACE).set(
      "Cargo.toml",
      '[workspace]\nmembers = ["crates/*", "util"]\n[patch.crates-io]\nutil = { path = "util" }\n',
    );
    assert.match(JSON.stringify(decide([], patched)), /\[patch\] table/);
    const twins = new Map(WORKSPACE).set("util/Cargo.toml", pkg("core"));
    assert.match(JSON.stringify(decide([], twins)), /two packages are named core/);
  });

  it("tests only what a plain cargo test would: the root package of a non-virtual workspace, default-members", () => {
    const rooted = new Map(WORKSPACE).set("Cargo.toml", `${pkg("top")}\n[workspace]\nmembers = ["util"]\n`);
    assert.deepEqual(decide(["util/src/lib.rs"], rooted), {
      kind: "subset",
      tested: ["top"],
      affected: [],
      skipped: ["top"],
    });
    const defaults = new Map(WORKSPACE).set(
      "Cargo.toml",
      '[workspace]\nmembers = ["crates/*", "util"]\ndefault-members = ["crates/app"]\n',
    );
    assert.deepEqual(decide(["crates/core/src/lib.rs"], defaults), {
      kind: "subset",
      tested: ["app"],
      affected: ["app"],
      skipped: [],
    });
    // A path dependency inside the workspace directory is a member without being listed.
    const implicit = new Map(WORKSPACE).set("Cargo.toml", '[workspace]\nmembers = ["crates/app"]\n');
    assert.deepEqual(decide(["util/src/lib.rs"], implicit), {
      kind: "subset",
      tested: ["app", "core", "core-macros"],
      affected: [],
      skipped: ["app", "core", "core-macros"],
    });
    assert.deepEqual(decide(["util/src/lib.rs"], WORKSPACE, "util"), {
      kind: "subset",
      tested: ["util"],
      affected: ["util"],
      skipped: [],
    });
  });

  it("changed paths: added, removed and rewritten files versus the baseline", () => {
    assert.deepEqual(
      changedPaths(
        [
          { path: "a", sha256: "1" },
          { path: "b", sha256: "2" },
          { path: "c", sha256: "3" },
        ],
        { a: "1", b: "x", d: "4" },
      ),
      ["b", "c", "d"],
    );
  });

  it("arguments that select packages themselves are recognised before `--` only", () => {
    assert.equal(packageSelectingArgument(["-p", "util"]), "-p");
    assert.equal(packageSelectingArgument(["-putil"]), "-putil");
    assert.equal(packageSelectingArgument(["--package=util"]), "--package=util");
    assert.equal(packageSelectingArgument(["--workspace"]), "--workspace");
    assert.equal(packageSelectingArgument(["--features", "x"]), "--features");
    assert.equal(packageSelectingArgument(["--release", "--", "-p"]), null);
    assert.equal(packageSelectingArgument(["--lib", "some_filter"]), null);
  });
});
