import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { RegistryCredentialGrant } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { DependencyGateway, type GatewayEgress, type ProvideRequest } from "../src/gateway/dependency-gateway.js";
import { parseGatewayAllow } from "../src/gateway/egress-policy.js";
import { GatewayError } from "../src/gateway/gateway-error.js";
import { startGitServer } from "../src/testing/git-server.js";
import { makeTestTls } from "../src/testing/hostile-upstreams.js";
import { type SparseRegistry, startSparseRegistry } from "../src/testing/sparse-registry.js";

interface CargoRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

// Asynchronous: the registry answers from this process's event loop.
function cargo(
  args: readonly string[],
  cwd: string,
  cargoHome: string,
  environment: Readonly<Record<string, string>> = {},
): Promise<CargoRun> {
  return new Promise((resolve) => {
    execFile(
      "cargo",
      args,
      { cwd, env: { ...process.env, ...environment, CARGO_HOME: cargoHome }, timeout: 600_000 },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr });
      },
    );
  });
}

const HELLO_TEST = `
#[cfg(test)]
mod tests {
    #[test]
    fn formats_with_itoa() {
        let mut buffer = itoa::Buffer::new();
        assert_eq!(buffer.format(128u64), "128");
    }
    /// A spin lock through lock_api's Mutex (lock_api depends on scopeguard: a crate the gateway resolves transitively).
    struct RawSpin(std::sync::atomic::AtomicBool);
    unsafe impl lock_api::RawMutex for RawSpin {
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: RawSpin = RawSpin(std::sync::atomic::AtomicBool::new(false));
        type GuardMarker = lock_api::GuardSend;
        fn lock(&self) {
            while !self.try_lock() {}
        }
        fn try_lock(&self) -> bool {
            use std::sync::atomic::Ordering;
            self.0.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
        }
        unsafe fn unlock(&self) {
            self.0.store(false, std::sync::atomic::Ordering::Release);
        }
    }
    #[test]
    fn locks_with_lock_api() {
        let counter = lock_api::Mutex::<RawSpin, u32>::new(1);
        *counter.lock() += 1;
        assert_eq!(*counter.lock(), 2);
    }
}
`;

/**
 * A `cargo new --lib` project depending on itoa and lock_api (which depends on scopeguard); no
 * Cargo.lock, nothing vendored: two small crates and a transitive one (with serde_json, serde and
 * ryu the project took 4.5 CPU s to build and test, with lock_api and scopeguard 0.9; nothing
 * here is about a crate's size).
 */
async function helloProject(root: string, extra = ""): Promise<string> {
  const project = join(root, "hello");
  await mkdir(join(project, "src"), { recursive: true });
  await writeFile(
    join(project, "Cargo.toml"),
    `[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nitoa = "1"\nlock_api = "0.4"\n${extra}`,
  );
  await writeFile(join(project, "src", "lib.rs"), HELLO_TEST);
  return project;
}

