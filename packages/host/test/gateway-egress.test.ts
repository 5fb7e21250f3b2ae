/**
 * The dependency gateway's egress policy, bounds and credentials against real upstreams on
 * loopback (issue 33): the probe's reproductions are refused before anything reaches them, a
 * refusal names the URL and the rule and nothing an upstream sent, downloads are bounded, and a
 * registry credential reaches only the origin it was registered for.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type RegistryCredentialGrant, systemClock } from "@kiln/contract";
import { DependencyGateway, type GatewayEgress, type ProvideRequest } from "../src/gateway/dependency-gateway.js";
import { EgressPolicy, parseGatewayAllow, type Resolver, specialUseOf } from "../src/gateway/egress-policy.js";
import type { FetchBounds } from "../src/gateway/fetch-bounds.js";
import { GatewayError } from "../src/gateway/gateway-error.js";
import { commitRepository } from "../src/testing/git-server.js";
import {
  makeTestTls,
  type RecordingServer,
  startHostileRegistry,
  startRecordingServer,
  type TestTls,
} from "../src/testing/hostile-upstreams.js";
import { sparseIndexPath } from "../src/testing/sparse-registry.js";

// Real time: retries' backoff and idle timeouts run on it (each a few milliseconds here).
const clock = systemClock;
const CHECKSUM = "ab".repeat(32);
const CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index";
/** A marker every hostile upstream puts in what it sends: no refusal may carry it. */
const UPSTREAM_MARKER = "UPSTREAM-SAID-THIS-7c1e";

const noAllowances: GatewayEgress = { allow: [], ownListeners: [], gitSsh: false, loopbackHttpCredentials: false };
const allowing = (entries: string, more: Partial<GatewayEgress> = {}): GatewayEgress => ({
  ...noAllowances,
  allow: parseGatewayAllow(entries),
  ...more,
});

/** A Cargo.lock of one package `p` depending on the given locked packages. */
function lockOf(packages: readonly { name: string; version?: string; source: string; checksum?: string | null }[]) {
  const blocks = packages.map(
    (p) =>
      `[[package]]\nname = "${p.name}"\nversion = "${p.version ?? "1.0.0"}"\nsource = "${p.source}"\n${p.checksum === null ? "" : `checksum = "${p.checksum ?? CHECKSUM}"\n`}`,
  );
  return `version = 3\n\n${blocks.join("\n")}\n[[package]]\nname = "p"\nversion = "0.1.0"\ndependencies = [${packages.map((p) => `"${p.name}"`).join(", ")}]\n`;
}

