#!/usr/bin/env node
// Issue 38, lineage seeding: a new repository's first `kiln cargo test` seeded from the tenant's
// lineage that built the same dependencies, against the same first job cold (the repository's
// lineage_seeding setting off), in one run, interleaved.
//
//   npm run build && node bench/lineage-seeding.mjs [--runs N] [--json FILE]
//
// kiln runs in this process (bench/support/in-process-kiln.mjs: SQLite, the embedded local host
// with the sandbox executor, listening on loopback) with its dependency gateway pointed at a
// sparse registry of Debian's crate sources (the one the tests use). The project is a library
// depending on serde_json and regex with a Cargo.lock resolved against that registry, as a
// developer's checkout has it; the CLI (`kiln cargo test --json`, a child process) runs in a git
// work tree of it. First a repository `seed` builds it once (unmeasured: the tenant's existing
// lineage). Then each round onboards two new repositories with the same project and runs their
// first job: one with lineage_seeding on (seeded from the tenant's lineages), one with it off
// (cold), in alternating order. The figure is the CLI's wall time, from spawn to exit; issue
// 38's goal is seeded ≤ 0.5 × cold. Must run as root (the sandbox executor requires it).
import { execFile, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { requireBuilt, root } from "./support/built-packages.mjs";
import { commitWorkTree } from "./support/git-work-tree.mjs";
import { startInProcessKiln } from "./support/in-process-kiln.mjs";
import { describeMachine } from "./support/machine.mjs";
import { option, positiveIntegerOption } from "./support/options.mjs";
import { fmt, log, table } from "./support/output.mjs";
import { removeScratch, temp } from "./support/scratch.mjs";
import { median } from "./support/statistics.mjs";

const KILN_BIN = join(root, "packages", "cli", "dist", "bundle", "main.js");
requireBuilt(KILN_BIN, join(root, "packages", "host", "dist", "src", "testing", "sparse-registry.js"));
const { startSparseRegistry } = await import(
  join(root, "packages", "host", "dist", "src", "testing", "sparse-registry.js")
);

const RUNS = positiveIntegerOption("runs", "2");
const JSON_OUT = option("json", null);
const run = promisify(execFile);
const GOAL = 0.5;

const LIB = `
pub fn first_word(text: &str) -> Option<String> {
    regex::Regex::new(r"\\w+").unwrap().find(text).map(|m| m.as_str().to_owned())
}

pub fn to_json(words: &[&str]) -> String {
    serde_json::to_string(words).unwrap()
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_first_word() {
        assert_eq!(super::first_word("  hello world").as_deref(), Some("hello"));
    }
    #[test]
    fn writes_json() {
        assert_eq!(super::to_json(&["a", "b"]), r#"["a","b"]"#);
    }
}
`;
const MANIFEST = `[package]\nname = "sprout"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nserde_json = "1"\nregex = "1"\n`;

const upstream = await startSparseRegistry({ crates: ["serde_json", "regex"] });

/** The project as a developer has it: a git work tree with a Cargo.lock resolved against the registry. */
async function layOut() {
  const dir = temp("kiln-seeding-src-");
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "Cargo.toml"), MANIFEST);
  writeFileSync(join(dir, "src", "lib.rs"), LIB);
  writeFileSync(join(dir, ".gitignore"), "/target\n");
  await run(
    "cargo",
    [
      "generate-lockfile",
      "--config",
      'source.crates-io.replace-with="bench-registry"',
      "--config",
      `source.bench-registry.registry="${upstream.indexUrl}"`,
    ],
    { cwd: dir, env: { ...process.env, CARGO_HOME: temp("kiln-seeding-cargo-home-") } },
  );
  commitWorkTree(dir, "sprout");
  return dir;
}

const kiln = await startInProcessKiln({
  dataDir: temp("kiln-seeding-data-"),
  cgroupParentName: `kiln-bench-${process.pid}-sandboxes`,
  listen: { host: "127.0.0.1", port: 0 },
  hostOptions: { crateCache: { cratesIoIndex: upstream.indexUrl } },
});
const configHome = temp("kiln-seeding-config-");

