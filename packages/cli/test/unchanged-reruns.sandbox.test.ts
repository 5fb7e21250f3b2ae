import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import { type CliRun, freshConfigHome, runCli, startListeningEmbedded } from "./harness.js";
import { RecordingProxy } from "./proxy.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON documents read loosely in assertions.
type Doc = any;

const jsonLines = (run: CliRun): Doc[] =>
  run.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));

/**
 * An upload sources one job, so each unchanged re-run of `kiln cargo` needs a new upload of the
 * same bytes (the next generation of its id). The CLI remembers which generation the last job
 * claimed: every re-run reserves once, instead of once per earlier run of the same bytes (and
 * failing after 64 of them). Without that record it still finds the next free generation.
 */
describe("kiln cargo re-run on an unchanged workspace", () => {
  let embedded: Awaited<ReturnType<typeof startListeningEmbedded>>;
  let proxy: RecordingProxy;
  const scratch: string[] = [];

  before(async () => {
    embedded = await startListeningEmbedded();
    proxy = new RecordingProxy(embedded.endpoint);
    await proxy.start();
    await onboardRepository(
      embedded.storage,
      { tenantId: embedded.tenant, name: "acme/rerun", onboardedBy: "test" },
      new Date(),
    );
  });
  after(async () => {
    await proxy.stop();
    await embedded.close();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  it("reserves one upload per run, the generation after the last claimed one; without the record, it walks to it", async () => {
    const root = mkdtempSync(join(tmpdir(), "kiln-cli-rerun-"));
    const cache = mkdtempSync(join(tmpdir(), "kiln-cli-rerun-cache-"));
    scratch.push(root, cache);
    mkdirSync(join(root, "src"));
    writeFileSync(join(root, "Cargo.toml"), '[package]\nname = "rerun"\nversion = "0.1.0"\nedition = "2021"\n');
    writeFileSync(join(root, "src", "lib.rs"), "pub fn one() -> u32 { 1 }\n");
    const env = {
      XDG_CONFIG_HOME: freshConfigHome(),
      XDG_CACHE_HOME: cache,
      KILN_ENDPOINT: proxy.endpoint,
      KILN_TOKEN: embedded.token,
    };
    const reservesOf = async () => {
      const before = proxy.requests.length;
      const run = await runCli(["cargo", "check", "--repository", "acme/rerun", "--json"], { cwd: root, env });
      assert.equal(run.code, 0, run.stderr);
      const lines = jsonLines(run);
      assert.equal(lines.find((l) => l.type === "result").status, "passed");
      const reserves = proxy.requests.slice(before).filter((r) => r.method === "POST" && r.path === "/api/sources");
      return { reserves: reserves.length, upload: lines.find((l) => l.type === "upload") };
    };

    for (let generation = 0; generation < 3; generation++) {
      const { reserves, upload } = await reservesOf();
      assert.equal(reserves, 1, `run ${generation + 1}: one reservation`);
      assert.equal(upload.generation, generation);
      assert.match(upload.upload, new RegExp(`-${generation}$`));
    }

    // The record lost: the run reserves generations 0, 1 and 2 (each claimed) before a free 3.
    const layouts = join(cache, "kiln", "layouts");
    for (const name of readdirSync(layouts)) if (name.endsWith(".claimed.json")) rmSync(join(layouts, name));
    const lost = await reservesOf();
    assert.equal(lost.reserves, 4);
    assert.equal(lost.upload.generation, 3);
    // …and keeps the record again.
    const next = await reservesOf();
    assert.equal(next.reserves, 1);
    assert.equal(next.upload.generation, 4);
  });
});