describe("the dependency gateway's egress policy", () => {
  let root: string;
  let cratesIo: RecordingServer & { indexUrl: string };

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "kiln-gateway-egress-"));
    // The operator's crates.io stand-in: trusted wherever it points; serves `victim` honestly.
    cratesIo = await startHostileRegistry({
      crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
      download: { kind: "huge", bytes: 16, announced: true },
    });
  });
  after(async () => {
    await cratesIo.close();
    await rm(root, { recursive: true, force: true });
  });

  let cases = 0;
  /** A workspace of its own, the gateway configured as `config` says, and the request to provide it. */
  const setUp = async (options: {
    files?: Record<string, string>;
    lock?: string | null;
    cratesIoIndex?: string;
    egress?: GatewayEgress;
    bounds?: Partial<FetchBounds>;
    resolver?: Resolver;
    extraCa?: string;
    retry?: { attempts: number; firstDelayMs: number };
    request?: Partial<ProvideRequest>;
  }) => {
    const dir = join(root, `case-${++cases}`);
    const workspace = join(dir, "src");
    const files: Record<string, string> = {
      "Cargo.toml": `[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n`,
      ...options.files,
    };
    for (const [path, text] of Object.entries(files)) {
      await mkdir(join(workspace, path, ".."), { recursive: true });
      await writeFile(join(workspace, path), text);
    }
    const gateway = new DependencyGateway({
      cacheRoot: join(dir, "cache"),
      cacheMaxBytes: 2 ** 30,
      cratesIoIndex: options.cratesIoIndex ?? cratesIo.indexUrl,
      clock,
      retry: options.retry ?? { attempts: 1, firstDelayMs: 1 },
      egress: options.egress ?? noAllowances,
      ...(options.bounds === undefined ? {} : { bounds: options.bounds }),
      ...(options.resolver === undefined ? {} : { resolver: options.resolver }),
      ...(options.extraCa === undefined ? {} : { extraCa: options.extraCa }),
    });
    const logged: string[] = [];
    const request: ProvideRequest = {
      tenant: "acme",
      attemptId: `job-${cases}-a1`,
      workspaceDir: workspace,
      lockfile: options.lock === undefined ? null : options.lock,
      manifestPaths: Object.keys(files).filter((p) => p.endsWith("Cargo.toml")),
      depsDir: join(dir, "deps"),
      sandboxDepsDir: join(dir, "deps"),
      credentials: async () => [],
      generateLockfile: async () => {
        throw new Error("the gateway must refuse before it needs a lockfile");
      },
      log: (line) => logged.push(line),
      signal: new AbortController().signal,
      ...options.request,
    };
    return { gateway, request, dir, logged };
  };

  /** The gateway's refusal of `request` (it must refuse), as a GatewayError. */
  const refusal = async (setup: { gateway: DependencyGateway; request: ProvideRequest }): Promise<GatewayError> => {
    const outcome = await setup.gateway.provide(setup.request).then(
      () => null,
      (error: unknown) => error,
    );
    assert.ok(outcome instanceof GatewayError, `expected the gateway to refuse, got ${String(outcome)}`);
    assert.doesNotMatch(outcome.message, new RegExp(UPSTREAM_MARKER), "the refusal carries what an upstream sent");
    return outcome;
  };

  /** A workspace naming `index` as its private registry `evil`, its lock taking `victim` from it. */
  const tenantRegistry = (index: string) => ({
    files: { ".cargo/config.toml": `[registries.evil]\nindex = "${index}"\n` },
    lock: lockOf([{ name: "victim", source: index }]),
  });

  describe("addresses and URLs", () => {
    it("classifies special-use addresses, embedded IPv4 included, and leaves public ones alone", () => {
      const expected: Record<string, string | null> = {
        "127.0.0.1": "a loopback address",
        "127.9.9.9": "a loopback address",
        "::1": "a loopback address",
        "::ffff:127.0.0.1": "a loopback address",
        "64:ff9b::7f00:1": "a loopback address",
        "2002:7f00:1::": "a loopback address",
        "0.0.0.0": "an unspecified address",
        "::": "an unspecified address",
        "169.254.169.254": "a link-local address",
        "fe80::1": "a link-local address",
        "10.1.2.3": "a private address",
        "172.16.9.1": "a private address",
        "192.168.1.1": "a private address",
        "100.64.0.1": "a private address",
        "fd00::2": "a private address",
        "::ffff:10.0.0.1": "a private address",
        "224.0.0.1": "a multicast address",
        "255.255.255.255": "a reserved address",
        "192.0.2.2": "a reserved address",
        "1.1.1.1": null,
        "151.101.2.137": null,
        "2606:4700::1111": null,
      };
      for (const [address, rule] of Object.entries(expected)) assert.equal(specialUseOf(address), rule, address);
    });

    it("reads KILN_GATEWAY_ALLOW's hosts, addresses, networks and ports, and refuses what is none of them", () => {
      const entries = parseGatewayAllow(
        "registry.corp.example, 10.0.0.0/8 127.0.0.1:7000 [::1]:8443 fd00::/8 git.corp:22",
      );
      assert.deepEqual(
        entries.map((e) => [e.host, e.network?.address ?? null, e.network?.prefix ?? null, e.port]),
        [
          ["registry.corp.example", null, null, null],
          [null, "10.0.0.0", 8, null],
          [null, "127.0.0.1", 32, 7000],
          [null, "::1", 128, 8443],
          [null, "fd00::", 8, null],
          ["git.corp", null, null, 22],
        ],
      );
      for (const bad of ["10.0.0.0/33", "host:99999", "http://x", "a b/c", "/8"]) {
        assert.throws(() => parseGatewayAllow(bad), /KILN_GATEWAY_ALLOW/, bad);
      }
    });

    it("a host KILN_GATEWAY_ALLOW names is reached at whatever it resolves to; an entry with a port allows that port only; kiln's own listener never", async () => {
      const resolver: Resolver = async () => [{ address: "10.1.2.3", family: 4 }];
      const policy = (allow: string, ownListeners: { host: string; port: number }[] = []) =>
        new EgressPolicy({ ...allowing(allow, { ownListeners }), trustedOrigins: [] }, resolver);
      const url = new URL("https://registry.corp.example/index/");
      assert.deepEqual(await policy("registry.corp.example").addressesFor(url, "x"), [
        { address: "10.1.2.3", family: 4 },
      ]);
      await assert.rejects(policy("other.corp.example").addressesFor(url, "x"), /resolves to a private address/);
      await assert.rejects(
        policy("registry.corp.example:8443").addressesFor(url, "x"),
        /resolves to a private address/,
      );
      assert.equal((await policy("10.0.0.0/8").addressesFor(url, "x")).length, 1);
      await assert.rejects(
        policy("registry.corp.example", [{ host: "10.1.2.3", port: 443 }]).addressesFor(url, "x"),
        /resolves to one of kiln's own listeners/,
      );
      const byPort = new URL("https://127.0.0.1:7000/");
      assert.equal((await policy("127.0.0.1:7000").addressesFor(byPort, "x")).length, 1);
      await assert.rejects(policy("127.0.0.1:7000").addressesFor(new URL("https://127.0.0.1:7001/"), "x"), /loopback/);
    });

    it("refuses every URL a workspace may not use, naming it and the rule", () => {
      const policy = new EgressPolicy({ ...noAllowances, trustedOrigins: [cratesIo.indexUrl] });
      const refused: [string, "registry" | "git", RegExp][] = [
        ["file:///srv/repo", "git", /https only \(file is never used/],
        ["/srv/repo", "git", /must be an https:\/\/ URL \(never a local path/],
        ["../repo", "git", /must be an https:\/\/ URL/],
        ["fd::17", "git", /https only \(fd is never used/],
        ["ext::sh -c touch% /tmp/pwned", "git", /https only \(ext is never used/],
        ["ssh://git@example.com/repo", "git", /ssh is not enabled/],
        ["http://example.com/repo", "git", /https only/],
        ["git://example.com/repo", "git", /https only/],
        ["https://127.0.0.1/repo", "git", /127\.0\.0\.1 is a loopback address/],
        ["https://[::ffff:169.254.169.254]/repo", "git", /link-local/],
        ["http://example.com/index/", "registry", /https only \(plain http only to a host KILN_GATEWAY_ALLOW names\)/],
        ["data:text/plain,x", "registry", /https only \(data is never used/],
        ["ftp://example.com/", "registry", /https only \(ftp is never used/],
        ["https://user:pass@example.com/", "registry", /may not carry credentials/],
        ["https://10.0.0.5/", "registry", /10\.0\.0\.5 is a private address/],
      ];
      for (const [url, purpose, rule] of refused) {
        assert.throws(
          () => policy.checkUrl(url, purpose, "the dependency"),
          (error: unknown) => {
            assert.ok(error instanceof GatewayError && error.kind === "egress_refused", String(error));
            assert.match(error.message, rule, url);
            assert.ok(!error.message.includes("pass@"), "a URL's credentials are never repeated");
            return true;
          },
        );
      }
      assert.equal(policy.checkUrl("https://example.com/index/", "registry", "x").host, "example.com");
      // The operator's own upstream is reached wherever it points.
      assert.equal(
        policy.checkUrl(`${cratesIo.origin}/index/config.json`, "registry", "x").port,
        String(cratesIo.port),
      );
    });
  });

  describe("the probe's reproductions are refused, and the upstream named receives nothing", () => {
    let recorder: RecordingServer;
    before(async () => {
      recorder = await startRecordingServer((_req, res) => res.writeHead(200).end(UPSTREAM_MARKER));
    });
    after(async () => recorder.close());

    it("a tenant's registry on loopback, over http and over https", async () => {
      const http = await refusal(await setUp(tenantRegistry(`sparse+${recorder.origin}/index/`)));
      assert.equal(http.kind, "egress_refused");
      assert.ok(http.message.includes(`${recorder.origin}/index/`), http.message);
      assert.match(
        http.message,
        /registries are reached over https only \(plain http only to a host KILN_GATEWAY_ALLOW names\)/,
      );
      const https = await refusal(await setUp(tenantRegistry(`sparse+https://127.0.0.1:${recorder.port}/index/`)));
      assert.match(
        https.message,
        /127\.0\.0\.1 is a loopback address, which the dependency gateway reaches only where an operator allows it \(KILN_GATEWAY_ALLOW\)/,
      );
      assert.equal(recorder.connections(), 0);
    });

    it("a tenant's registry on a link-local address (a cloud's metadata service)", async () => {
      const error = await refusal(await setUp(tenantRegistry("sparse+http://169.254.169.254/latest/")));
      assert.match(
        error.message,
        /http:\/\/169\.254\.169\.254\/latest\/.* is refused: registries are reached over https only/,
      );
      const https = await refusal(await setUp(tenantRegistry("sparse+https://169.254.169.254/latest/")));
      assert.match(https.message, /169\.254\.169\.254 is a link-local address/);
    });

    it("kiln's own listener, even where the operator allows loopback", async () => {
      const own = allowing("127.0.0.1", { ownListeners: [{ host: "127.0.0.1", port: recorder.port }] });
      const error = await refusal(await setUp({ ...tenantRegistry(`sparse+${recorder.origin}/index/`), egress: own }));
      assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${recorder.port} is one of kiln's own listeners`));
      const anywhere = allowing("127.0.0.1", { ownListeners: [{ host: "0.0.0.0", port: recorder.port }] });
      await refusal(await setUp({ ...tenantRegistry(`sparse+${recorder.origin}/index/`), egress: anywhere }));
      assert.equal(recorder.connections(), 0);
    });

    it("a DNS name resolving to loopback: localhost, and a name a resolver answers with 127.0.0.1", async () => {
      const viaHosts = await refusal(await setUp(tenantRegistry(`sparse+https://localhost:${recorder.port}/index/`)));
      assert.match(viaHosts.message, /localhost resolves to a loopback address/);
      // Any name: the policy resolves it for the connection, and the socket connects only to
      // an address it checked (there is no second lookup for an answer to change in).
      const setup = await setUp({
        ...tenantRegistry(`sparse+https://registry.rebind.test:${recorder.port}/index/`),
        resolver: async () => [{ address: "127.0.0.1", family: 4 }],
      });
      const rebound = await refusal(setup);
      assert.match(rebound.message, /registry\.rebind\.test resolves to a loopback address/);
      // The rule, never the address: a tenant's names must not read the host's DNS.
      assert.doesNotMatch(rebound.message, /127\.0\.0\.1/);
      assert.equal(recorder.connections(), 0);
    });

    it("a redirect into loopback, from the operator's own upstream and from its `dl`", async () => {
      const redirecting = await startHostileRegistry({
        crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
        download: { kind: "redirect", location: `https://127.0.0.1:${recorder.port}/secret?${UPSTREAM_MARKER}` },
      });
      const pointing = await startHostileRegistry({
        crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
        download: { kind: "never" },
        dl: () => `https://localhost:${recorder.port}/api`,
      });
      try {
        const redirected = await refusal(
          await setUp({ cratesIoIndex: redirecting.indexUrl, lock: lockOf([{ name: "victim", source: CRATES_IO }]) }),
        );
        assert.match(
          redirected.message,
          /a redirect to https:\/\/127\.0\.0\.1:\d+ is refused: 127\.0\.0\.1 is a loopback address/,
        );
        assert.ok(
          redirecting.requests.some((r) => r.url.startsWith("/dl")),
          "the upstream was asked and redirected",
        );
        const dl = await refusal(
          await setUp({ cratesIoIndex: pointing.indexUrl, lock: lockOf([{ name: "victim", source: CRATES_IO }]) }),
        );
        assert.match(dl.message, /https:\/\/localhost:\d+ is refused: localhost resolves to a loopback address/);
        assert.equal(recorder.connections(), 0);
      } finally {
        await redirecting.close();
        await pointing.close();
      }
    });

    it("git dependencies that are not https URLs, and https ones on loopback: the host's repository is never mirrored", async () => {
      const hostRepo = join(root, "host-repo");
      const head = commitRepository(hostRepo, { "secret.txt": `${UPSTREAM_MARKER}\n` });
      const urls = [
        `file://${hostRepo}`,
        hostRepo,
        "fd::17",
        `ext::sh -c touch% ${join(root, "ext-ran")}`,
        `https://127.0.0.1:${recorder.port}/repo.git`,
        `https://localhost:${recorder.port}/repo.git`,
      ];
      for (const url of urls) {
        // Named in a manifest (no lockfile yet), and locked in a Cargo.lock.
        const named = await setUp({
          files: {
            "Cargo.toml": `[package]\nname = "p"\nversion = "0.1.0"\n[dependencies]\nd = { git = ${JSON.stringify(url)} }\n`,
          },
        });
        const fromManifest = await refusal(named);
        assert.equal(fromManifest.kind, "egress_refused", `${url}: ${fromManifest.message}`);
        assert.match(fromManifest.message, /https|loopback/, url);
        const locked = await setUp({
          lock: lockOf([{ name: "d", source: `git+${url}#${head}`, checksum: null }]),
        });
        if (!URL.canParse(url)) continue; // cargo locks only URLs
        const fromLock = await refusal(locked);
        assert.equal(fromLock.kind, "egress_refused", `${url}: ${fromLock.message}`);
        for (const dir of [named.dir, locked.dir]) {
          assert.deepEqual(
            await readdir(join(dir, "cache", "git")).catch(() => []),
            [],
            `${url}: something was mirrored`,
          );
        }
      }
      assert.equal(recorder.connections(), 0);
      assert.equal(existsSync(join(root, "ext-ran")), false, "ext:: ran a command");
    });
  });

  describe("git's own connections go through the policy", () => {
    let tls: TestTls;
    let target: RecordingServer;
    let redirector: RecordingServer;
    before(async () => {
      tls = await makeTestTls();
      target = await startRecordingServer((_req, res) => res.writeHead(200).end(UPSTREAM_MARKER), { tls });
      redirector = await startRecordingServer(
        (req, res) => res.writeHead(302, { location: `${target.origin}${req.url}` }).end(UPSTREAM_MARKER),
        { tls },
      );
    });
    after(async () => {
      await target.close();
      await redirector.close();
      await tls.remove();
    });

    it("a git server the operator allows that redirects into loopback: git follows, the proxy refuses, the target receives nothing", async () => {
      const url = `${redirector.origin}/repo.git`;
      const error = await refusal(
        await setUp({
          files: { "Cargo.toml": `[package]\nname = "p"\nversion = "0.1.0"\n[dependencies]\nd = { git = "${url}" }\n` },
          egress: allowing(`127.0.0.1:${redirector.port}`),
          extraCa: tls.caPem,
        }),
      );
      assert.equal(error.kind, "egress_refused", error.message);
      assert.match(error.message, /127\.0\.0\.1 is a loopback address/);
      assert.ok(redirector.requests.length > 0, "the allowed server was asked");
      assert.equal(target.connections(), 0);
    });

    it("a name that resolves to loopback, asked by git itself, is refused by the proxy", async () => {
      const url = `https://registry.rebind.test:${target.port}/repo.git`;
      const error = await refusal(
        await setUp({
          files: { "Cargo.toml": `[package]\nname = "p"\nversion = "0.1.0"\n[dependencies]\nd = { git = "${url}" }\n` },
          resolver: async () => [{ address: "127.0.0.1", family: 4 }],
          extraCa: tls.caPem,
        }),
      );
      assert.match(error.message, /registry\.rebind\.test resolves to a loopback address/);
      assert.equal(target.connections(), 0);
    });
  });

  describe("git's connections under DNS rebinding, and over ssh where the operator allows it", () => {
    it("a name that answers a public address to the first lookup and loopback to the next: the proxy's own lookup refuses it", async () => {
      const target = await startRecordingServer();
      try {
        let lookups = 0;
        const url = `https://rebinding.test:${target.port}/repo.git`;
        const error = await refusal(
          await setUp({
            files: {
              "Cargo.toml": `[package]\nname = "p"\nversion = "0.1.0"\n[dependencies]\nd = { git = "${url}" }\n`,
            },
            resolver: async () => [{ address: lookups++ === 0 ? "93.184.215.14" : "127.0.0.1", family: 4 }],
          }),
        );
        assert.ok(lookups >= 2, "the proxy resolved the name itself, after the first check");
        assert.match(error.message, /rebinding\.test resolves to a loopback address/);
        assert.equal(target.connections(), 0);
      } finally {
        await target.close();
      }
    });

    it("ssh is refused unless allowed; allowed, ssh's own connection goes through the proxy to the checked address", async () => {
      const { createServer } = await import("node:net");
      const received: Buffer[] = [];
      let connections = 0;
      const sshd = createServer((socket) => {
        connections++;
        socket.on("data", (chunk) => {
          received.push(chunk);
          socket.destroy();
        });
      });
      await new Promise<void>((resolve) => sshd.listen(0, "127.0.0.1", resolve));
      const port = (sshd.address() as import("node:net").AddressInfo).port;
      const url = `ssh://git@127.0.0.1:${port}/repo.git`;
      const manifest = {
        "Cargo.toml": `[package]\nname = "p"\nversion = "0.1.0"\n[dependencies]\nd = { git = "${url}" }\n`,
      };
      try {
        const off = await refusal(await setUp({ files: manifest, egress: allowing(`127.0.0.1:${port}`) }));
        assert.match(off.message, /git over ssh is not enabled on this host \(KILN_GATEWAY_GIT_SSH\)/);
        const notAllowed = await refusal(await setUp({ files: manifest, egress: { ...noAllowances, gitSsh: true } }));
        assert.match(notAllowed.message, /127\.0\.0\.1 is a loopback address/);
        assert.equal(connections, 0);
        // Allowed: ssh reaches the listener through the proxy (and fails there: it is no ssh server).
        await refusal(await setUp({ files: manifest, egress: allowing(`127.0.0.1:${port}`, { gitSsh: true }) }));
        assert.ok(connections > 0, "ssh connected through the proxy");
        assert.match(Buffer.concat(received).toString("latin1"), /^SSH-2\.0-/);
      } finally {
        await new Promise<void>((resolve) => sshd.close(() => resolve()));
      }
    });
  });

  describe("bounds: nothing of an upstream's size is held, and every wait ends", () => {
    it("a gzip bomb is refused as sent (2 MB), never decoded, naming the bound", async () => {
      const bomb = await startHostileRegistry({
        crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
        download: { kind: "gzip-bomb" },
      });
      try {
        const error = await refusal(
          await setUp({ cratesIoIndex: bomb.indexUrl, lock: lockOf([{ name: "victim", source: CRATES_IO }]) }),
        );
        assert.equal(error.kind, "upstream_refused");
        assert.match(
          error.message,
          /sent a gzip-encoded body .* never decodes a body \(it takes at most 64 MiB, the bound on one crate, as sent\)/,
        );
      } finally {
        await bomb.close();
      }
    });

    it("a 1.5 GiB download is refused at the crate's bound, announced or not", async () => {
      for (const announced of [true, false]) {
        const huge = await startHostileRegistry({
          crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
          download: { kind: "huge", bytes: 1.5 * 2 ** 30, announced },
        });
        try {
          const setup = await setUp({
            cratesIoIndex: huge.indexUrl,
            lock: lockOf([{ name: "victim", source: CRATES_IO }]),
          });
          const error = await refusal(setup);
          assert.equal(error.kind, "too_large");
          assert.match(error.message, /victim 1\.0\.0 .* is larger than 64 MiB, the bound on one crate/);
          assert.deepEqual(
            await readdir(join(setup.dir, "cache", "public")).then(
              async (dirs) =>
                (await Promise.all(dirs.map((d) => readdir(join(setup.dir, "cache", "public", d))))).flat(),
              () => [],
            ),
            [],
            "nothing of it stayed in the cache",
          );
        } finally {
          await huge.close();
        }
      }
    });

    it("the job's byte budget counts everything it fetches", async () => {
      const big = await startHostileRegistry({
        crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
        download: { kind: "huge", bytes: 3 * 2 ** 20, announced: false },
      });
      try {
        const error = await refusal(
          await setUp({
            cratesIoIndex: big.indexUrl,
            lock: lockOf([{ name: "victim", source: CRATES_IO }]),
            bounds: { jobBytes: 2 ** 20 },
          }),
        );
        assert.equal(error.kind, "too_large");
        assert.match(
          error.message,
          /the job's dependencies exceed the 1 MiB the dependency gateway fetches for one job/,
        );
      } finally {
        await big.close();
      }
    });

    it("index lines and config.json are bounded and never quoted", async () => {
      const serve = (body: (path: string) => string | null) =>
        startRecordingServer((req: IncomingMessage, res: ServerResponse, origin) => {
          const text = body(new URL(req.url ?? "/", origin).pathname);
          if (text === null) res.writeHead(404).end();
          else res.writeHead(200).end(text);
        });
      const notJson = await serve((path) =>
        path === `/index/${sparseIndexPath("victim")}` ? `<html>${UPSTREAM_MARKER}</html>\n` : `{"dl":"x"}`,
      );
      const badConfig = await serve((path) =>
        path === "/index/config.json"
          ? `${UPSTREAM_MARKER} not json`
          : path === `/index/${sparseIndexPath("victim")}`
            ? `${JSON.stringify({ name: "victim", vers: "1.0.0", deps: [], cksum: CHECKSUM })}\n`
            : null,
      );
      const longLine = await serve((path) =>
        path === `/index/${sparseIndexPath("victim")}` ? `{"name":"victim","x":"${"y".repeat(4096)}"}\n` : null,
      );
      try {
        const lock = lockOf([{ name: "victim", source: CRATES_IO, checksum: null }]);
        const a = await refusal(await setUp({ cratesIoIndex: `sparse+${notJson.origin}/index/`, lock }));
        assert.match(a.message, /line 1 is not JSON$/);
        const withSum = lockOf([{ name: "victim", source: CRATES_IO }]);
        const b = await refusal(await setUp({ cratesIoIndex: `sparse+${badConfig.origin}/index/`, lock: withSum }));
        assert.match(b.message, /config\.json is not JSON$/);
        const c = await refusal(
          await setUp({ cratesIoIndex: `sparse+${longLine.origin}/index/`, lock, bounds: { indexLineBytes: 1024 } }),
        );
        assert.match(c.message, /line 1 is longer than 1 KiB, the bound on one index line/);
      } finally {
        await notJson.close();
        await badConfig.close();
        await longLine.close();
      }
    });

    it("an upstream that never answers is given up after the idle timeout, retried as the policy says", async () => {
      const silent = await startHostileRegistry({
        crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
        download: { kind: "never" },
      });
      try {
        const error = await refusal(
          await setUp({
            cratesIoIndex: silent.indexUrl,
            lock: lockOf([{ name: "victim", source: CRATES_IO }]),
            bounds: { idleTimeoutMs: 200 },
            retry: { attempts: 2, firstDelayMs: 0 },
          }),
        );
        assert.equal(error.kind, "timed_out");
        assert.match(error.message, /timed out \(nothing for 0\.2 s\) \(2 tries\)/);
        assert.equal(silent.requests.filter((r) => r.url.startsWith("/dl")).length, 2);
      } finally {
        await silent.close();
      }
    });

    it("an abort ends a fetch at once, and nothing is retried after it", async () => {
      const silent = await startHostileRegistry({
        crate: { name: "victim", version: "1.0.0", checksum: CHECKSUM },
        download: { kind: "never" },
      });
      try {
        const abort = new AbortController();
        const setup = await setUp({
          cratesIoIndex: silent.indexUrl,
          lock: lockOf([{ name: "victim", source: CRATES_IO }]),
          retry: { attempts: 4, firstDelayMs: 1 },
          request: { signal: abort.signal },
        });
        const providing = setup.gateway.provide(setup.request);
        while (!silent.requests.some((r) => r.url.startsWith("/dl"))) await new Promise((r) => setTimeout(r, 10));
        abort.abort(new Error("cancelled by the test"));
        await assert.rejects(providing, /cancelled by the test/);
        // Retries would come within milliseconds (firstDelayMs 1); give them ten times that and more.
        await new Promise((r) => setTimeout(r, 200));
        assert.equal(silent.requests.filter((r) => r.url.startsWith("/dl")).length, 1);
      } finally {
        await silent.close();
      }
    });
  });

  describe("a registry credential reaches only the origin it was registered for", () => {
    const secret = `Bearer ${UPSTREAM_MARKER}-credential`;
    /** A private registry requiring the credential, whose config.json and downloads are shaped by the test. */
    const privateRegistry = (answer: (path: string, origin: string, res: ServerResponse) => boolean, tls?: TestTls) =>
      startRecordingServer(
        (req, res, origin) => {
          const path = new URL(req.url ?? "/", origin).pathname;
          if (req.headers.authorization !== secret) {
            res.writeHead(401, { "www-authenticate": "Cargo" }).end();
            return;
          }
          if (answer(path, origin, res)) return;
          if (path === `/index/${sparseIndexPath("victim")}`) {
            res.writeHead(200).end(`${JSON.stringify({ name: "victim", vers: "1.0.0", deps: [], cksum: CHECKSUM })}\n`);
            return;
          }
          res.writeHead(404).end();
        },
        tls === undefined ? {} : { tls },
      );
    const grantFor = (server: RecordingServer): RegistryCredentialGrant[] => [
      { registry: new URL(server.origin).host, version: 1, authorization: secret },
    ];
    const presented = (server: RecordingServer) => server.requests.filter((r) => r.headers.authorization !== undefined);

    it("not to a `dl` on another origin", async () => {
      const elsewhere = await startRecordingServer();
      const registry = await privateRegistry((path, _origin, res) => {
        if (path !== "/index/config.json") return false;
        res.writeHead(200).end(JSON.stringify({ dl: `${elsewhere.origin}/dl`, "auth-required": true }));
        return true;
      });
      try {
        const index = `sparse+${registry.origin}/index/`;
        const error = await refusal(
          await setUp({
            ...tenantRegistry(index),
            egress: allowing("127.0.0.1", { loopbackHttpCredentials: true }),
            request: { credentials: async () => grantFor(registry) },
          }),
        );
        assert.equal(error.kind, "unknown_crate", error.message);
        assert.ok(presented(registry).length > 0, "the registry itself was given the credential");
        assert.ok(elsewhere.requests.length > 0, "the download was asked for at the other origin");
        assert.deepEqual(presented(elsewhere), [], "the other origin was given the credential");
      } finally {
        await registry.close();
        await elsewhere.close();
      }
    });

    it("not to a config.json reached through a cross-origin redirect, nor to the `dl` it names", async () => {
      const elsewhere = await startRecordingServer((req, res, origin) => {
        if (new URL(req.url ?? "/", origin).pathname === "/config.json") {
          res.writeHead(200).end(JSON.stringify({ dl: `${origin}/dl` }));
        } else res.writeHead(404).end();
      });
      const registry = await privateRegistry((path, _origin, res) => {
        if (path !== "/index/config.json") return false;
        res.writeHead(302, { location: `${elsewhere.origin}/config.json` }).end();
        return true;
      });
      try {
        await refusal(
          await setUp({
            ...tenantRegistry(`sparse+${registry.origin}/index/`),
            egress: allowing("127.0.0.1", { loopbackHttpCredentials: true }),
            request: { credentials: async () => grantFor(registry) },
          }),
        );
        assert.ok(
          elsewhere.requests.some((r) => r.url === "/config.json"),
          "the redirect was followed",
        );
        assert.ok(
          elsewhere.requests.some((r) => r.url.startsWith("/dl")),
          "the dl it names was asked",
        );
        assert.deepEqual(presented(elsewhere), []);
      } finally {
        await registry.close();
        await elsewhere.close();
      }
    });

    it("not over plain http (loopback only where the operator allows it), and not to another port of its host", async () => {
      const registry = await privateRegistry(() => false);
      const otherPort = await startRecordingServer();
      try {
        const index = `sparse+${registry.origin}/index/`;
        const error = await refusal(
          await setUp({
            ...tenantRegistry(index),
            egress: allowing("127.0.0.1"),
            request: { credentials: async () => grantFor(registry) },
          }),
        );
        assert.equal(error.kind, "egress_refused");
        assert.match(
          error.message,
          /the tenant's registry credential for 127\.0\.0\.1:\d+ is presented over https only \(not http\)/,
        );
        assert.equal(registry.connections(), 0);
        // Registered for one port, asked at another: not presented there.
        await refusal(
          await setUp({
            ...tenantRegistry(`sparse+${otherPort.origin}/index/`),
            egress: allowing("127.0.0.1", { loopbackHttpCredentials: true }),
            request: { credentials: async () => grantFor(registry) },
          }),
        );
        assert.ok(otherPort.requests.length > 0);
        assert.deepEqual(presented(otherPort), []);
      } finally {
        await registry.close();
        await otherPort.close();
      }
    });

    it("over https to its own origin, and not across a redirect to another https origin", async () => {
      const tls = await makeTestTls();
      const elsewhere = await startRecordingServer(undefined, { tls });
      const registry = await privateRegistry((path, _origin, res) => {
        if (path !== `/index/${sparseIndexPath("victim")}`) return false;
        res.writeHead(307, { location: `${elsewhere.origin}${path}` }).end();
        return true;
      }, tls);
      try {
        const error = await refusal(
          await setUp({
            ...tenantRegistry(`sparse+${registry.origin}/index/`),
            egress: allowing("127.0.0.1"),
            extraCa: tls.caPem,
            request: {
              credentials: async () => grantFor(registry),
              lockfile: lockOf([{ name: "victim", source: `sparse+${registry.origin}/index/`, checksum: null }]),
            },
          }),
        );
        assert.equal(error.kind, "unknown_crate", error.message);
        assert.ok(presented(registry).length > 0, "presented over https to its origin");
        assert.ok(elsewhere.requests.length > 0, "the redirect was followed");
        assert.deepEqual(presented(elsewhere), []);
      } finally {
        await registry.close();
        await elsewhere.close();
        await tls.remove();
      }
    });
  });
});
