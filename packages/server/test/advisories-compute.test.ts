import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { AttemptReport, CacheItem as ReportCache, CrateItem as ReportCrate } from "@kiln/contract";
import { CATALOGUE } from "@kiln/contract";
import type { BasisAttempt } from "../src/domain/advisories/advisory-basis.js";
import { computeAdvisories } from "../src/domain/advisories/compute-advisories.js";
import {
  CPU_SATURATED,
  cpuSaturated,
  predictedWallSeconds,
  SATURATED_MIN_WALL_SECONDS,
  SATURATED_UTILISATION,
} from "../src/domain/advisories/cpu-saturated.js";
import {
  CRITICAL_PATH_CRATE,
  criticalPathCrate,
  DOMINANT_MIN_SECONDS,
  DOMINANT_SHARE,
} from "../src/domain/advisories/critical-path-crate.js";
import {
  ALWAYS_COLD_MIN_JOBS,
  LINEAGE_ALWAYS_COLD,
  lineageAlwaysCold,
} from "../src/domain/advisories/lineage-always-cold.js";

/** The advisory id pattern of the dismissal's path, from the catalogue. */
const dismissParams = CATALOGUE.find((op) => op.id === "repositories.advisories.dismiss")?.request.params as unknown as
  | { properties: { advisory: { pattern: string } } }
  | undefined;
const ADVISORY_ID_PATTERN = dismissParams?.properties.advisory.pattern ?? "(no dismiss operation)";

/** The repository root (tests run from packages/server/dist/test). */
const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
const T0 = Date.parse("2026-11-22T08:00:00.000Z");
const iso = (ms: number) => new Date(T0 + ms).toISOString();

let jobs = 0;
/** A synthetic finished attempt: its cargo phase lasts `wallMs` and the unit used `cpuSeconds`. */
function attempt(
  over: {
    operation?: string;
    size?: string;
    vcpus?: number;
    wallMs?: number;
    cpuSeconds?: number | null;
    crates?: Partial<ReportCrate>[];
    cache?: Partial<ReportCache>;
  } = {},
): BasisAttempt {
  const wallMs = over.wallMs ?? 60_000;
  const phase = over.operation === "test" ? "test" : "build";
  const report: AttemptReport = {
    phases: [
      { name: "provision", status: "passed", started_at: iso(0), finished_at: iso(10), duration_ms: 10 },
      { name: phase, status: "passed", started_at: iso(10), finished_at: iso(10 + wallMs), duration_ms: wallMs },
    ],
    crates: (over.crates ?? []).map((c) => ({
      name: "c",
      version: "0.1.0",
      source: "workspace",
      outcome: "compiled",
      duration_ms: 1000,
      ...c,
    })),
    tests: [],
    ...(over.cache === undefined
      ? {}
      : {
          caches: [
            {
              lineage: "lin_abc",
              class: "build/dev/stable",
              outcome: "cold",
              reason: "purged",
              restored_bytes: 0,
              saved_bytes: 1,
              ...over.cache,
            },
          ],
        }),
    unit: {
      id: `job-${jobs}-a1`,
      host: "local",
      isolation: "sandbox",
      started_at: iso(10),
      finished_at: iso(10 + wallMs),
      vcpus: over.vcpus ?? 2,
      memory_bytes: 4 * 2 ** 30,
      exit_code: 0,
      cpu_seconds: over.cpuSeconds === null ? null : (over.cpuSeconds ?? 30),
      peak_memory_bytes: null,
      oom_killed: false,
    },
  };
  return {
    jobId: `job-${++jobs}`,
    attempt: 1,
    size: over.size ?? "kiln2-cpu",
    class: "build/dev/stable",
    operation: over.operation ?? "build",
    report,
  };
}

/** cgroup CPU seconds for a utilisation of the phase on `vcpus`. */
const cpuFor = (utilisation: number, wallMs: number, vcpus = 2) => (utilisation * wallMs * vcpus) / 1000;

