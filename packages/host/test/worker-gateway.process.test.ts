/**
 * The dependency gateway as the host agent runs it: in a worker process per attempt
 * (worker-gateway.ts). Its answers are the gateway's; an abort ends the worker and everything it
 * started at once, and nothing is retried after.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { ProvideRequest } from "../src/gateway/dependency-gateway.js";
import { GatewayError } from "../src/gateway/gateway-error.js";
import { WorkerGateway } from "../src/gateway/worker-gateway.js";
import { startHostileRegistry } from "../src/testing/hostile-upstreams.js";
import { type SparseRegistry, startSparseRegistry } from "../src/testing/sparse-registry.js";

const CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index";

/** Processes whose command line holds `marker` (the worker carries its attempt's id). */
async function processesCarrying(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmdline = await readFile(join("/proc", entry, "cmdline"), "utf8").catch(() => "");
    if (cmdline.includes(marker)) found.push(Number(entry));
  }
  return found;
}

describe("the dependency gateway in a worker process", () => {
  let upstream: SparseRegistry;
  let root: string;
  let attempts = 0;

  before(async () => {
    upstream = await startSparseRegistry({ crates: ["itoa"] });
    root = await mkdtemp(join(tmpdir(), "kiln-worker-gateway-"));
  });
  after(async () => {
    await upstream.close();
    await rm(root, { recursive: true, force: true });
  });

  const gateways: WorkerGateway[] = [];
  after(() => {
    for (const gateway of gateways) gateway.close();
  });
  const gatewayFor = (cratesIoIndex: string, cacheMaxBytes = 2 ** 30) => {
    const gateway = new WorkerGateway({
      config: {
        cacheRoot: join(root, "cache"),
        cacheMaxBytes,
        cratesIoIndex,
        retry: { attempts: 4, firstDelayMs: 1 },
      },
      // Tests run without a cgroup of their own for the worker (the host's cgroups are the sandbox tests').
      cgroupParentName: null,
    });
    gateways.push(gateway);
    return gateway;
  };

  const requestFor = async (lock: string | null, over: Partial<ProvideRequest> = {}): Promise<ProvideRequest> => {
    const dir = join(root, `attempt-${++attempts}`);
    await mkdir(join(dir, "src", "src"), { recursive: true });
    await writeFile(
      join(dir, "src", "Cargo.toml"),
      `[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\nitoa = "1"\n`,
    );
    await writeFile(join(dir, "src", "src", "lib.rs"), "");
    return {
      tenant: "acme",
      attemptId: `kiln-worker-test-${process.pid}-${attempts}`,
      workspaceDir: join(dir, "src"),
      lockfile: lock,
      manifestPaths: ["Cargo.toml"],
      depsDir: join(dir, "deps"),
      sandboxDepsDir: join(dir, "deps"),
      credentials: async () => [],
      generateLockfile: async () => {
        throw new Error("no lockfile is generated here");
      },
      log: () => {},
      signal: new AbortController().signal,
      ...over,
    };
  };

  it("provides a lock's crates as the gateway does, asks the agent for a lockfile when there is none, and leaves no process behind", async () => {
    const gateway = gatewayFor(upstream.indexUrl);
    const logged: string[] = [];
    const cargoHome = join(root, "cargo-home");
    await mkdir(cargoHome, { recursive: true });
    const request = await requestFor(null, {
      log: (line) => logged.push(line),
      // What the agent does in the sandbox; here cargo on the host against the gateway's index.
      generateLockfile: async (config, environment) => {
        const workspace = request.workspaceDir;
        await new Promise<void>((resolve, reject) =>
          execFile(
            "cargo",
            ["--config", config, "generate-lockfile"],
            { cwd: workspace, env: { ...process.env, ...environment, CARGO_HOME: cargoHome } },
            (error, _out, stderr) => (error === null ? resolve() : reject(new Error(stderr))),
          ),
        );
        return readFile(join(workspace, "Cargo.lock"), "utf8");
      },
    });
    const provided = await gateway.provide(request);
    assert.notEqual(provided.generatedLockfile, null);
    const itoa = upstream.crates.get("itoa")?.[0];
    assert.deepEqual(
      provided.lockedCrates.map((c) => [c.name, c.version, c.checksum]),
      [["itoa", itoa?.version, itoa?.checksum]],
    );
    assert.equal(provided.cache.misses, 1);
    assert.ok(
      logged.some((l) => /no Cargo\.lock/.test(l)),
      logged.join("\n"),
    );
    // The agent accounts what the worker stored in the shared cache.
    assert.equal(await gateway.cache.totalBytes(), itoa?.bytes);
    assert.deepEqual(await processesCarrying(request.attemptId), []);

    // The same lock again, in a new worker: from the cache the first worker filled.
    const again = await gateway.provide(await requestFor(provided.generatedLockfile));
    assert.equal(again.cache.hits, 1);
    assert.equal(again.cache.bytesFetched, 0);
  });

  it("answers the gateway's refusal as the same GatewayError", async () => {
    const gateway = gatewayFor(upstream.indexUrl);
    const lock = `version = 3\n\n[[package]]\nname = "d"\nversion = "0.1.0"\nsource = "git+file:///etc#${"a".repeat(40)}"\n`;
    const error = await gateway.provide(await requestFor(lock)).catch((e: unknown) => e);
    assert.ok(error instanceof GatewayError, String(error));
    assert.equal(error.kind, "egress_refused");
    assert.match(error.message, /file:\/\/\/etc is refused: git dependencies are fetched over https only/);
  });

  it("an abort kills the worker at once, mid-fetch, and nothing is asked of the upstream after it", async () => {
    const silent = await startHostileRegistry({
      crate: { name: "itoa", version: "1.0.0", checksum: "cd".repeat(32) },
      download: { kind: "never" },
    });
    try {
      const gateway = gatewayFor(silent.indexUrl);
      const abort = new AbortController();
      const lock = `version = 3\n\n[[package]]\nname = "itoa"\nversion = "1.0.0"\nsource = "${CRATES_IO}"\nchecksum = "${"cd".repeat(32)}"\n`;
      const request = await requestFor(lock, { signal: abort.signal });
      const providing = gateway.provide(request);
      const downloads = () => silent.requests.filter((r) => r.url.startsWith("/dl")).length;
      while (downloads() === 0) await new Promise((r) => setTimeout(r, 10));
      assert.equal((await processesCarrying(request.attemptId)).length, 1, "the worker runs while it fetches");
      abort.abort(new Error("cancelled: the job was cancelled"));
      await assert.rejects(providing, /cancelled: the job was cancelled/);
      assert.deepEqual(await processesCarrying(request.attemptId), [], "the worker is gone once provide() answers");
      // Its retries would have come within milliseconds: nothing came.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(downloads(), 1);
    } finally {
      await silent.close();
    }
  });
});
