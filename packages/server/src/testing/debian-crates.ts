/**
 * Real crates for end-to-end tests and benchmarks: Debian's `librust-*-dev` packages install
 * crate sources under /usr/share/cargo/registry/<name>-<version>/, which together form a
 * cargo directory source. A job's source is one such crate's files plus a `.cargo/config.toml`
 * that replaces crates-io with that directory (visible inside the sandbox, where /usr is bound
 * read-only), so its dependencies resolve offline.
 *
 * Also here: running `cargo test` on the same files directly (outside kiln), and reading the
 * per-binary test counts both from cargo's own `test result:` lines and from a job's evidence,
 * so the two can be compared.
 */
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { type SourceFile, sorted } from "./crates.js";

export const DEBIAN_REGISTRY = "/usr/share/cargo/registry";

/** `.cargo/config.toml`: every crates-io dependency comes from Debian's directory source. */
export const DEBIAN_SOURCE_CONFIG = `[source.crates-io]\nreplace-with = "debian"\n\n[source.debian]\ndirectory = "${DEBIAN_REGISTRY}"\n`;

/**
 * Files the job does not need from the installed crate directory: `.cargo-checksum.json` is
 * the directory source's own bookkeeping for the *registry* copy (cargo reads it only for
 * crates it takes from the directory source, never for the path package being built).
 */
const DROPPED = new Set([".cargo-checksum.json"]);

function walk(root: string, dir = ""): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const rel = dir === "" ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...walk(root, rel));
    else if (entry.isFile()) out.push(rel);
    // Debian's crate directories hold no symlinks; anything else is not source.
  }
  return out;
}

/** Whether Debian's package for this crate is installed (its directory exists). */
export function debianCrateInstalled(name: string, version: string): boolean {
  try {
    return statSync(join(DEBIAN_REGISTRY, `${name}-${version}`)).isDirectory();
  } catch {
    return false;
  }
}

/** The crate as Debian installed it, plus the directory-source config; sorted by path in byte order. */
export function debianCrate(name: string, version: string): SourceFile[] {
  const root = join(DEBIAN_REGISTRY, `${name}-${version}`);
  const files: SourceFile[] = walk(root)
    .filter((path) => !DROPPED.has(path))
    .map((path) => ({
      path,
      bytes: [...readFileSync(join(root, path))],
      executable: (statSync(join(root, path)).mode & 0o111) !== 0,
    }));
  files.push({ path: ".cargo/config.toml", bytes: [...Buffer.from(DEBIAN_SOURCE_CONFIG)], executable: false });
  return sorted(files);
}

/** Writes inline-source files into a fresh directory (as the host agent materializes them). */
export function materialize(files: readonly SourceFile[], dir = mkdtempSync(join(tmpdir(), "kiln-direct-"))): string {
  for (const file of files) {
    const path = join(dir, file.path);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, Buffer.from(file.bytes));
    chmodSync(path, file.executable ? 0o755 : 0o644);
  }
  return dir;
}

export interface DirectRun {
  readonly exitCode: number | null;
  /** stdout and stderr interleaved in the order written (one pipe for both). */
  readonly output: string;
  readonly seconds: number;
}

/**
 * `cargo test --offline <args>` in `dir`, the way the sandbox runs it: CARGO_HOME an empty
 * directory, CARGO_TARGET_DIR `targetDir`, CARGO_NET_OFFLINE, the same CARGO_BUILD_JOBS and
 * no colour. The toolchain is the host's default cargo on PATH (the one kiln admits by default).
 * With `upstreamIndex`, cargo runs online instead, as a developer would against that sparse
 * index standing for crates.io (the home's config replaces crates-io with it).
 *
 * `home` names a CARGO_HOME to use and keep instead of a fresh one removed after the run: runs
 * that share a target dir share it too, since cargo fingerprints a registry crate's units by the
 * path it unpacked the crate to (a fresh home per run would rebuild every shared dependency).
 */
