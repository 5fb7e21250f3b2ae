import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decideNetworkPolicy } from "../src/domain/jobs/decide-network-policy.js";
import { parseTomlDocument } from "../src/domain/jobs/toml-document.js";

/** A captured workspace as path → text. */
const decide = (files: Record<string, string>, workingDirectory = ".") =>
  decideNetworkPolicy({
    source: {
      paths: Object.keys(files),
      toml: async (path) => (path in files ? parseTomlDocument(Buffer.from(files[path] ?? "")) : null),
    },
    workingDirectory,
  });

const pkg = (name: string, deps = "") => `[package]\nname = "${name}"\nversion = "0.1.0"\n\n[dependencies]\n${deps}`;

describe("admission's network policy", () => {
  it("a crate with no dependencies is offline", async () => {
    assert.deepEqual(await decide({ "Cargo.toml": pkg("hello"), "src/lib.rs": "" }), {
      policy: "offline",
      reason: "no dependencies outside the workspace",
    });
  });

  it("a crates.io dependency needs the gateway, and the reason names it and where it is declared", async () => {
    const decision = await decide({ "Cargo.toml": pkg("hello", 'itoa = "1"\nserde_json = { version = "1" }\n') });
    assert.equal(decision.policy, "dependency-gateway");
    assert.match(decision.reason, /^itoa \(crates-io, in Cargo\.toml\) and 1 more comes from outside/);
  });

  it("path dependencies, also through workspace members and workspace = true, stay offline", async () => {
    const decision = await decide({
      "Cargo.toml":
        '[workspace]\nmembers = ["crates/*"]\n\n[workspace.dependencies]\ncore = { path = "crates/core" }\n',
      "crates/core/Cargo.toml": pkg("core"),
      "crates/app/Cargo.toml": pkg("app", 'core = { workspace = true }\nutil = { path = "../../util" }\n'),
      "util/Cargo.toml": pkg("util"),
    });
    assert.deepEqual(decision, {
      policy: "offline",
      reason: "every dependency is inside the workspace (2 path dependencies)",
    });
  });

  it("a member's registry dependency, reached through a workspace = true entry, needs the gateway", async () => {
    const decision = await decide(
      {
        "Cargo.toml": '[workspace]\nmembers = ["app"]\n\n[workspace.dependencies]\nserde = "1"\n',
        "app/Cargo.toml": pkg("app", "serde = { workspace = true }\n"),
      },
      "app",
    );
    assert.equal(decision.policy, "dependency-gateway");
    assert.match(decision.reason, /^serde \(crates-io, in app\/Cargo\.toml\)/);
  });

  it("registry dependencies the workspace vendors through its own source replacement are offline", async () => {
    const decision = await decide({
      "Cargo.toml": pkg("hello", 'itoa = "1"\n'),
      ".cargo/config.toml":
        '[source.crates-io]\nreplace-with = "vendored"\n\n[source.vendored]\ndirectory = "vendor"\n',
    });
    assert.equal(decision.policy, "offline");
    assert.match(decision.reason, /crates-io is replaced by the directory source vendor \(\.cargo\/config\.toml\)/);
  });

  it("a git dependency needs the gateway unless the workspace replaces that git source", async () => {
    const manifest = pkg("hello", 'tool = { git = "https://example.test/tool.git", rev = "abc" }\n');
    assert.equal((await decide({ "Cargo.toml": manifest })).policy, "dependency-gateway");
    const vendored = await decide({
      "Cargo.toml": manifest,
      ".cargo/config.toml":
        '[source."https://example.test/tool.git"]\ngit = "https://example.test/tool.git"\nreplace-with = "v"\n\n[source.v]\ndirectory = "vendor"\n',
    });
    assert.equal(vendored.policy, "offline");
  });

  it("a [patch.crates-io] path entry is inside; target-specific and dev dependencies are read too", async () => {
    assert.equal(
      (await decide({ "Cargo.toml": `${pkg("hello")}\n[patch.crates-io]\nitoa = { path = "itoa" }\n` })).policy,
      "offline",
    );
    const target = await decide({
      "Cargo.toml": `${pkg("hello")}\n[target.'cfg(unix)'.dev-dependencies]\nlibc = "0.2"\n`,
    });
    assert.equal(target.policy, "dependency-gateway");
    assert.match(target.reason, /^libc/);
  });
});
