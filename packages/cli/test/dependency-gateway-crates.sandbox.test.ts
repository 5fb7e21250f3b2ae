/**
 * Issue 14's must-show: real crates from Debian's sources — one locking 30+ registry packages
 * (tera), one patching a registry dependency with a path copy (`[patch.crates-io]`, serde_yaml
 * with its yaml-rust patched) and a multi-crate workspace (pest's derive, generator and meta
 * crates) — with no `.cargo/config.toml`, vendor directory or Cargo.lock, pass under
 * `kiln cargo test` (the dependency gateway resolving and fetching from the upstream registry)
 * with the same per-binary test counts as local cargo resolving against the same registry.
 */
import assert from "node:assert/strict";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, relative } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { createClient, type KilnClient } from "@kiln/client";
import { type SparseRegistry, startSparseRegistry } from "@kiln/host/testing";
import type { Counts, ReferenceRun } from "@kiln/server/testing";
import { onboardRepository } from "@kiln/storage";
import { type CliRun, freshConfigHome, runCli, startListeningEmbedded } from "./harness.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON documents read loosely in assertions.
type Doc = any;

/** Debian's crate fixtures, from @kiln/server/testing. */
const debian = () => import("@kiln/server/testing");

const REGISTRY = "/usr/share/cargo/registry";

/** Debian's installed crate directories these tests build (scripts/ensure-setup.mjs installs them for `test`). */
const TERA = "tera-1.17.1";
const SERDE_YAML = "serde_yaml-0.8.26";
const YAML_RUST = "yaml-rust-0.4.5";
const PEST_MEMBERS = ["pest_derive-2.5.2", "pest_generator-2.5.2", "pest_meta-2.5.2"];

/**
 * Not part of a repository's source: Debian's bookkeeping (`.cargo-checksum.json`, `debian/`),
 * and what the must-show says is gone — a Cargo configuration (it would replace the registry),
 * a vendor directory and a Cargo.lock.
 */
const DROPPED = new Set([".cargo-checksum.json", "debian", ".cargo", "vendor", "Cargo.lock", "target"]);

/** Copies Debian's crate directory `name-version` to `dest`, less what DROPPED names at its root. */
function copyCrate(dirName: string, dest: string): void {
  const source = join(REGISTRY, dirName);
  assert.ok(
    existsSync(join(source, "Cargo.toml")),
    `${dirName} is not installed: node scripts/ensure-setup.mjs --for test`,
  );
  cpSync(source, dest, { recursive: true, filter: (from) => !DROPPED.has(relative(source, from)) });
}

/** Inserts `path = …` into a normalized manifest's `[dependencies.<name>]` table. */
function pathDependency(manifest: string, name: string, path: string): void {
  const text = readFileSync(manifest, "utf8");
  const header = `[dependencies.${name}]\n`;
  assert.ok(text.includes(header), `${manifest} has ${header}`);
  writeFileSync(manifest, text.replace(header, `${header}path = ${JSON.stringify(path)}\n`));
}

/** No Cargo configuration, vendor directory or Cargo.lock anywhere in the tree (target dirs aside). */
function assertBare(root: string): void {
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const rel = relative(root, join(dir, entry.name));
      assert.ok(![".cargo", "vendor", "Cargo.lock"].includes(entry.name), `${rel} was removed`);
      if (entry.isDirectory()) walk(join(dir, entry.name));
    }
  };
  walk(root);
}

/** Where local cargo's reference runs build: one target dir and one CARGO_HOME for the three projects. */
interface LocalCargo {
  readonly targetDir: string;
  readonly home: string;
}

/**
 * `cargo test` in `dir` as a developer would run it against `indexUrl` standing for crates.io:
 * a CARGO_HOME whose config replaces crates-io with that registry. The three projects share one
 * target dir and one home (so every registry crate unpacks to the same path): cargo keys each
 * unit by package id, features, profile and source path, so what tera, serde_yaml and pest share
 * (serde, syn, pest, …) is built once and each project's results are those of a dir of its own.
 * Spawned (never spawnSync): the registry fixture answers from this process's event loop. Kept
 * on this machine for the next identical run (referenceCargoTest: the digest of every input).
 */
async function localCargoTest(dir: string, upstream: SparseRegistry, local: LocalCargo): Promise<ReferenceRun> {
  return (await debian()).referenceCargoTest(dir, {
    ...local,
    upstreamIndex: upstream.indexUrl,
    indexCrates: [...upstream.crates.keys()],
  });
}

