import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient, type KilnClient } from "@kiln/client";
import { gatewayEgressOf } from "@kiln/host";
import {
  commitRepository,
  type GitServer,
  makeTestTls,
  type SparseRegistry,
  startGitServer,
  startSparseRegistry,
  type TestTls,
} from "@kiln/host/testing";
import { REGISTRY_CRATE_DEPENDENCIES, REGISTRY_CRATE_LIB, registryCrateManifest } from "@kiln/server/testing";
import { onboardRepository } from "@kiln/storage";
import { type CliRun, freshConfigHome, runCli, startListeningEmbedded } from "./harness.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON lines of the CLI's --json output, read loosely in assertions.
type Doc = any;

const jsonLines = (run: CliRun): Doc[] =>
  run.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));

describe("kiln cargo test of an ordinary project whose dependencies come from a registry (the dependency gateway)", () => {
  let upstream: SparseRegistry;
  let tls: TestTls;
  let gitServer: GitServer;
  let crateRoot: string;
  let endpoint: string;
  let client: KilnClient;
  let env: Record<string, string>;
  let close: () => Promise<void>;
  const scratch: string[] = [];

  const project = (files: Record<string, string>): string => {
    const root = mkdtempSync(join(tmpdir(), "kiln-gateway-ws-"));
    scratch.push(root);
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
    return root;
  };

  before(async () => {
    upstream = await startSparseRegistry({ crates: REGISTRY_CRATE_DEPENDENCIES });
    // Git dependencies come over https: a real git server on loopback, with a CA of its own that
    // the operator tells the gateway to trust, at the one address and port the operator allows.
    tls = await makeTestTls();
    gitServer = await startGitServer(tls);
    const embedded = await startListeningEmbedded({
      cratesIoIndex: upstream.indexUrl,
      gateway: gatewayEgressOf({
        KILN_GATEWAY_ALLOW: `127.0.0.1:${gitServer.port}`,
        KILN_GATEWAY_CA_FILE: tls.caFile,
      }),
    });
    endpoint = embedded.endpoint;
    crateRoot = embedded.crateRoot;
    close = embedded.close;
    for (const name of ["acme/hello", "acme/escape", "acme/withgit"]) {
      await onboardRepository(embedded.storage, { tenantId: embedded.tenant, name, onboardedBy: "test" }, new Date());
    }
    client = createClient({ endpoint, token: embedded.token });
    env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: embedded.token };
  });
  after(async () => {
    await close();
    await upstream.close();
    await gitServer?.close();
    await tls?.remove();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  it("a fresh `cargo new` project depending on itoa and fnv (no Cargo.lock) passes; the second run downloads 0 bytes", async () => {
    const dir = project({
      "Cargo.toml": registryCrateManifest("hello"),
      "src/lib.rs": REGISTRY_CRATE_LIB,
    });
    const run = await runCli(["cargo", "test", "--repository", "acme/hello", "--json"], { cwd: dir, env });
    assert.equal(run.code, 0, `${run.stderr}\n${run.stdout.slice(-4000)}`);
    const result = jsonLines(run).find((l) => l.type === "result");
    assert.equal(result.status, "passed");
    assert.equal(result.tests.passed, 2);
    const logText = jsonLines(run)
      .filter((l) => l.type === "log")
      .map((l) => l.text)
      .join("\n");
    assert.match(logText, /network policy dependency-gateway/);
    assert.match(logText, /generate-lockfile/);

    const job = await client.call("jobs.get", { params: { id: result.job } });
    assert.equal(job.configuration_sha256?.length, 64);
    const locked = (job.locked_crates ?? []).map((c) => c.name);
    assert.ok(locked.includes("itoa") && locked.includes("fnv"), locked.join(", "));
    for (const crate of job.locked_crates ?? []) {
      const served = upstream.crates.get(crate.name)?.find((v) => v.version === crate.version);
      assert.equal(crate.checksum, served?.checksum, `${crate.name} is locked to the registry's checksum`);
    }
    assert.deepEqual(job.git_sources, []);
    const evidence = await client.call("jobs.evidence", { params: { id: result.job } });
    const admitted = evidence.report.admitted as Doc;
    assert.equal(admitted.network_policy, "dependency-gateway");
    assert.equal(admitted.configuration_sha256, job.configuration_sha256);
    const cold = evidence.report.caches.find((c) => c.class === "dependency-gateway") as Doc;
    assert.equal(cold.outcome, "cold");
    assert.ok(cold.bytes_fetched > 0);
    assert.ok(evidence.report.phases.some((p) => p.name === "fetch" && p.status === "passed"));

    const downloaded = upstream.downloadBytes();
    const again = await runCli(["cargo", "test", "--repository", "acme/hello", "--json"], { cwd: dir, env });
    assert.equal(again.code, 0, again.stderr);
    const second = jsonLines(again).find((l) => l.type === "result");
    const warm = (await client.call("jobs.evidence", { params: { id: second.job } })).report.caches.find(
      (c) => c.class === "dependency-gateway",
    ) as Doc;
    assert.equal(warm.outcome, "warm");
    assert.equal(warm.bytes_fetched, 0);
    assert.equal(warm.misses, 0);
    assert.equal(upstream.downloadBytes(), downloaded, "the second job downloaded 0 bytes");
    const secondJob = await client.call("jobs.get", { params: { id: second.job } });
    assert.equal(secondJob.configuration_sha256, job.configuration_sha256);
  });

  it("a build script that tries to reach the registry upstream fails: the job still has no network", async () => {
    const origin = new URL(upstream.origin);
    const dir = project({
      "Cargo.toml": `[package]\nname = "escape"\nversion = "0.1.0"\nedition = "2021"\nbuild = "build.rs"\n\n[dependencies]\nitoa = "1"\n`,
      "src/lib.rs": "pub fn n() -> u32 { 1 }\n",
      "build.rs": `use std::net::TcpStream;
fn main() {
    match TcpStream::connect(("${origin.hostname}", ${origin.port})) {
        Ok(_) => panic!("REACHED the registry upstream from the sandbox"),
        Err(e) => println!("cargo:warning=no network: {e}"),
    }
}
`,
    });
    const run = await runCli(["cargo", "build", "--repository", "acme/escape", "--json"], { cwd: dir, env });
    assert.equal(run.code, 0, `${run.stderr}\n${run.stdout.slice(-4000)}`);
    const text = jsonLines(run)
      .filter((l) => l.type === "log")
      .map((l) => l.text)
      .join("\n");
    assert.doesNotMatch(text, /REACHED/);
    assert.match(text, /no network/);
  });

  it("a git dependency (a member of an upstream workspace using `workspace = true`) builds at its locked commit; the job lists the git source", async () => {
    const upstreamRepo = mkdtempSync(join(tmpdir(), "kiln-gateway-git-upstream-"));
    scratch.push(upstreamRepo);
    const files: Record<string, string> = {
      "Cargo.toml": `[workspace]\nmembers = ["gitdep"]\nresolver = "2"\n\n[workspace.package]\nversion = "0.3.0"\nedition = "2021"\n\n[workspace.dependencies]\nitoa = "1"\n`,
      "gitdep/Cargo.toml": `[package]\nname = "gitdep"\nversion.workspace = true\nedition.workspace = true\n\n[dependencies]\nitoa.workspace = true\n`,
      "gitdep/src/lib.rs": `pub fn render(n: u32) -> String { itoa::Buffer::new().format(n).to_owned() }\n`,
    };
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(upstreamRepo, path)), { recursive: true });
      writeFileSync(join(upstreamRepo, path), content);
    }
    const git = (args: string[]) =>
      execFileSync("git", ["-C", upstreamRepo, "-c", "user.name=t", "-c", "user.email=t@t", ...args], {
        env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" },
      })
        .toString()
        .trim();
    git(["init", "--quiet", "--initial-branch=main"]);
    git(["add", "."]);
    git(["commit", "--quiet", "-m", "first"]);
    const head = git(["rev-parse", "HEAD"]);
    const url = gitServer.serve("gitdep-upstream", upstreamRepo);
    const dir = project({
      "Cargo.toml": `[package]\nname = "withgit"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\ngitdep = { git = "${url}", branch = "main" }\n`,
      "src/lib.rs": `#[test]\nfn renders_through_the_git_dependency() { assert_eq!(gitdep::render(7), "7"); }\n`,
    });
    const run = await runCli(["cargo", "test", "--repository", "acme/withgit", "--json"], { cwd: dir, env });
    assert.equal(run.code, 0, `${run.stderr}\n${run.stdout.slice(-4000)}`);
    const result = jsonLines(run).find((l) => l.type === "result");
    assert.equal(result.tests.passed, 1);
    const job = await client.call("jobs.get", { params: { id: result.job } });
    assert.deepEqual(job.git_sources, [{ url, rev: head }]);
    assert.ok((job.locked_crates ?? []).some((c) => c.name === "itoa"));
  });

  it("a git dependency on a repository of the host (file://) is refused before anything is mirrored: cause dependencies, naming the URL and the rule; the CLI exits 101", async () => {
    const hostRepo = mkdtempSync(join(tmpdir(), "kiln-gateway-host-repo-"));
    scratch.push(hostRepo);
    commitRepository(hostRepo, {
      "secret.txt": "kiln-host-secret-0f9e\n",
      "gitdep/Cargo.toml": `[package]\nname = "gitdep"\nversion = "0.1.0"\n`,
      "gitdep/src/lib.rs": "",
    });
    const mirrorsBefore = filesUnderOrNone(join(crateRoot, "git"));
    const dir = project({
      "Cargo.toml": `[package]\nname = "withgit"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\ngitdep = { git = "file://${hostRepo}", branch = "main" }\n`,
      "src/lib.rs": "",
    });
    const run = await runCli(["cargo", "build", "--repository", "acme/withgit", "--json"], { cwd: dir, env });
    assert.equal(run.code, 101, `${run.stderr}\n${run.stdout.slice(-4000)}`);
    const result = jsonLines(run).find((l) => l.type === "result");
    const job = await client.call("jobs.get", { params: { id: result.job } });
    assert.equal(job.failure?.cause, "dependencies", JSON.stringify(job.failure));
    assert.equal(job.failure?.phase, "fetch");
    assert.match(job.failure?.detail ?? "", /egress_refused/);
    assert.ok((job.failure?.detail ?? "").includes(`file://${hostRepo}`), job.failure?.detail);
    assert.match(job.failure?.detail ?? "", /https only/);
    assert.doesNotMatch(run.stdout, /kiln-host-secret/);
    assert.deepEqual(
      filesUnderOrNone(join(crateRoot, "git")),
      mirrorsBefore,
      "no mirror was made of the host's repository",
    );
  });
});

/** Every file under `dir` (relative), or none when it does not exist. */
function filesUnderOrNone(dir: string): string[] {
  try {
    return (readdirSync(dir, { recursive: true }) as string[]).sort();
  } catch {
    return [];
  }
}