export function directCargoTest(
  dir: string,
  opts: {
    targetDir: string;
    jobs?: number;
    args?: readonly string[];
    environment?: Readonly<Record<string, string>>;
    upstreamIndex?: string;
    home?: string;
  },
): Promise<DirectRun> {
  const home = opts.home ?? mkdtempSync(join(tmpdir(), "kiln-direct-home-"));
  const online = opts.upstreamIndex !== undefined;
  if (online) {
    writeFileSync(
      join(home, "config.toml"),
      `[source.crates-io]\nreplace-with = "upstream"\n\n[source.upstream]\nregistry = ${JSON.stringify(opts.upstreamIndex)}\n`,
    );
  }
  const args = ["test", ...(online ? [] : ["--offline"]), ...(opts.args ?? [])];
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    // One pipe for both streams (`2>&1` before exec): the output's order is the order cargo and
    // the test binaries wrote it, so `Running …` lines precede their libtest blocks however busy
    // this process is. Two pipes read separately interleave arbitrarily under load, and
    // directTestCounts would pair a block with the wrong binary.
    const child = spawn("sh", ["-c", 'exec cargo "$@" 2>&1', "sh", ...args], {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        CARGO_HOME: home,
        CARGO_TARGET_DIR: opts.targetDir,
        ...(online ? {} : { CARGO_NET_OFFLINE: "true" }),
        CARGO_BUILD_JOBS: String(opts.jobs ?? 2),
        CARGO_TERM_COLOR: "never",
        ...opts.environment,
      },
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.once("error", reject);
    child.once("close", (exitCode) => {
      if (opts.home === undefined) rmSync(home, { recursive: true, force: true });
      resolve({ exitCode, output, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
    });
  });
}

/**
 * Where reference runs are kept on this machine between test runs, beside the microVM tests'
 * guest (KILN_TEST_CACHE_DIR, default /var/cache/kiln-test).
 */
const REFERENCE_RUNS = join(process.env.KILN_TEST_CACHE_DIR ?? "/var/cache/kiln-test", "reference-cargo");

/** A reference run's result, and whether it was read from an earlier identical run. */
export interface ReferenceRun extends DirectRun {
  readonly cached: boolean;
}

/** A stored reference run (REFERENCE_RUNS/<digest>.json). */
interface StoredReference {
  readonly exitCode: number;
  readonly output: string;
  readonly seconds: number;
  /** The project's Cargo.lock as cargo left it (null: none). */
  readonly lockfile: string | null;
}

/** The sparse index's path of a crate (cargo's layout: 1/, 2/, 3/a/, ab/cd/). */
function indexPath(name: string): string {
  const lower = name.toLowerCase();
  if (lower.length <= 2) return `${lower.length}/${lower}`;
  if (lower.length === 3) return `3/${lower[0]}/${lower}`;
  return `${lower.slice(0, 2)}/${lower.slice(2, 4)}/${lower}`;
}

/** A command's output, run once per process (the toolchain and Debian's packages do not change under a test run). */
const outputs = new Map<string, string>();
const commandOutput = (command: string, args: readonly string[]): string => {
  const key = [command, ...args].join("\0");
  const known = outputs.get(key);
  if (known !== undefined) return known;
  const ran = spawnSync(command, args, { encoding: "utf8" });
  if (ran.status !== 0) throw new Error(`${command} ${args.join(" ")} failed: ${ran.stderr}`);
  outputs.set(key, ran.stdout);
  return ran.stdout;
};

/**
 * directCargoTest as the reference a test compares kiln with: local cargo's result is a
 * function of its inputs, so a passing run is kept on this machine keyed by a digest of all of
 * them, and a later run with the same digest reads it instead of building the project again
 * (writing the project's Cargo.lock back as cargo wrote it). The inputs: every file of the
 * project with its mode, the arguments, environment and build jobs (and this process's CARGO_* and
 * RUST* variables), `cargo -V` and `rustc -vV`,
 * Debian's installed crate packages (every registry crate's source, offline or served), and for
 * a run against a sparse index the index files it serves for `indexCrates`. kiln's own side of
 * such a test always runs. KILN_TEST_FRESH_REFERENCE=1 runs local cargo regardless (and keeps
 * the result).
 */
export async function referenceCargoTest(
  dir: string,
  opts: Parameters<typeof directCargoTest>[1] & { indexCrates?: readonly string[] },
): Promise<ReferenceRun> {
  const { indexCrates, ...direct } = opts;
  const digest = createHash("sha256");
  const part = (label: string, value: string | Buffer) => {
    digest.update(`${label}\0${Buffer.byteLength(value)}\0`);
    digest.update(value);
  };
  part("format", "kiln reference cargo test 1");
  for (const path of walk(dir).sort()) {
    const file = join(dir, path);
    part(`file ${path} ${(statSync(file).mode & 0o111) !== 0 ? "x" : "-"}`, readFileSync(file));
  }
  part("args", JSON.stringify(direct.args ?? []));
  part("environment", JSON.stringify(Object.entries(direct.environment ?? {}).sort()));
  // What cargo and rustc read from this process's environment too (RUSTFLAGS, RUSTUP_TOOLCHAIN, CARGO_*).
  const inherited = Object.entries(process.env).filter(([name]) => /^(CARGO|RUST)/.test(name));
  part("inherited", JSON.stringify(inherited.sort(([a], [b]) => a.localeCompare(b))));
  part("jobs", String(direct.jobs ?? 2));
  part("online", String(direct.upstreamIndex !== undefined));
  part("cargo", commandOutput("cargo", ["-V"]));
  part("rustc", commandOutput("rustc", ["-vV"]));
  part("debian", commandOutput("dpkg-query", ["-W", "librust-*"]));
  if (direct.upstreamIndex !== undefined) {
    const base = direct.upstreamIndex.replace(/^sparse\+/, "");
    for (const name of [...(indexCrates ?? [])].sort()) {
      const answer = await fetch(new URL(indexPath(name), base));
      part(`index ${name} ${answer.status}`, Buffer.from(await answer.arrayBuffer()));
    }
  }
  const stored = join(REFERENCE_RUNS, `${digest.digest("hex")}.json`);
  const lockfilePath = join(dir, "Cargo.lock");
  if (process.env.KILN_TEST_FRESH_REFERENCE !== "1" && existsSync(stored)) {
    const kept = JSON.parse(readFileSync(stored, "utf8")) as StoredReference;
    if (kept.lockfile !== null) writeFileSync(lockfilePath, kept.lockfile);
    return { exitCode: kept.exitCode, output: kept.output, seconds: kept.seconds, cached: true };
  }
  const run = await directCargoTest(dir, direct);
  if (run.exitCode === 0) {
    const kept: StoredReference = {
      exitCode: run.exitCode,
      output: run.output,
      seconds: run.seconds,
      lockfile: existsSync(lockfilePath) ? readFileSync(lockfilePath, "utf8") : null,
    };
    mkdirSync(REFERENCE_RUNS, { recursive: true });
    const partial = `${stored}.${process.pid}.partial`;
    writeFileSync(partial, JSON.stringify(kept));
    renameSync(partial, stored);
  }
  return { ...run, cached: false };
}

export interface Counts {
  passed: number;
  failed: number;
  ignored: number;
}

/**
 * Per test binary, the counts of cargo's `test result:` lines, keyed as `binaryKey` keys them.
 * The `Running …`/`Doc-tests …` announcement (stderr) and the libtest block (stdout) are paired
 * in order, which holds when both streams were read in the order written (cargo runs the test
 * binaries one after another).
 */
export function directTestCounts(output: string): Map<string, Counts> {
  const counts = new Map<string, Counts>();
  let current: string | null = null;
  for (const line of output.split("\n")) {
    const running = /^\s+Running (unittests )?(\S+) \((.+)\)\s*$/.exec(line);
    const doc = /^\s+Doc-tests \S+\s*$/.test(line);
    if (running) {
      const [, unittests, source, executable] = running;
      const exe = basename(executable ?? "").replace(/-[0-9a-f]{16}$/, "");
      current =
        unittests !== undefined
          ? source === "src/lib.rs"
            ? "lib"
            : `bin ${exe}`
          : exe || (source ?? "").replace(/^.*\//, "").replace(/\.rs$/, "");
    } else if (doc) current = "doc";
    const result = /^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;/.exec(line);
    if (result && current !== null) {
      const previous = counts.get(current) ?? { passed: 0, failed: 0, ignored: 0 };
      counts.set(current, {
        passed: previous.passed + Number(result[1]),
        failed: previous.failed + Number(result[2]),
        ignored: previous.ignored + Number(result[3]),
      });
      if (current !== "doc") current = null;
    }
  }
  return counts;
}

/**
 * The key of an evidence test's `target` label: `name (lib)` → `lib`, `name (doc)` → `doc`,
 * `name (bin app)` → `bin app`, `name::integration` → `integration`.
 */
export function binaryKey(label: string): string {
  const kind = /^\S+ \((.+)\)$/.exec(label)?.[1];
  if (kind !== undefined) return kind;
  return label.includes("::") ? label.slice(label.indexOf("::") + 2) : label;
}

/** Per test binary, the counts of the evidence's `report.tests` items. */
export function evidenceTestCounts(tests: readonly { target: string; outcome: string }[]): Map<string, Counts> {
  const counts = new Map<string, Counts>();
  for (const test of tests) {
    const key = binaryKey(test.target);
    const entry = counts.get(key) ?? { passed: 0, failed: 0, ignored: 0 };
    if (test.outcome === "passed" || test.outcome === "failed" || test.outcome === "ignored") entry[test.outcome] += 1;
    counts.set(key, entry);
  }
  return counts;
}

/** Binaries that ran no test at all are absent from evidence (it lists tests, not binaries). */
export function withoutEmpty(counts: Map<string, Counts>): Map<string, Counts> {
  return new Map([...counts].filter(([, c]) => c.passed + c.failed + c.ignored > 0));
}