/** `name version` → checksum of each Cargo.lock package that has a source (i.e. not in the workspace). */
function lockedFromRegistry(lockText: string): Map<string, string | null> {
  const locked = new Map<string, string | null>();
  for (const block of lockText.split(/^\[\[package\]\]$/m).slice(1)) {
    const field = (key: string) => new RegExp(`^${key} = "([^"]*)"$`, "m").exec(block)?.[1];
    if (field("source") === undefined) continue;
    locked.set(`${field("name")} ${field("version")}`, field("checksum") ?? null);
  }
  return locked;
}

/**
 * Per test binary, the counts of local cargo's `test result:` lines. As debian-crates.ts'
 * directTestCounts, but a lib's unit tests and doctests are keyed with their crate
 * (`lib pest_meta`, `doc pest_meta`): a workspace has one of each per member.
 */
function localCounts(output: string): Map<string, Counts> {
  const counts = new Map<string, Counts>();
  let current: string | null = null;
  for (const line of output.split("\n")) {
    const running = /^\s+Running (unittests )?(\S+) \((.+)\)\s*$/.exec(line);
    const doc = /^\s+Doc-tests (\S+)\s*$/.exec(line);
    if (running) {
      const [, unittests, source = "", executable = ""] = running;
      const exe = basename(executable).replace(/-[0-9a-f]{16}$/, "");
      current = unittests === undefined ? exe : source === "src/lib.rs" ? `lib ${exe}` : `bin ${exe}`;
    } else if (doc) current = `doc ${doc[1]}`;
    const result = /^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;/.exec(line);
    if (result && current !== null) {
      const previous = counts.get(current) ?? { passed: 0, failed: 0, ignored: 0 };
      counts.set(current, {
        passed: previous.passed + Number(result[1]),
        failed: previous.failed + Number(result[2]),
        ignored: previous.ignored + Number(result[3]),
      });
      if (!current.startsWith("doc ")) current = null;
    }
  }
  return counts;
}

/** Per test binary, the counts of a job's evidence tests, keyed as localCounts keys them. */
function evidenceCounts(
  tests: readonly { target: string; outcome: string }[],
  binaryKey: (label: string) => string,
): Map<string, Counts> {
  const counts = new Map<string, Counts>();
  for (const test of tests) {
    const crate = /^(\S+) \((lib|doc)\)$/.exec(test.target);
    const key = crate ? `${crate[2]} ${crate[1]?.replaceAll("-", "_")}` : binaryKey(test.target);
    const entry = counts.get(key) ?? { passed: 0, failed: 0, ignored: 0 };
    if (test.outcome === "passed" || test.outcome === "failed" || test.outcome === "ignored") entry[test.outcome] += 1;
    counts.set(key, entry);
  }
  return counts;
}

const keyed = (m: Map<string, unknown>) => Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)));
const total = (m: Map<string, Counts>, outcome: keyof Counts) => [...m.values()].reduce((n, c) => n + c[outcome], 0);

const jsonLines = (run: CliRun): Doc[] =>
  run.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));

interface Compared {
  readonly job: Doc;
  readonly evidence: Doc;
  readonly localLock: Map<string, string | null>;
  readonly localLockText: string;
  readonly counts: Map<string, Counts>;
}

