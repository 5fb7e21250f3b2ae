import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { withoutEarlierTimingReports } from "../src/agent/attempt/run-cargo.js";
import { summariseCargoTimings } from "../src/evidence/cargo-timings.js";

/**
 * The timeline of a real `cargo build --timings` (issue 37 item 5) on a four-crate workspace:
 * `top` depends on `mid` and `side`, `mid` on `base`; the three of the chain are equally slow to
 * compile (many functions), each starting when the one before it has its metadata (cargo's
 * pipelining), so `base → mid → top` bounds the build and `side` (tiny, independent) is off it.
 */
const manifest = (name: string, deps: string[] = []) =>
  `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n${deps.map((d) => `${d} = { path = "../${d}" }`).join("\n")}\n`;

const heavy = Array.from(
  { length: 1500 },
  (_, i) =>
    `pub fn f${i}(x: u64) -> u64 { let mut v = Vec::new(); for k in 0..x { v.push(k * ${i}); } v.iter().sum() }`,
).join("\n");

const FILES: Record<string, string> = {
  "Cargo.toml": '[workspace]\nmembers = ["base", "mid", "side", "top"]\nresolver = "2"\n',
  "base/Cargo.toml": manifest("base"),
  "base/src/lib.rs": `${heavy}\npub fn b() -> u64 { f1(2) }\n`,
  "mid/Cargo.toml": manifest("mid", ["base"]),
  "mid/src/lib.rs": `${heavy}\npub fn m() -> u64 { base::b() + 1 }\n`,
  "side/Cargo.toml": manifest("side"),
  "side/src/lib.rs": "pub fn s() -> u64 { 1 }\n",
  "top/Cargo.toml": manifest("top", ["mid", "side"]),
  "top/src/lib.rs": `${heavy}\npub fn t() -> u64 { mid::m() + side::s() }\n`,
};

interface CargoUnit {
  i: number;
  name: string;
  unblocked_units?: number[];
  unblocked_rmeta_units?: number[];
  unlocked_units?: number[];
  unlocked_rmeta_units?: number[];
}

describe("cargo --timings summarised (real cargo)", () => {
  let dir: string;
  let html: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "kiln-timings-"));
    for (const [path, text] of Object.entries(FILES)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const built = spawnSync("cargo", ["build", "--offline", "--timings"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, CARGO_BUILD_JOBS: "2", CARGO_TERM_COLOR: "never" },
    });
    assert.equal(built.status, 0, built.stderr);
    html = readFileSync(join(dir, "target", "cargo-timings", "cargo-timing.html"), "utf8");
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("the critical path is base → mid → top, each started by the one before it in cargo's own report", () => {
    const timeline = summariseCargoTimings(html, "cargo-timings/cargo-timing.html");
    assert.ok(timeline !== null);
    assert.deepEqual(
      timeline.critical_path.map((u) => [u.name, u.target]),
      [
        ["base", "lib"],
        ["mid", "lib"],
        ["top", "lib"],
      ],
    );
    // Cargo's report: each unit on the path lists the next among the units its end (or its metadata) unblocked.
    const open = html.indexOf("[", html.indexOf("const UNIT_DATA = "));
    const units = JSON.parse(html.slice(open, html.indexOf("\n];", open) + 2)) as CargoUnit[];
    const named = (name: string) => units.find((u) => u.name === name);
    for (const [from, to] of [
      ["base", "mid"],
      ["mid", "top"],
    ] as const) {
      const a = named(from);
      const b = named(to);
      assert.ok(a && b);
      const unblocked = [
        ...(a.unblocked_units ?? a.unlocked_units ?? []),
        ...(a.unblocked_rmeta_units ?? a.unlocked_rmeta_units ?? []),
      ];
      assert.ok(unblocked.includes(b.i), `${from} unblocked ${to} in cargo's report`);
    }
    assert.deepEqual(timeline.units.map((u) => u.name).sort(), ["base", "mid", "side", "top"]);
    assert.ok(timeline.wall_ms > 0);
    assert.ok(timeline.critical_path_share > 0 && timeline.critical_path_share <= 1);
    assert.equal(timeline.artifact, "cargo-timings/cargo-timing.html");
  });

  it("run as a job runs cargo, the target dir keeps only the latest run's report, not one per run", () => {
    // A lineage's target dir outlives its jobs: cargo alone adds a timestamped report every run.
    const targetDir = join(dir, "target");
    const reports = () => readdirSync(join(targetDir, "cargo-timings")).sort();
    assert.equal(reports().length, 2, `cargo-timing.html and this build's own: ${reports().join(", ")}`);
    for (let run = 0; run < 3; run++) {
      const [command = "", ...args] = withoutEarlierTimingReports(["cargo", "build", "--offline", "--timings"]);
      const built = spawnSync(command, args, {
        cwd: dir,
        encoding: "utf8",
        env: { ...process.env, CARGO_TARGET_DIR: targetDir, CARGO_TERM_COLOR: "never" },
      });
      assert.equal(built.status, 0, built.stderr);
    }
    const left = reports();
    assert.equal(left.length, 2, left.join(", "));
    assert.ok(left.includes("cargo-timing.html"));
    assert.match(left.find((f) => f !== "cargo-timing.html") ?? "", /^cargo-timing-\d{8}T\d+Z.*\.html$/);
  });

  it("a report without cargo's unit data is not summarised", () => {
    assert.equal(summariseCargoTimings("<html>no data</html>", "x.html"), null);
  });
});
