/**
 * The dependency gateway and a private registry, end to end: the real `kiln` CLI against the
 * embedded server and a real bubblewrap sandbox host, real cargo, fixture sparse registries over
 * real HTTP. A tenant's registry credential reaches the private registry from the host, and is
 * found nowhere a job can look (its build script and its test search the sandbox for it); a
 * tenant without the credential is refused by the registry and is not served the first tenant's
 * cached copy; bytes that do not match Cargo.lock's checksum fail the job and are never cached.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient, type KilnClient } from "@kiln/client";
import { gatewayEgressOf, TARGET_DISK_FILE, withTargetTree } from "@kiln/host";
import { type SparseRegistry, startSparseRegistry } from "@kiln/host/testing";
import type { Embedded } from "@kiln/server/testing";
import { onboardRepository } from "@kiln/storage";
import { type CliRun, freshConfigHome, runCli, serverTesting, startListeningEmbedded } from "./harness.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON lines of the CLI's --json output, read loosely in assertions.
type Doc = any;

const jsonLines = (run: CliRun): Doc[] =>
  run.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));

const resultOf = (run: CliRun): Doc => {
  const result = jsonLines(run).find((l) => l.type === "result");
  assert.ok(result !== undefined, `no result line\n${run.stderr}\n${run.stdout.slice(-4000)}`);
  return result;
};

/** Every regular file under `root` (symbolic links not followed), as absolute paths. */
function filesUnder(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) found.push(path);
    }
  };
  if (existsSync(root)) walk(root);
  return found;
}

/**
 * Files under `root` whose path or content holds `needle`. A lineage's target disk (a sparse
 * ext4 image, target-disk.ts) is searched as the tree it holds, mounted read-only.
 */
async function filesHolding(root: string, needle: string): Promise<string[]> {
  const bytes = Buffer.from(needle);
  const found: string[] = [];
  for (const path of filesUnder(root)) {
    if (basename(path) === TARGET_DISK_FILE) {
      const inside = await withTargetTree(dirname(path), async (tree) => filesHolding(tree, needle));
      found.push(...inside.map((p) => `${path}:${p}`));
    } else if (path.includes(needle) || readFileSync(path).includes(bytes)) found.push(path);
  }
  return found;
}

/** The mask the Rust sources decode the secret with: its text is then in no file of the workspace. */
const MASK = 0x5a;

/**
 * Rust, shared by the build script (`#[path]`) and the library's tests (`mod scan`): searches
 * everything the sandbox user can read — the environment, every process's environ and cmdline
 * in /proc, and every regular file under / (file names and link targets too) — for the
 * registry credential's secret; only the host's read-only system directories and the
 * toolchain are left out (installed files, not written for a job). The same search must find
 * text known to be there (the private registry's address in the gateway's configuration under
 * /kiln/deps; the executor's CARGO_NET_OFFLINE in the environment and in /proc/<pid>/environ),
 * so an empty result means the secret is absent, not that the search saw nothing.
 */