describe("cpu-saturated", () => {
  it("advises the next size only at or above the utilisation threshold", () => {
    const below = [1, 2, 3].map(() => attempt({ cpuSeconds: cpuFor(SATURATED_UTILISATION - 0.01, 60_000) }));
    assert.deepEqual(cpuSaturated(below), []);
    const above = [1, 2, 3].map(() => attempt({ cpuSeconds: cpuFor(SATURATED_UTILISATION + 0.01, 60_000) }));
    const [finding, ...more] = cpuSaturated(above);
    assert.equal(more.length, 0);
    assert.equal(finding?.key, CPU_SATURATED);
    assert.match(finding?.measuredValue ?? "", /^build phase used 1\.72 of 2 vCPUs \(86 %\) over 3 jobs on kiln2-cpu/);
    assert.match(
      finding?.recommendation ?? "",
      /^Use kiln4-cpu \(4 vCPUs\): predicted build phase 38 s instead of 60 s \(saves 22 s, 36 %\)/,
    );
  });

  it("needs two jobs, long enough phases and a CPU measurement", () => {
    const saturated = (over = {}) => attempt({ cpuSeconds: cpuFor(0.95, 60_000), ...over });
    assert.deepEqual(cpuSaturated([saturated()]), [], "one job is not a pattern");
    const short = SATURATED_MIN_WALL_SECONDS * 1000 - 1;
    assert.deepEqual(cpuSaturated([1, 2].map(() => attempt({ wallMs: short, cpuSeconds: cpuFor(1, short) }))), []);
    assert.deepEqual(cpuSaturated([1, 2].map(() => saturated({ cpuSeconds: null }))), []);
    assert.equal(cpuSaturated([saturated(), saturated()]).length, 1);
    // Sizes and phases are told apart; the largest size has nothing larger to advise.
    assert.deepEqual(cpuSaturated([saturated(), saturated({ operation: "test" })]), []);
    assert.deepEqual(
      cpuSaturated(
        [1, 2].map(() => saturated({ size: "kiln16-cpu", vcpus: 16, cpuSeconds: cpuFor(0.95, 60_000, 16) })),
      ),
      [],
    );
  });

  it("predicts with the stated model: busy-all time scales, serial time does not", () => {
    // 60 s wall, 100 CPU seconds on 2 vCPUs: 40 s all busy + 20 s serial → 20 + 40·2/4 = 40 s on 4.
    assert.equal(predictedWallSeconds({ cpuSeconds: 100, wallSeconds: 60, vcpus: 2 }, 4), 40);
    // Fully serial: nothing to gain.
    assert.equal(predictedWallSeconds({ cpuSeconds: 60, wallSeconds: 60, vcpus: 2 }, 4), 60);
    // Fully parallel: halves.
    assert.equal(predictedWallSeconds({ cpuSeconds: 120, wallSeconds: 60, vcpus: 2 }, 4), 30);
  });
});

describe("critical-path-crate", () => {
  const crates = (heavyMs: number) => [
    { name: "heavy", duration_ms: heavyMs },
    { name: "light", duration_ms: 400 },
    { name: "cached", outcome: "fresh" as const, duration_ms: null },
  ];

  it("advises only at or above the share and duration thresholds", () => {
    const wallMs = 10_000;
    const below = DOMINANT_SHARE * wallMs - 10;
    assert.deepEqual(criticalPathCrate([attempt({ wallMs, crates: crates(below) })]), []);
    const above = DOMINANT_SHARE * wallMs + 10;
    const [finding] = criticalPathCrate([attempt({ wallMs, crates: crates(above) })]);
    assert.equal(finding?.key, CRITICAL_PATH_CRATE);
    assert.match(finding?.measuredValue ?? "", /^crate heavy compiled in 5\.0 s, 50 % of the build phase \(10 s\)/);
    // Dominant but short: not worth restructuring.
    const quick = DOMINANT_MIN_SECONDS * 1000 - 10;
    assert.deepEqual(criticalPathCrate([attempt({ wallMs: quick + 100, crates: crates(quick) })]), []);
  });

  it("needs several compiled crates and most of the recent jobs", () => {
    assert.deepEqual(criticalPathCrate([attempt({ crates: [{ name: "only", duration_ms: 50_000 }] })]), []);
    const dominated = attempt({ wallMs: 10_000, crates: crates(8_000) });
    const balanced = attempt({ wallMs: 10_000, crates: crates(3_000) });
    assert.deepEqual(criticalPathCrate([dominated, balanced]), [], "half of the jobs is not most");
    assert.equal(criticalPathCrate([dominated, balanced, dominated]).length, 1);
  });
});

