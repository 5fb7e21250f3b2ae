/**
 * `kiln cargo` end to end on a microVM host: the embedded server with its local host's isolation
 * the microVM (real QEMU, the real Debian kernel, real cargo in the guest, under TCG on these
 * machines: see packages/host/test/microvm-executor.sandbox.test.ts), next to one on the sandbox for the
 * same crate. Few jobs and tiny crates: software emulation is slow.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient, type KilnClient } from "@kiln/client";
import { microvmIsolation } from "@kiln/host";
import { type SparseRegistry, startSparseRegistry } from "@kiln/host/testing";
import { onboardRepository } from "@kiln/storage";
import { type CliRun, freshConfigHome, runCli, startListeningEmbedded } from "./harness.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON documents read loosely in assertions.
type Doc = any;

const GUEST_DIRECTORY = process.env.KILN_TEST_GUEST_DIR ?? "/var/cache/kiln-test/guest";

const jsonLines = (run: CliRun): Doc[] =>
  run.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));

/**
 * What the crates' manifests add: no doctests, no debug info, no incremental state. Under
 * emulation every rustc, rustdoc and link is slow (host/test/executor-suite.ts, LEAN_PROFILE);
 * no assertion here depends on them.
 */
const LEAN = "\n[lib]\ndoctest = false\n\n[profile.dev]\ndebug = 0\nincremental = false\n";

/** A crate with a passing, a failing and an ignored test. */
const TRIO = {
  "Cargo.toml": `[package]\nname = "trio"\nversion = "0.1.0"\nedition = "2021"\n${LEAN}\n[dependencies]\n`,
  "src/lib.rs": `pub fn double(n: u32) -> u32 { n * 2 }

#[cfg(test)]
mod tests {
    #[test]
    fn doubles() { assert_eq!(super::double(21), 42); }
    #[test]
    fn doubles_wrongly() { assert_eq!(super::double(2), 5, "two doubled is not five"); }
    #[test]
    #[ignore]
    fn someday() {}
}
`,
};

/**
 * itoa from the test registry (the dependency gateway provides it; no Cargo.lock): the smallest
 * gateway job. serde_json in a VM (minutes of emulated compiling) is `npm run reliability -- t17`.
 */
const WITH_DEPENDENCIES = {
  "Cargo.toml": `[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n${LEAN}\n[dependencies]\nitoa = "1"\n`,
  "src/lib.rs": `pub fn render(n: u64) -> String { itoa::Buffer::new().format(n).to_owned() }

#[cfg(test)]
mod tests {
    #[test]
    fn formats() {
        assert_eq!(super::render(128), "128");
    }
}
`,
};

interface Host {
  client: KilnClient;
  env: Record<string, string>;
  close: () => Promise<void>;
}

async function startHost(isolation?: Parameters<typeof startListeningEmbedded>[0]): Promise<Host> {
  const embedded = await startListeningEmbedded(isolation);
  for (const name of ["acme/trio", "acme/hello"])
    await onboardRepository(embedded.storage, { tenantId: embedded.tenant, name, onboardedBy: "test" }, new Date());
  return {
    client: createClient({ endpoint: embedded.endpoint, token: embedded.token }),
    env: { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: embedded.endpoint, KILN_TOKEN: embedded.token },
    close: embedded.close,
  };
}