const SCAN_RS = `use std::collections::HashSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The registry credential's secret, masked so that its text is in no file of the workspace.
const MASKED: &[u8] = &[__MASKED__];
/// The private registry's address: in the sandbox (the gateway's configuration names it).
const CONTROL: &str = "__CONTROL__";
/// Set by the executor for every process of the job.
const ENVIRONMENT_CONTROL: &str = "CARGO_NET_OFFLINE=true";

const SKIPPED: &[&str] = &[
    "/proc", "/sys", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt/kiln/toolchain",
];

fn secret() -> Vec<u8> {
    let mask = std::hint::black_box(__MASK__u8);
    MASKED.iter().map(|b| b ^ mask).collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() || hay.len() < needle.len() {
        return false;
    }
    let first = needle[0];
    let last = hay.len() - needle.len();
    let mut i = 0;
    while i <= last {
        match hay[i..=last].iter().position(|&b| b == first) {
            None => return false,
            Some(p) => {
                i += p;
                if &hay[i..i + needle.len()] == needle {
                    return true;
                }
                i += 1;
            }
        }
    }
    false
}

pub struct Report {
    /// Where each needle (secret, registry address, environment control) was found.
    found: [Vec<String>; 3],
    files: usize,
    bytes: u64,
    processes: usize,
    unreadable: usize,
}

impl Report {
    fn note(&mut self, needles: &[Vec<u8>; 3], hay: &[u8], place: &str) {
        for (i, needle) in needles.iter().enumerate() {
            if contains(hay, needle) {
                self.found[i].push(place.to_string());
            }
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "searched the environment, {} processes' environ and cmdline, and {} files ({} bytes); {} unreadable; the secret found {} times, the registry address {} times (in /kiln/deps: {}), CARGO_NET_OFFLINE {} times",
            self.processes,
            self.files,
            self.bytes,
            self.unreadable,
            self.found[0].len(),
            self.found[1].len(),
            self.found[1].iter().any(|p| p.starts_with("/kiln/deps/")),
            self.found[2].len(),
        )
    }

    /// Err naming where the secret is, or what the search failed to find that is there.
    pub fn check(&self) -> Result<(), String> {
        if !self.found[0].is_empty() {
            return Err(format!("LEAK: the registry credential is readable in the sandbox at {:?}", self.found[0]));
        }
        if !self.found[1].iter().any(|p| p.starts_with("/kiln/deps/")) {
            return Err(format!("the search did not find the registry address in /kiln/deps: {}", self.summary()));
        }
        if !self.found[2].iter().any(|p| p.starts_with("env:")) || !self.found[2].iter().any(|p| p.ends_with("/environ")) {
            return Err(format!("the search did not find CARGO_NET_OFFLINE in the environment and /proc: {}", self.summary()));
        }
        if self.files < 20 || self.processes < 1 {
            return Err(format!("the search saw too little: {}", self.summary()));
        }
        Ok(())
    }
}

fn walk(dir: &Path, needles: &[Vec<u8>; 3], report: &mut Report, seen: &mut HashSet<PathBuf>) {
    if SKIPPED.iter().any(|s| dir == Path::new(s)) || !seen.insert(dir.to_path_buf()) {
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(_) => {
            report.unreadable += 1;
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let place = path.display().to_string();
        report.note(needles, path.as_os_str().as_bytes(), &format!("name:{place}"));
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(_) => {
                report.unreadable += 1;
                continue;
            }
        };
        if meta.is_dir() {
            walk(&path, needles, report, seen);
        } else if meta.is_file() {
            match fs::read(&path) {
                Ok(bytes) => {
                    report.files += 1;
                    report.bytes += bytes.len() as u64;
                    report.note(needles, &bytes, &place);
                }
                Err(_) => report.unreadable += 1,
            }
        } else if meta.file_type().is_symlink() {
            if let Ok(target) = fs::read_link(&path) {
                report.note(needles, target.as_os_str().as_bytes(), &format!("link:{place}"));
            }
        }
    }
}

pub fn scan() -> Report {
    let needles = [secret(), CONTROL.as_bytes().to_vec(), ENVIRONMENT_CONTROL.as_bytes().to_vec()];
    let mut report = Report { found: [vec![], vec![], vec![]], files: 0, bytes: 0, processes: 0, unreadable: 0 };
    for (name, value) in std::env::vars_os() {
        let mut pair = name.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        report.note(&needles, &pair, &format!("env:{}", name.to_string_lossy()));
    }
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.is_empty() || !name.as_bytes().iter().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let mut readable = false;
            for file in ["environ", "cmdline"] {
                let path = entry.path().join(file);
                match fs::read(&path) {
                    Ok(bytes) => {
                        readable = true;
                        report.note(&needles, &bytes, &path.display().to_string());
                    }
                    Err(_) => report.unreadable += 1,
                }
            }
            if readable {
                report.processes += 1;
            }
        }
    }
    let mut seen = HashSet::new();
    let mut roots: Vec<PathBuf> = vec![PathBuf::from("/")];
    for name in ["HOME", "CARGO_HOME", "CARGO_TARGET_DIR", "OUT_DIR", "CARGO_MANIFEST_DIR", "TMPDIR"] {
        if let Some(value) = std::env::var_os(name) {
            roots.push(PathBuf::from(value));
        }
    }
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd);
    }
    for root in roots {
        walk(&root, &needles, &mut report, &mut seen);
    }
    report
}
`;

const BUILD_RS = `#[path = "src/scan.rs"]
mod scan;

fn main() {
    let report = scan::scan();
    println!("cargo:warning=kiln-leak-check (build script): {}", report.summary());
    if let Err(problem) = report.check() {
        panic!("{problem}");
    }
}
`;

const LIB_RS = `/// The newest of the versions, by the private registry's semver.
pub fn newest(versions: &[&str]) -> String {
    versions
        .iter()
        .map(|v| semver::Version::parse(v).unwrap())
        .max()
        .map(|v| v.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod scan;

#[cfg(test)]
mod tests {
    #[test]
    fn orders_versions_with_the_private_semver() {
        assert_eq!(super::newest(&["1.2.3", "1.10.0", "1.9.9"]), "1.10.0");
    }

    #[test]
    fn the_sandbox_holds_no_registry_credential() {
        let report = super::scan::scan();
        println!("kiln-leak-check (test): {}", report.summary());
        if let Err(problem) = report.check() {
            panic!("{problem}");
        }
    }
}
`;