describe("lineage-always-cold", () => {
  const job = (cache: Partial<ReportCache>) => attempt({ cache });

  it("advises on a lineage cold in every one of at least three recent jobs, naming the reason", () => {
    const cold = [job({ reason: "purged" }), job({ reason: "purged" }), job({ reason: "first job of the class" })];
    const [finding, ...more] = lineageAlwaysCold(cold);
    assert.equal(more.length, 0);
    assert.equal(finding?.key, LINEAGE_ALWAYS_COLD);
    assert.equal(
      finding?.measuredValue,
      "lineage lin_abc (class build/dev/stable) was cold in all of its last 3 jobs: purged ×2, first job of the class ×1",
    );
    assert.match(finding?.recommendation ?? "", /stop purging it/);
    assert.equal(ALWAYS_COLD_MIN_JOBS, 3);
    assert.deepEqual(lineageAlwaysCold(cold.slice(0, 2)), [], "two jobs are below the threshold");
    assert.deepEqual(lineageAlwaysCold([...cold, job({ outcome: "warm", reason: null })]), [], "one warm job");
    assert.deepEqual(lineageAlwaysCold([job({ lineage: "lin_other" }), ...cold.slice(0, 2)]), []);
  });

  it("names the remedy for the reason and keeps the basis while the reason stays", () => {
    const evicted = [1, 2, 3].map(() => job({ reason: "evicted" }));
    assert.match(lineageAlwaysCold(evicted)[0]?.recommendation ?? "", /storage quota/);
    const inUse = [1, 2, 3].map(() => job({ reason: "lineage in use" }));
    assert.match(lineageAlwaysCold(inUse)[0]?.recommendation ?? "", /overlap/);
    const four = computeAdvisories("acme/a", [...evicted, job({ reason: "evicted" })]);
    assert.deepEqual(
      computeAdvisories("acme/a", evicted).map((a) => [a.id, a.basis_signature]),
      four.map((a) => [a.id, a.basis_signature]),
      "one more cold job of the same cause is the same advisory",
    );
    assert.notEqual(computeAdvisories("acme/a", inUse)[0]?.id, four[0]?.id, "another cause is a new advisory");
    assert.notEqual(computeAdvisories("acme/b", evicted)[0]?.id, four[0]?.id, "another repository's is its own");
  });
});

describe("computeAdvisories", () => {
  it("gives each finding a URL-safe id, a basis signature and an existing docs page", () => {
    const attempts = [1, 2, 3].map(() =>
      attempt({
        cpuSeconds: cpuFor(0.97, 60_000),
        crates: [
          { name: "heavy", duration_ms: 45_000 },
          { name: "light", duration_ms: 1_000 },
        ],
        cache: { reason: "lineage in use" },
      }),
    );
    const advisories = computeAdvisories("acme/widget", attempts);
    assert.deepEqual(advisories.map((a) => a.key).sort(), [CPU_SATURATED, CRITICAL_PATH_CRATE, LINEAGE_ALWAYS_COLD]);
    for (const a of advisories) {
      assert.match(a.id, new RegExp(ADVISORY_ID_PATTERN));
      assert.match(a.basis_signature, /^[0-9a-f]{32}$/);
      assert.equal(a.remediation_href, `docs/advisories/${a.key}.md`);
      assert.ok(existsSync(join(ROOT, a.remediation_href)), `${a.remediation_href} exists`);
    }
    assert.deepEqual(computeAdvisories("acme/widget", []), []);
  });
});