describe("dependency gateway against a real sparse registry", () => {
  let upstream: SparseRegistry;
  let root: string;
  const clock = new ManualClock(new Date("2026-01-01T00:00:00Z"));

  before(async () => {
    upstream = await startSparseRegistry({ crates: ["itoa", "lock_api"] });
    root = await mkdtemp(join(tmpdir(), "kiln-gateway-test-"));
  });
  after(async () => {
    await upstream.close();
    await rm(root, { recursive: true, force: true });
  });

  const gatewayAt = (name: string, more: { egress?: GatewayEgress; extraCa?: string } = {}) =>
    new DependencyGateway({
      cacheRoot: join(root, name, "cache"),
      cacheMaxBytes: 2 ** 30,
      cratesIoIndex: upstream.indexUrl,
      clock,
      retry: { attempts: 1, firstDelayMs: 1 },
      ...more,
    });

  /** What an operator allows for loopback test upstreams: their addresses, and credentials over loopback http. */
  const loopbackAllowed = (entries: string): GatewayEgress => ({
    allow: parseGatewayAllow(entries),
    ownListeners: [],
    gitSsh: false,
    loopbackHttpCredentials: true,
  });

  /** A request whose "sandbox" is the host itself: the deps dir is seen at its own path. */
  const requestFor = async (
    project: string,
    depsDir: string,
    cargoHome: string,
    over: Partial<ProvideRequest> = {},
  ): Promise<ProvideRequest> => ({
    tenant: "acme",
    attemptId: "job-a1",
    workspaceDir: project,
    lockfile: await readFile(join(project, "Cargo.lock"), "utf8").catch(() => null),
    manifestPaths: ["Cargo.toml"],
    depsDir,
    sandboxDepsDir: depsDir,
    credentials: async () => [],
    generateLockfile: async (config, environment) => {
      const run = await cargo(["--config", config, "generate-lockfile"], project, cargoHome, environment);
      assert.equal(run.code, 0, run.stderr);
      return readFile(join(project, "Cargo.lock"), "utf8");
    },
    log: () => {},
    signal: new AbortController().signal,
    ...over,
  });

  it("builds a fresh project with no Cargo.lock offline, then serves the same lock from the cache with 0 bytes fetched", async () => {
    const dir = join(root, "fresh");
    const project = await helloProject(dir);
    const cargoHome = join(dir, "home");
    await mkdir(cargoHome, { recursive: true });
    const gateway = gatewayAt("fresh");
    const first = await gateway.provide(await requestFor(project, join(dir, "deps"), cargoHome));
    assert.notEqual(first.generatedLockfile, null);
    const names = first.lockedCrates.map((c) => c.name).sort();
    assert.ok(names.includes("itoa") && names.includes("lock_api") && names.includes("scopeguard"), names.join(","));
    assert.equal(first.cache.hits, 0);
    assert.equal(first.cache.misses, first.lockedCrates.length);
    assert.ok(first.cache.bytesFetched > 0);
    for (const locked of first.lockedCrates) {
      const served = upstream.crates.get(locked.name)?.find((v) => v.version === locked.version);
      assert.equal(locked.checksum, served?.checksum, `${locked.name} checksum is the registry's`);
    }
    assert.match(first.configuration, /local-registry/);
    assert.doesNotMatch(first.configuration, new RegExp(upstream.origin.replace(/[.:/]/g, "\\$&")));
    const test = await cargo(["--config", first.sandboxConfigPath, "test", "--offline"], project, cargoHome);
    assert.equal(test.code, 0, test.stderr);
    assert.match(test.stdout, /test result: ok\. 2 passed/);

    // The same lockfile again: every crate from the cache, nothing downloaded.
    const downloaded = upstream.downloadBytes();
    const requests = upstream.requests.length;
    const second = await gateway.provide(await requestFor(project, join(dir, "deps2"), cargoHome));
    assert.equal(second.generatedLockfile, null);
    assert.equal(second.cache.misses, 0);
    assert.equal(second.cache.bytesFetched, 0);
    assert.equal(second.cache.hits, first.lockedCrates.length);
    assert.equal(upstream.downloadBytes(), downloaded);
    assert.equal(upstream.requests.length, requests, "a warm provide asks the registry nothing");
    assert.equal(second.configurationSha256.length, 64);
  });

  it("uses exactly the versions a Cargo.lock locks", async () => {
    const dir = join(root, "locked");
    const project = await helloProject(dir);
    const cargoHome = join(dir, "home");
    await mkdir(cargoHome, { recursive: true });
    const gateway = gatewayAt("locked");
    const generated = await gateway.provide(await requestFor(project, join(dir, "deps"), cargoHome));
    const lock = generated.generatedLockfile ?? "";
    const provided = await gateway.provide(
      await requestFor(project, join(dir, "deps2"), cargoHome, { lockfile: lock }),
    );
    assert.deepEqual(
      provided.lockedCrates.map((c) => `${c.name}@${c.version}`),
      generated.lockedCrates.map((c) => `${c.name}@${c.version}`),
    );
  });

  it("refuses a crate whose bytes do not match Cargo.lock's checksum and caches nothing of it", async () => {
    const registry = await startSparseRegistry({ crates: ["itoa"] });
    try {
      const dir = join(root, "tampered");
      const project = join(dir, "p");
      await mkdir(join(project, "src"), { recursive: true });
      await writeFile(
        join(project, "Cargo.toml"),
        `[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\nitoa = "1"\n`,
      );
      await writeFile(join(project, "src", "lib.rs"), "");
      const itoa = registry.crates.get("itoa")?.[0];
      assert.ok(itoa !== undefined);
      const lock = `version = 3\n\n[[package]]\nname = "itoa"\nversion = "${itoa.version}"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "${itoa.checksum}"\n\n[[package]]\nname = "p"\nversion = "0.1.0"\ndependencies = ["itoa"]\n`;
      registry.tamper("itoa", itoa.version, new TextEncoder().encode("not the crate"));
      const gateway = new DependencyGateway({
        cacheRoot: join(dir, "cache"),
        cacheMaxBytes: 2 ** 30,
        cratesIoIndex: registry.indexUrl,
        clock,
        retry: { attempts: 1, firstDelayMs: 1 },
      });
      const request = await requestFor(project, join(dir, "deps"), join(dir, "home"), { lockfile: lock });
      await assert.rejects(gateway.provide(request), (error: unknown) => {
        assert.ok(error instanceof GatewayError);
        assert.equal(error.kind, "checksum_mismatch");
        assert.match(error.message, new RegExp(`itoa ${itoa.version}`));
        return true;
      });
      assert.equal(await gateway.cache.lookup("public", itoa.checksum), null);
      assert.equal(await gateway.cache.totalBytes(), 0);
    } finally {
      await registry.close();
    }
  });

  it("names an unknown crate and an unreachable upstream", async () => {
    const dir = join(root, "unknown");
    const project = join(dir, "p");
    await mkdir(join(project, "src"), { recursive: true });
    await writeFile(join(project, "Cargo.toml"), `[package]\nname = "p"\nversion = "0.1.0"\n`);
    const lock = `version = 3\n\n[[package]]\nname = "no-such-crate"\nversion = "1.0.0"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "${"a".repeat(64)}"\n`;
    const gateway = gatewayAt("unknown");
    await assert.rejects(
      gateway.provide(await requestFor(project, join(dir, "deps"), join(dir, "home"), { lockfile: lock })),
      (error: unknown) =>
        error instanceof GatewayError && error.kind === "unknown_crate" && /no-such-crate 1\.0\.0/.test(error.message),
    );
    const unreachable = new DependencyGateway({
      cacheRoot: join(dir, "cache2"),
      cacheMaxBytes: 2 ** 30,
      cratesIoIndex: "sparse+http://127.0.0.1:9/index/",
      clock,
      retry: { attempts: 1, firstDelayMs: 1 },
    });
    await assert.rejects(
      unreachable.provide(await requestFor(project, join(dir, "deps2"), join(dir, "home"), { lockfile: lock })),
      (error: unknown) =>
        error instanceof GatewayError && error.kind === "upstream_unreachable" && error.message.includes("127.0.0.1:9"),
    );
  });

  it("fetches a private registry's crate with the tenant's credential, keeps it in that tenant's scope, and never says the value", async () => {
    const secret = "Bearer kiln-test-private-registry-secret";
    const privateRegistry = await startSparseRegistry({ crates: ["semver"], authorization: secret });
    try {
      const dir = join(root, "private");
      const project = join(dir, "p");
      await mkdir(join(project, "src"), { recursive: true });
      await mkdir(join(project, ".cargo"), { recursive: true });
      await writeFile(
        join(project, ".cargo", "config.toml"),
        `[registries.private]\nindex = "${privateRegistry.indexUrl}"\ncredential-provider = ["/bin/false"]\n`,
      );
      await writeFile(
        join(project, "Cargo.toml"),
        `[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\nsemver = { version = "1", registry = "private" }\n`,
      );
      await writeFile(
        join(project, "src", "lib.rs"),
        "pub fn v() -> semver::Version { semver::Version::new(1, 2, 3) }\n",
      );
      const cargoHome = join(dir, "home");
      await mkdir(cargoHome, { recursive: true });
      const host = new URL(privateRegistry.origin).host;
      const grants: RegistryCredentialGrant[] = [{ registry: host, version: 1, authorization: secret }];
      const logged: string[] = [];
      // A tenant's registry on loopback: reached only because the operator allows it.
      const gateway = gatewayAt("private", { egress: loopbackAllowed(host) });
      const provided = await gateway.provide(
        await requestFor(project, join(dir, "deps"), cargoHome, {
          credentials: async () => grants,
          log: (l) => logged.push(l),
        }),
      );
      const semverCrate = provided.lockedCrates.find((c) => c.name === "semver");
      assert.ok(semverCrate !== undefined);
      assert.equal(semverCrate.source, privateRegistry.indexUrl);
      assert.ok(!provided.configuration.includes(secret));
      assert.ok(!logged.join("\n").includes(secret));
      const build = await cargo(["--config", provided.sandboxConfigPath, "build", "--offline"], project, cargoHome);
      assert.equal(build.code, 0, build.stderr);
      // Cached in the tenant's own scope only: another tenant asking for the same lock misses and must fetch.
      const other = await gateway
        .provide(
          await requestFor(project, join(dir, "deps-other"), cargoHome, {
            tenant: "globex",
            credentials: async () => [],
          }),
        )
        .catch((error: unknown) => error);
      assert.ok(other instanceof GatewayError && other.kind === "upstream_refused", String(other));
      assert.doesNotMatch(String(other), /kiln-test-private-registry-secret/);
    } finally {
      await privateRegistry.close();
    }
  });

  it("provides a git dependency at its locked commit, fetched over https through the egress proxy: a member of an upstream workspace inheriting `workspace = true` (cargo#11192's shape)", async (t) => {
    const tls = await makeTestTls();
    const gitServer = await startGitServer(tls);
    t.after(async () => {
      await gitServer.close();
      await tls.remove();
    });
    const dir = join(root, "git");
    const upstreamRepo = join(dir, "upstream");
    await mkdir(join(upstreamRepo, "gitdep", "src"), { recursive: true });
    await writeFile(
      join(upstreamRepo, "Cargo.toml"),
      `[workspace]\nmembers = ["gitdep"]\nresolver = "2"\n\n[workspace.package]\nversion = "0.3.0"\nedition = "2021"\n\n[workspace.dependencies]\nitoa = "1"\n`,
    );
    await writeFile(
      join(upstreamRepo, "gitdep", "Cargo.toml"),
      `[package]\nname = "gitdep"\nversion.workspace = true\nedition.workspace = true\n\n[dependencies]\nitoa.workspace = true\n`,
    );
    await writeFile(
      join(upstreamRepo, "gitdep", "src", "lib.rs"),
      `pub fn render(n: u32) -> String { itoa::Buffer::new().format(n).to_owned() }\npub const FROM: &str = "first";\n`,
    );
    const git = (args: string[]) =>
      new Promise<string>((resolve, reject) =>
        execFile(
          "git",
          ["-C", upstreamRepo, ...args],
          { env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" } },
          (e, out, err) => (e === null ? resolve(out.trim()) : reject(new Error(err))),
        ),
      );
    await git(["init", "--quiet", "--initial-branch=main"]);
    await git(["add", "."]);
    await git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "first"]);
    const first = await git(["rev-parse", "HEAD"]);
    const url = gitServer.serve("upstream", upstreamRepo);

    const project = join(dir, "p");
    await mkdir(join(project, "src"), { recursive: true });
    await writeFile(
      join(project, "Cargo.toml"),
      `[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\ngitdep = { git = "${url}", branch = "main" }\n`,
    );
    await writeFile(
      join(project, "src", "lib.rs"),
      `#[test]\nfn uses_the_git_dependency() { assert_eq!(gitdep::render(42), "42"); assert_eq!(gitdep::FROM, "first"); }\n`,
    );
    const cargoHome = join(dir, "home");
    await mkdir(cargoHome, { recursive: true });
    const gateway = gatewayAt("git", {
      egress: loopbackAllowed(`127.0.0.1:${gitServer.port}`),
      extraCa: tls.caPem,
    });
    const provided = await gateway.provide(await requestFor(project, join(dir, "deps"), cargoHome));
    assert.deepEqual(provided.gitSources, [{ url, rev: first }]);
    assert.ok(
      gitServer.requests.some((r) => r.url.includes("git-upload-pack")),
      "fetched from the https server",
    );
    assert.ok(provided.lockedCrates.some((c) => c.name === "itoa"));
    assert.match(provided.generatedLockfile ?? "", new RegExp(`#${first}`));

    // Upstream moves on; the lock still names the first commit, and that is what builds.
    await writeFile(
      join(upstreamRepo, "gitdep", "src", "lib.rs"),
      `pub fn render(_: u32) -> String { String::new() }\npub const FROM: &str = "second";\n`,
    );
    await git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "second"]);
    const lock = provided.generatedLockfile ?? "";
    const again = await gateway.provide(
      await requestFor(project, join(dir, "deps2"), join(dir, "home2"), { lockfile: lock }),
    );
    await mkdir(join(dir, "home2"), { recursive: true });
    const test = await cargo(
      ["--config", again.sandboxConfigPath, "test"],
      project,
      join(dir, "home2"),
      again.environment,
    );
    assert.equal(test.code, 0, test.stderr);
    assert.match(test.stdout, /test result: ok\. 1 passed/);
  });

  it("provides a yanked version its Cargo.lock pins, as cargo allows", async () => {
    const registry = await startSparseRegistry({ crates: ["itoa"] });
    try {
      const dir = join(root, "yanked");
      const project = join(dir, "p");
      await mkdir(join(project, "src"), { recursive: true });
      await writeFile(
        join(project, "Cargo.toml"),
        `[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\nitoa = "1"\n`,
      );
      await writeFile(
        join(project, "src", "lib.rs"),
        "pub fn f() -> String { itoa::Buffer::new().format(1u8).to_owned() }\n",
      );
      const itoa = registry.crates.get("itoa")?.[0];
      assert.ok(itoa !== undefined);
      const lock = `version = 3\n\n[[package]]\nname = "itoa"\nversion = "${itoa.version}"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "${itoa.checksum}"\n\n[[package]]\nname = "p"\nversion = "0.1.0"\ndependencies = ["itoa"]\n`;
      await writeFile(join(project, "Cargo.lock"), lock);
      registry.yank("itoa", itoa.version);
      const gateway = new DependencyGateway({
        cacheRoot: join(dir, "cache"),
        cacheMaxBytes: 2 ** 30,
        cratesIoIndex: registry.indexUrl,
        clock,
        retry: { attempts: 1, firstDelayMs: 1 },
      });
      const cargoHome = join(dir, "home");
      await mkdir(cargoHome, { recursive: true });
      const provided = await gateway.provide(await requestFor(project, join(dir, "deps"), cargoHome));
      assert.deepEqual(
        provided.lockedCrates.map((c) => `${c.name}@${c.version}`),
        [`itoa@${itoa.version}`],
      );
      const build = await cargo(["--config", provided.sandboxConfigPath, "build", "--locked"], project, cargoHome);
      assert.equal(build.code, 0, build.stderr);
    } finally {
      await registry.close();
    }
  });
});