describe("the dependency gateway and a private registry: the tenant's credential reaches the registry and never the job", () => {
  const secret = randomBytes(32).toString("hex");
  const scratch: string[] = [];
  let cratesIo: SparseRegistry;
  let privateRegistry: SparseRegistry;
  let registryHost: string;
  let embedded: Embedded & { endpoint: string };
  let owner: { tenant: string; userId: string; token: string };
  let other: { tenant: string; userId: string; token: string };
  let ownerClient: KilnClient;
  let otherClient: KilnClient;
  let ownerEnv: Record<string, string>;
  let otherEnv: Record<string, string>;
  /** Written by the workspace's credential-provider if it ever runs on the host (a host path, outside the sandbox's private /tmp). */
  let providerMarker: string;
  /** The first tenant's job: what the second tenant's is compared with. */
  let semver: { version: string; checksum: string };

  const project = (files: Record<string, string>): string => {
    const root = mkdtempSync(join(tmpdir(), "kiln-gateway-private-ws-"));
    scratch.push(root);
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
    return root;
  };

  /** The project of tests 1–3: semver from the private registry, a build script and a test searching for the secret. */
  const leakyProject = (extra: Record<string, string> = {}) => {
    const masked = [...Buffer.from(secret)].map((b) => b ^ MASK).join(", ");
    return project({
      "Cargo.toml": `[package]
name = "leaky"
version = "0.1.0"
edition = "2021"
build = "build.rs"

[dependencies]
semver = { version = "1", registry = "private" }

# The search reads every readable file: optimized, it takes seconds, not minutes.
[profile.dev]
opt-level = 2

[profile.dev.build-override]
opt-level = 2
`,
      ".cargo/config.toml": `[registries.private]
index = ${JSON.stringify(privateRegistry.indexUrl)}
# A program: the gateway reads only the index URL, and must never run this on the host.
credential-provider = ["/bin/sh", "-c", ${JSON.stringify(`echo ran >> '${providerMarker}'`)}]
`,
      "build.rs": BUILD_RS,
      "src/scan.rs": SCAN_RS.replace("__MASKED__", masked)
        .replace("__MASK__", `0x${MASK.toString(16)}`)
        .replace("__CONTROL__", registryHost),
      "src/lib.rs": LIB_RS,
      ...extra,
    });
  };

  /** Asserts none of the texts holds the secret (naming which one does). */
  const assertNoSecret = (texts: Record<string, string>) => {
    for (const [what, text] of Object.entries(texts)) {
      assert.ok(!text.includes(secret), `${what} holds the registry credential's secret`);
    }
  };

  before(async () => {
    cratesIo = await startSparseRegistry({ crates: ["itoa"] });
    privateRegistry = await startSparseRegistry({ crates: ["semver"], authorization: `Bearer ${secret}` });
    registryHost = new URL(privateRegistry.origin).host;
    // The private registry is on loopback: reached because the operator allows exactly it, and its
    // credential goes over plain http because the operator allows that for loopback (tests only).
    embedded = await startListeningEmbedded({
      cratesIoIndex: cratesIo.indexUrl,
      gateway: gatewayEgressOf({
        KILN_GATEWAY_ALLOW: registryHost,
        KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS: "on",
      }),
    });
    const { personWithToken } = await serverTesting();
    // The registry credential needs the `credentials` scope: the tenant's owner, not the embedded member.
    owner = await personWithToken(embedded.storage, { role: "owner", tenant: embedded.tenant, now: new Date() });
    other = await personWithToken(embedded.storage, { role: "owner", now: new Date() });
    for (const [tenantId, name] of [
      [owner.tenant, "acme/private-dep"],
      [owner.tenant, "acme/tampered"],
      [other.tenant, "acme/private-dep"],
    ] as const) {
      await onboardRepository(embedded.storage, { tenantId, name, onboardedBy: "test" }, new Date());
    }
    ownerClient = createClient({ endpoint: embedded.endpoint, token: owner.token });
    otherClient = createClient({ endpoint: embedded.endpoint, token: other.token });
    ownerEnv = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: embedded.endpoint, KILN_TOKEN: owner.token };
    otherEnv = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: embedded.endpoint, KILN_TOKEN: other.token };
    const markerDir = mkdtempSync(join(tmpdir(), "kiln-credential-provider-"));
    scratch.push(markerDir);
    providerMarker = join(markerDir, "ran-on-the-host");
    const served = privateRegistry.crates.get("semver")?.[0];
    assert.ok(served !== undefined, "the private registry serves semver");
    semver = { version: served.version, checksum: served.checksum };
  });
  after(async () => {
    await embedded?.close();
    await privateRegistry?.close();
    await cratesIo?.close();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  it("with the tenant's registry credential, a dependency from the private registry builds and tests pass; its build script and a test search the sandbox for the credential and find nothing, and no job record holds it", async () => {
    const receipt = await ownerClient.call("tenant.registry_credential.replace", {
      body: { registry: registryHost, authorization: `Bearer ${secret}`, confirm: registryHost },
      idempotencyKey: `registry-${registryHost}`,
    });
    assert.deepEqual(receipt, { registry: registryHost, version: 1, replaced_by: owner.userId });

    const dir = leakyProject();
    const run = await runCli(["cargo", "test", "--repository", "acme/private-dep", "--json"], {
      cwd: dir,
      env: ownerEnv,
    });
    assert.equal(run.code, 0, `${run.stderr}\n${run.stdout.slice(-6000)}`);
    const result = resultOf(run);
    assert.equal(result.status, "passed");
    assert.equal(result.tests.passed, 2);
    assert.equal(result.tests.failed, 0);

    const logText = await embedded.jobs.logText(result.job);
    assert.match(logText, /network policy dependency-gateway/);
    assert.match(logText, /generate-lockfile/);
    // The build script ran its search (it panics on a find, failing the job).
    assert.match(logText, /kiln-leak-check \(build script\): searched .* the secret found 0 times/);
    const job = await ownerClient.call("jobs.get", { params: { id: result.job } });
    const evidence = await ownerClient.call("jobs.evidence", { params: { id: result.job } });
    const tests = evidence.report.tests as Doc[];
    assert.ok(
      tests.some((t) => /the_sandbox_holds_no_registry_credential$/.test(t.name) && t.outcome === "passed"),
      JSON.stringify(tests),
    );
    assert.equal((evidence.report.admitted as Doc).network_policy, "dependency-gateway");

    // The private registry was reached (with the credential: it refuses anything else) and served semver.
    assert.ok(
      privateRegistry.requests.includes(`/api/v1/crates/semver/${semver.version}/download`),
      privateRegistry.requests.join("\n"),
    );
    const locked = (job.locked_crates ?? []).find((c) => c.name === "semver");
    assert.deepEqual(locked, {
      name: "semver",
      version: semver.version,
      source: privateRegistry.indexUrl,
      checksum: semver.checksum,
    });
    // Cached in this tenant's scope, never the shared public one.
    const cached = filesUnder(embedded.crateRoot).filter((p) => p.endsWith(`${semver.checksum}.crate`));
    assert.equal(cached.length, 1, cached.join("\n"));
    assert.match(relative(embedded.crateRoot, cached[0] as string), /^tenant-[0-9a-f]{16}\//);

    assertNoSecret({
      "the CLI's output": `${run.stdout}\n${run.stderr}`,
      "the job's log": logText,
      "jobs.get": JSON.stringify(job),
      "jobs.evidence": JSON.stringify(evidence),
      "the registry credential receipt": JSON.stringify(receipt),
    });
    // What the host keeps after the job: the crate cache and the warm lineages.
    assert.deepEqual(await filesHolding(embedded.crateRoot, secret), []);
    assert.deepEqual(await filesHolding(embedded.lineageRoot, secret), []);
    assert.equal(existsSync(providerMarker), false, "the workspace's credential-provider ran on the host");
  });

  it("another tenant, without a registry credential, is refused by the private registry (cause dependencies, upstream_refused, naming the registry) and is not served the first tenant's cached copy; the CLI exits 101", async () => {
    // Same project, with the Cargo.lock the first tenant's job resolved: the crate's checksum is
    // known up front, so only the cache scope stands between this job and the cached crate.
    const lock = `version = 3

[[package]]
name = "leaky"
version = "0.1.0"
dependencies = [
 "semver",
]

[[package]]
name = "semver"
version = "${semver.version}"
source = "${privateRegistry.indexUrl}"
checksum = "${semver.checksum}"
`;
    const dir = leakyProject({ "Cargo.lock": lock });
    const cachedBefore = filesUnder(embedded.crateRoot).filter((p) => p.endsWith(`${semver.checksum}.crate`));
    assert.equal(cachedBefore.length, 1, "the first tenant's job cached semver (the previous test)");
    const requestsBefore = privateRegistry.requests.length;
    const downloadsBefore = privateRegistry.downloadBytes();

    const run = await runCli(["cargo", "test", "--repository", "acme/private-dep", "--json"], {
      cwd: dir,
      env: otherEnv,
    });
    assert.equal(run.code, 101, `${run.stderr}\n${run.stdout.slice(-4000)}`);
    const result = resultOf(run);
    assert.equal(result.status, "failed");
    assert.equal(result.exit_code, 101);
    const job = await otherClient.call("jobs.get", { params: { id: result.job } });
    assert.equal(job.failure?.cause, "dependencies", JSON.stringify(job.failure));
    assert.equal(job.failure?.phase, "fetch");
    assert.match(job.failure?.detail ?? "", /upstream_refused/);
    assert.ok(
      (job.failure?.detail ?? "").includes(privateRegistry.indexUrl),
      `the failure names the registry: ${job.failure?.detail}`,
    );
    assert.deepEqual(result.failure, job.failure);

    // The gateway asked the registry (and was refused) instead of using the other tenant's copy.
    assert.ok(privateRegistry.requests.length > requestsBefore, "the private registry was asked");
    assert.equal(privateRegistry.downloadBytes(), downloadsBefore, "nothing was downloaded");
    const cachedAfter = filesUnder(embedded.crateRoot).filter((p) => p.endsWith(`${semver.checksum}.crate`));
    assert.deepEqual(cachedAfter, cachedBefore, "no copy of semver in another scope");

    const evidence = await otherClient.call("jobs.evidence", { params: { id: result.job } });
    assert.equal(evidence.report.tests.length, 0);
    assertNoSecret({
      "the CLI's output": `${run.stdout}\n${run.stderr}`,
      "jobs.get": JSON.stringify(job),
      "jobs.evidence": JSON.stringify(evidence),
    });
    assert.equal(existsSync(providerMarker), false, "the workspace's credential-provider ran on the host");
  });

  it("a crate whose upstream bytes do not match Cargo.lock's checksum fails the job (cause dependencies, checksum_mismatch naming the crate) and is not cached", async () => {
    const itoa = cratesIo.crates.get("itoa")?.[0];
    assert.ok(itoa !== undefined, "the crates.io fixture serves itoa");
    const tampered = Buffer.from("these are not the bytes itoa was locked to");
    cratesIo.tamper("itoa", itoa.version, tampered);
    const dir = project({
      "Cargo.toml": `[package]\nname = "tampered"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nitoa = "1"\n`,
      "Cargo.lock": `version = 3

[[package]]
name = "itoa"
version = "${itoa.version}"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "${itoa.checksum}"

[[package]]
name = "tampered"
version = "0.1.0"
dependencies = [
 "itoa",
]
`,
      "src/lib.rs": "pub fn render(n: u64) -> String {\n    itoa::Buffer::new().format(n).to_owned()\n}\n",
    });
    const run = await runCli(["cargo", "build", "--repository", "acme/tampered", "--json"], {
      cwd: dir,
      env: ownerEnv,
    });
    assert.equal(run.code, 101, `${run.stderr}\n${run.stdout.slice(-4000)}`);
    const result = resultOf(run);
    assert.equal(result.status, "failed");
    const job = await ownerClient.call("jobs.get", { params: { id: result.job } });
    assert.equal(job.failure?.cause, "dependencies", JSON.stringify(job.failure));
    const detail = job.failure?.detail ?? "";
    assert.match(detail, /checksum_mismatch/);
    assert.match(detail, /\bitoa\b/);
    assert.ok(detail.includes(itoa.checksum), `the failure names the locked checksum: ${detail}`);
    // The tampered bytes were downloaded and refused (not a failure before the download).
    assert.ok(cratesIo.requests.includes(`/api/v1/crates/itoa/${itoa.version}/download`), cratesIo.requests.join("\n"));

    // Nothing of it was cached: no entry for the locked checksum, nor for the bytes served.
    const tamperedSha = createHash("sha256").update(tampered).digest("hex");
    const files = filesUnder(embedded.crateRoot);
    assert.deepEqual(
      files.filter((p) => p.includes(itoa.checksum) || p.includes(tamperedSha)),
      [],
    );
    assert.deepEqual(
      files.filter((p) => createHash("sha256").update(readFileSync(p)).digest("hex") === tamperedSha),
      [],
    );
  });
});
