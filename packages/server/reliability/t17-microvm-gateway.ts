/**
 * T17 a dependency-gateway job in a microVM: itoa and serde_json from a test registry (no
 * Cargo.lock; the host's gateway resolves and fetches them, the VM compiles them offline) through
 * the embedded server and a microVM host under TCG (its guest from `KILN_TEST_GUEST_DIR`,
 * default /var/cache/kiln-test/guest). Minutes of emulated compiling, so not in `npm test`, which
 * keeps the smallest gateway job in a VM (itoa alone: packages/cli/test/microvm-jobs.sandbox.test.ts).
 *
 * Broken: the job not passing, its test not run, either crate missing from its locked crates,
 * its evidence not saying `isolation: microvm` and `network_policy: dependency-gateway`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { microvmIsolation } from "@kiln/host";
import { startSparseRegistry } from "@kiln/host/testing";
import { crate, type Doc, startEmbedded } from "../src/testing/e2e-jobs.js";
import { runTrial } from "./trial.js";

const WITH_DEPENDENCIES = {
  "Cargo.toml": `[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nitoa = "1"\nserde_json = "1"\n`,
  "src/lib.rs": `pub fn render(n: u64) -> String { itoa::Buffer::new().format(n).to_owned() }

#[cfg(test)]
mod tests {
    #[test]
    fn formats_and_parses() {
        assert_eq!(super::render(128), "128");
        let value: serde_json::Value = serde_json::from_str("{\\"a\\": [1, 2]}").unwrap();
        assert_eq!(value["a"][1], 2);
    }
}
`,
};

runTrial("T17", "dependency gateway in a microVM", async () => {
  const broken: string[] = [];
  const workRoot = mkdtempSync(join(tmpdir(), "kiln-t17-attempts-"));
  const registry = await startSparseRegistry({ crates: ["itoa", "serde_json"] });
  const e = await startEmbedded({
    workRoot,
    // Only ends a job that hangs: emulated compiling on a loaded machine is slow, and no verdict is a time.
    wallClockSeconds: 3600,
    isolation: microvmIsolation({
      accel: "tcg",
      guestDirectory: process.env.KILN_TEST_GUEST_DIR ?? "/var/cache/kiln-test/guest",
      // The boot bound only ends a VM that never boots (a starved guest on a loaded machine boots slowly).
      readySeconds: 1800,
    }),
    cratesIoIndex: registry.indexUrl,
  });
  try {
    const id = await e.jobs.submit(crate("hello", WITH_DEPENDENCIES), "t17-gateway-job");
    const job = await e.jobs.settle(id, 3_600_000);
    const evidence = await e.jobs.evidence(id);
    const unit = evidence.report.units[0] as Doc;
    const test = (evidence.report.tests as Doc[]).find((t) => t.name === "tests::formats_and_parses");
    const locked = ((job.locked_crates ?? []) as Doc[]).map((c) => c.name);
    if (job.status !== "passed") broken.push(`the job ${job.status}: ${JSON.stringify(job.failure)}`);
    if (test?.outcome !== "passed") broken.push(`its test ${test === undefined ? "did not run" : test.outcome}`);
    for (const name of ["itoa", "serde_json"])
      if (!locked.includes(name)) broken.push(`${name} is not among its locked crates (${locked.join(", ")})`);
    if (unit?.isolation !== "microvm") broken.push(`its evidence says isolation ${unit?.isolation}`);
    const policy = (evidence.report.admitted as Doc)?.network_policy;
    if (policy !== "dependency-gateway") broken.push(`its network policy was ${policy}`);
    const compiled = (evidence.report.crates as Doc[]).filter((c) => c.outcome !== "fresh").length;
    return {
      figure: `itoa + serde_json resolved and fetched by the host's gateway, compiled and tested in a microVM (TCG): ${job.status}, ${compiled} crates compiled, ${typeof unit?.cpu_seconds === "number" ? unit.cpu_seconds.toFixed(1) : "?"} vCPU-seconds`,
      broken,
    };
  } finally {
    await e.close();
    await registry.close();
    rmSync(workRoot, { recursive: true, force: true });
  }
});