describe("real Debian crates with no .cargo/config.toml, vendor directory or Cargo.lock: kiln (dependency gateway) vs local cargo against the same registry", () => {
  let upstream: SparseRegistry;
  let client: KilnClient;
  let env: Record<string, string>;
  let close: () => Promise<void>;
  const scratch: string[] = [];
  const localCargo: LocalCargo = {
    targetDir: mkdtempSync(join(tmpdir(), "kiln-local-cargo-target-")),
    home: mkdtempSync(join(tmpdir(), "kiln-local-cargo-home-")),
  };
  scratch.push(localCargo.targetDir, localCargo.home);

  before(async () => {
    upstream = await startSparseRegistry({ crates: [TERA, SERDE_YAML, ...PEST_MEMBERS] });
    const embedded = await startListeningEmbedded({ cratesIoIndex: upstream.indexUrl });
    close = embedded.close;
    for (const name of ["debian/tera", "debian/serde-yaml", "debian/pest"]) {
      await onboardRepository(embedded.storage, { tenantId: embedded.tenant, name, onboardedBy: "test" }, new Date());
    }
    client = createClient({ endpoint: embedded.endpoint, token: embedded.token });
    env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: embedded.endpoint, KILN_TOKEN: embedded.token };
  });
  after(async () => {
    await close?.();
    await upstream?.close();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  /** Every dev-dependency of the crates under test is served (the fixture skips none of theirs). */
  const assertServesDevDependencies = (crates: readonly string[]) => {
    const theirs = upstream.skipped.filter((s) => crates.includes(s.crate.replace("@", "-")));
    assert.deepEqual(theirs, [], "apt-get install the librust-*-dev packages of these dependencies");
  };

  /**
   * Lays the project out twice with `build` (kiln's copy, local cargo's copy), runs both at
   * once, and checks both pass with the same per-binary test counts and lock the same
   * registry packages with the same checksums.
   */
  async function compare(t: TestContext, repository: string, build: (dir: string) => void): Promise<Compared> {
    const { binaryKey, withoutEmpty } = await debian();
    const kilnDir = mkdtempSync(join(tmpdir(), "kiln-gateway-crate-"));
    const localDir = mkdtempSync(join(tmpdir(), "kiln-local-crate-"));
    scratch.push(kilnDir, localDir);
    build(kilnDir);
    build(localDir);
    assertBare(kilnDir);

    const started = process.hrtime.bigint();
    const [run, local] = await Promise.all([
      runCli(["cargo", "test", "--repository", repository, "--json"], { cwd: kilnDir, env }),
      localCargoTest(localDir, upstream, localCargo),
    ]);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    assert.equal(local.exitCode, 0, local.output.slice(-4000));
    assert.equal(run.code, 0, `${run.stderr}\n${run.stdout.slice(-4000)}`);
    const lines = jsonLines(run);
    const result = lines.find((l) => l.type === "result");
    assert.equal(result.status, "passed");
    const logText = lines
      .filter((l) => l.type === "log")
      .map((l) => l.text)
      .join("\n");
    assert.match(logText, /network policy dependency-gateway/);
    assert.match(logText, /generate-lockfile/, "the source has no Cargo.lock: the gateway had cargo generate one");

    const evidence = (await client.call("jobs.evidence", { params: { id: result.job } })) as Doc;
    const counts = withoutEmpty(localCounts(local.output));
    assert.ok(counts.size > 0, local.output.slice(-3000));
    assert.deepEqual(keyed(evidenceCounts(evidence.report.tests, binaryKey)), keyed(counts));
    assert.equal(result.tests.passed, total(counts, "passed"));
    assert.equal(result.tests.failed, 0);

    // Both resolved the same packages from the registry: the job's locked crates are local cargo's Cargo.lock.
    const localLockText = readFileSync(join(localDir, "Cargo.lock"), "utf8");
    const localLock = lockedFromRegistry(localLockText);
    const job = (await client.call("jobs.get", { params: { id: result.job } })) as Doc;
    const jobLock = new Map<string, string | null>(
      (job.locked_crates as Doc[]).map((c) => [`${c.name} ${c.version}`, c.checksum]),
    );
    assert.deepEqual(keyed(jobLock), keyed(localLock));
    for (const crate of job.locked_crates as Doc[]) {
      const served = upstream.crates.get(crate.name)?.find((v) => v.version === crate.version);
      assert.equal(crate.checksum, served?.checksum, `${crate.name} ${crate.version} is the registry's`);
    }
    t.diagnostic(
      `${repository}: ${localLock.size} locked registry packages; ${total(counts, "passed")} passed, ${total(counts, "ignored")} ignored in ${counts.size} binaries; local cargo ${local.seconds.toFixed(1)} s${local.cached ? " (an identical earlier run's, kept on this machine)" : ""}, both ${seconds.toFixed(1)} s`,
    );
    return { job, evidence, localLock, localLockText, counts };
  }

  it("tera 1.17.1 (its own suite; 30+ locked registry packages) passes with local cargo's test counts", async (t) => {
    assertServesDevDependencies([TERA]);
    const { localLock, counts } = await compare(t, "debian/tera", (dir) => copyCrate(TERA, dir));
    assert.ok(localLock.size >= 30, `tera locks ${localLock.size} registry packages`);
    for (const name of ["chrono-tz", "pest_derive", "regex", "serde_json", "pretty_assertions"]) {
      assert.ok(
        [...localLock.keys()].some((k) => k.startsWith(`${name} `)),
        `${name} is locked from the registry`,
      );
    }
    assert.ok((counts.get("lib tera")?.passed ?? 0) >= 300, JSON.stringify(keyed(counts)));
  });

  it("serde_yaml 0.8.26 with [patch.crates-io] yaml-rust = a path copy inside it: the patched copy is what built and ran", async (t) => {
    assertServesDevDependencies([SERDE_YAML]);
    const MARK = "patched copy of yaml-rust inside the workspace";
    const { job, evidence, localLock, localLockText, counts } = await compare(t, "debian/serde-yaml", (dir) => {
      copyCrate(SERDE_YAML, dir);
      copyCrate(YAML_RUST, join(dir, "patched", "yaml-rust"));
      appendFileSync(
        join(dir, "patched", "yaml-rust", "src", "lib.rs"),
        `\n/// Only the patched copy has this.\npub fn kiln_patched() -> &'static str {\n    ${JSON.stringify(MARK)}\n}\n`,
      );
      appendFileSync(join(dir, "Cargo.toml"), `\n[patch.crates-io]\nyaml-rust = { path = "patched/yaml-rust" }\n`);
      mkdirSync(join(dir, "tests"), { recursive: true });
      writeFileSync(
        join(dir, "tests", "kiln_patch.rs"),
        `#[test]\nfn the_patched_yaml_rust_is_linked() {\n    assert_eq!(yaml_rust::kiln_patched(), ${JSON.stringify(MARK)});\n    let docs = yaml_rust::YamlLoader::load_from_str("a: [1, 2]").unwrap();\n    assert_eq!(docs[0]["a"][1].as_i64(), Some(2));\n}\n\n#[test]\nfn serde_yaml_parses_through_the_patched_copy() {\n    let v: std::collections::BTreeMap<String, Vec<u32>> = serde_yaml::from_str("a: [1, 2]").unwrap();\n    assert_eq!(v["a"], vec![1, 2]);\n}\n`,
      );
    });
    assert.deepEqual(counts.get("kiln_patch"), { passed: 2, failed: 0, ignored: 0 });
    const patchTests = (evidence.report.tests as Doc[]).filter((x) => x.target === "serde_yaml::kiln_patch");
    assert.deepEqual(
      patchTests.map((x) => [x.name, x.outcome]).sort(),
      [
        ["serde_yaml_parses_through_the_patched_copy", "passed"],
        ["the_patched_yaml_rust_is_linked", "passed"],
      ],
      JSON.stringify(patchTests),
    );
    // yaml-rust is the workspace's path package, not a registry one, in both locks; its own
    // dependency (linked-hash-map) still comes from the registry.
    assert.ok(!(job.locked_crates as Doc[]).some((c) => c.name === "yaml-rust"));
    assert.ok(![...localLock.keys()].some((k) => k.startsWith("yaml-rust ")));
    assert.match(localLockText, /name = "yaml-rust"\nversion = "0\.4\.5"\ndependencies = \[/);
    assert.doesNotMatch(localLockText, /\[\[patch\.unused\]\]/);
    assert.ok([...localLock.keys()].some((k) => k.startsWith("linked-hash-map ")));
  });

  it("a three-crate workspace (pest_derive → pest_generator → pest_meta by path, pest and syn from the registry) passes with local cargo's test counts", async (t) => {
    assertServesDevDependencies(PEST_MEMBERS);
    const { job, counts } = await compare(t, "debian/pest", (dir) => {
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, "Cargo.toml"),
        `[workspace]\nmembers = ["pest_derive", "pest_generator", "pest_meta"]\nresolver = "2"\n`,
      );
      for (const member of PEST_MEMBERS) copyCrate(member, join(dir, member.replace(/-[^-]*$/, "")));
      pathDependency(join(dir, "pest_generator", "Cargo.toml"), "pest_meta", "../pest_meta");
      pathDependency(join(dir, "pest_derive", "Cargo.toml"), "pest_generator", "../pest_generator");
    });
    // Each member's tests ran (not only the first's), and the members came from the workspace.
    for (const key of ["lib pest_meta", "lib pest_generator", "grammar", "doc pest_derive"]) {
      assert.ok(counts.has(key), `${key} in ${JSON.stringify(keyed(counts))}`);
    }
    const locked = (job.locked_crates as Doc[]).map((c) => c.name);
    assert.ok(locked.includes("pest") && locked.includes("syn"), locked.join(", "));
    for (const member of ["pest_derive", "pest_generator", "pest_meta"]) assert.ok(!locked.includes(member), member);
  });
});