/** `kiln cargo test --json` in `dir` for `repository`: wall seconds, the job's evidence. */
async function kilnTest(dir, repository) {
  const env = {
    ...process.env,
    KILN_ENDPOINT: kiln.address,
    KILN_TOKEN: kiln.member.token,
    XDG_CONFIG_HOME: configHome,
  };
  const started = performance.now();
  const child = spawn(process.execPath, [KILN_BIN, "cargo", "test", "--repository", repository, "--json"], {
    cwd: dir,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c) => {
    stdout += c;
  });
  child.stderr.setEncoding("utf8").on("data", (c) => {
    stderr += c;
  });
  const code = await new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", resolve);
  });
  const seconds = (performance.now() - started) / 1000;
  const result = stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l))
    .find((l) => l.type === "result");
  if (code !== 0 || result?.status !== "passed") {
    throw new Error(`kiln cargo test (${repository}) exited ${code}:\n${stderr.slice(-2000)}\n${stdout.slice(-3000)}`);
  }
  const evidence = await kiln.get(`/api/jobs/${result.job}/evidence`);
  const cache = evidence.report.caches.find((c) => c.class !== "dependency-gateway");
  const tests = evidence.report.tests.map((t) => `${t.name}=${t.outcome}`).sort();
  return { seconds, cache, tests };
}

async function onboard(name, seeding) {
  await kiln.onboard(name);
  if (seeding) return name;
  const res = await kiln.app.inject({
    method: "POST",
    url: `/api/repositories/${name}/settings`,
    headers: { ...kiln.auth, "content-type": "application/json", "idempotency-key": `off-${name}` },
    payload: JSON.stringify({ version: 0, changes: { lineage_seeding: false } }),
  });
  if (res.statusCode !== 200) throw new Error(`lineage_seeding off for ${name}: ${res.statusCode} ${res.body}`);
  return name;
}

const tenant = kiln.member.tenant;
const dir = await layOut();
const samples = { seeded: [], cold: [] };
const details = [];
try {
  log(`seed: the tenant's first repository builds serde_json and regex (unmeasured)`);
  const seed = await kilnTest(dir, await onboard(`${tenant}/seed`, true));
  log(`  ${fmt(seed.seconds)} s, ${seed.cache.outcome} (${seed.cache.reason})`);
  for (let round = 0; round < RUNS; round++) {
    const order = round % 2 === 0 ? ["seeded", "cold"] : ["cold", "seeded"];
    for (const kind of order) {
      const repository = await onboard(`${tenant}/${kind}-${round}`, kind === "seeded");
      const sample = await kilnTest(dir, repository);
      if (kind === "seeded" && sample.cache.seeded_from === undefined) {
        throw new Error(`the seeded repository was not seeded: ${JSON.stringify(sample.cache)}`);
      }
      if (kind === "cold" && sample.cache.seeded_from !== undefined) throw new Error("the cold repository was seeded");
      if (JSON.stringify(sample.tests) !== JSON.stringify(seed.tests)) {
        throw new Error(`test results differ: ${sample.tests} vs ${seed.tests}`);
      }
      samples[kind].push(sample.seconds);
      details.push({ round, kind, seconds: sample.seconds, cache: sample.cache });
      log(
        `round ${round} ${kind}: ${fmt(sample.seconds)} s${
          kind === "seeded"
            ? ` (copy ${fmt(sample.cache.seeded_from.copy_ms, 0)} ms, ${sample.cache.seeded_from.copy}, ${fmt(sample.cache.restored_bytes / 1e6, 1)} MB; ${sample.cache.reused_units} units reused)`
            : ""
        }`,
      );
    }
  }
} finally {
  await kiln.stop();
  await upstream.close();
  removeScratch();
}

const seeded = median(samples.seeded);
const cold = median(samples.cold);
const ratio = seeded / cold;
const copies = details.filter((d) => d.kind === "seeded").map((d) => d.cache.seeded_from.copy_ms / 1000);
const machine = describeMachine();
console.log(
  `lineage seeding: first kiln cargo test of a new repository (serde_json + regex), ${RUNS} round(s); ${machine.cpus} CPUs, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} at the end, ${machine.date}\n`,
);
console.log(
  table(
    ["first job", "median s", "samples s", "vs cold"],
    [
      ["cold (lineage_seeding off)", fmt(cold), samples.cold.map((s) => fmt(s)).join(", "), "1.00×"],
      ["seeded", fmt(seeded), samples.seeded.map((s) => fmt(s)).join(", "), `${fmt(ratio)}×`],
      ["of which the copy", fmt(median(copies), 3), copies.map((s) => fmt(s, 3)).join(", "), "–"],
    ],
  ),
);
console.log(`\ngoal: seeded ≤ ${GOAL}× cold: ${ratio <= GOAL ? "met" : "NOT met"}`);
if (JSON_OUT !== null) {
  await writeFile(JSON_OUT, JSON.stringify({ machine, samples, ratio, details }, null, 2));
}