describe("kiln cargo on a microVM host (TCG)", () => {
  let microvm: Host;
  let sandbox: Host;
  let registry: SparseRegistry;
  const scratch: string[] = [];
  const project = (files: Record<string, string>): string => {
    const root = mkdtempSync(join(tmpdir(), "kiln-microvm-ws-"));
    scratch.push(root);
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
    return root;
  };

  before(async () => {
    registry = await startSparseRegistry({ crates: ["itoa"] });
    microvm = await startHost({
      // The boot bound only ends a VM that never boots (a starved guest on a loaded machine boots slowly).
      isolation: microvmIsolation({ accel: "tcg", guestDirectory: GUEST_DIRECTORY, readySeconds: 1800 }),
      cratesIoIndex: registry.indexUrl,
    });
    sandbox = await startHost();
  });
  after(async () => {
    await microvm?.close();
    await sandbox?.close();
    await registry?.close();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  const failingTests = (evidence: Doc) =>
    evidence.report.tests.filter((t: Doc) => t.outcome === "failed").map((t: Doc) => t.name);

  it("a passing, a failing and an ignored test: the microVM's counts and failing test are the sandbox's; the second run is warm", async () => {
    const dir = project(TRIO);
    const args = ["cargo", "test", "--repository", "acme/trio", "--json"];
    const [inVm, inSandbox] = await Promise.all([
      runCli(args, { cwd: dir, env: microvm.env }),
      runCli(args, { cwd: dir, env: sandbox.env }),
    ]);
    const vmResult = jsonLines(inVm).find((l) => l.type === "result");
    const sandboxResult = jsonLines(inSandbox).find((l) => l.type === "result");
    assert.equal(vmResult?.status, "failed", `${inVm.stderr}\n${inVm.stdout.slice(-4000)}`);
    const { passed, failed, ignored } = vmResult.tests;
    assert.deepEqual({ passed, failed, ignored }, { passed: 1, failed: 1, ignored: 1 });
    assert.deepEqual(vmResult.tests.failed_tests, ["trio (lib): tests::doubles_wrongly"]);
    assert.deepEqual(vmResult.tests, sandboxResult.tests, "the same counts and failing test as the sandbox");

    const vmEvidence = await microvm.client.call("jobs.evidence", { params: { id: vmResult.job } });
    const sandboxEvidence = await sandbox.client.call("jobs.evidence", { params: { id: sandboxResult.job } });
    const unit = vmEvidence.report.units[0] as Doc;
    assert.equal(unit.isolation, "microvm");
    assert.match(unit.isolation_reason, /^microvm: .*TCG/);
    assert.equal((sandboxEvidence.report.units[0] as Doc).isolation, "sandbox");
    assert.deepEqual(failingTests(vmEvidence), ["tests::doubles_wrongly"]);
    assert.deepEqual(failingTests(vmEvidence), failingTests(sandboxEvidence));
    assert.ok((unit.cpu_seconds ?? 0) > 0, "vCPU-seconds from QEMU's cgroup");

    // The lineage's target disk survived the VM: the second run finds the crate compiled.
    const again = await runCli(args, { cwd: dir, env: microvm.env });
    const second = jsonLines(again).find((l) => l.type === "result");
    assert.deepEqual(second.tests, vmResult.tests, again.stdout.slice(-3000));
    const warm = await microvm.client.call("jobs.evidence", { params: { id: second.job } });
    const cache = warm.report.caches.find((c: Doc) => c.class !== "dependency-gateway") as Doc;
    assert.equal(cache.outcome, "warm", JSON.stringify(cache));
    const compiled = warm.report.crates.filter((c: Doc) => c.outcome !== "fresh").map((c: Doc) => c.name);
    assert.deepEqual(compiled, [], `nothing recompiled on the warm run: ${JSON.stringify(warm.report.crates)}`);
  });

  it("a dependency-gateway job (itoa from the registry, no Cargo.lock) passes in the VM", async () => {
    const dir = project(WITH_DEPENDENCIES);
    const run = await runCli(["cargo", "test", "--repository", "acme/hello", "--json"], { cwd: dir, env: microvm.env });
    const result = jsonLines(run).find((l) => l.type === "result");
    assert.equal(result?.status, "passed", `${run.stderr}\n${run.stdout.slice(-4000)}`);
    assert.equal(result.tests.passed, 1);
    const job = await microvm.client.call("jobs.get", { params: { id: result.job } });
    const locked = (job.locked_crates ?? []).map((c) => c.name);
    assert.ok(locked.includes("itoa"), locked.join(", "));
    const evidence = await microvm.client.call("jobs.evidence", { params: { id: result.job } });
    assert.equal((evidence.report.units[0] as Doc).isolation, "microvm");
    assert.equal((evidence.report.admitted as Doc).network_policy, "dependency-gateway");
  });
});
