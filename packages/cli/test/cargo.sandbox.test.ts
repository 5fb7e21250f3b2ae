import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient, type KilnClient, KilnRefusal } from "@kiln/client";
import { onboardRepository, readJob, writeTenantSettings } from "@kiln/storage";
import { captureWorkspace } from "../src/archive/capture.js";
import { buildArchive, uploadIdOf } from "../src/archive/layout.js";
import {
  CLI_ON_THE_RUNTIME,
  type CliRun,
  freshConfigHome,
  runCli,
  serverTesting,
  startCli,
  startListeningEmbedded,
  until,
} from "./harness.js";
import { RecordingProxy } from "./proxy.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON documents read loosely in assertions.
type Doc = any;

/** Debian's crate fixtures, from @kiln/server/testing. */
const debian = () => import("@kiln/server/testing");

const scratch: string[] = [];
function workspace(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(join(tmpdir(), "kiln-cli-ws-"));
  scratch.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const manifest = (name: string, extra = "") =>
  `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n${extra}\n[dependencies]\n`;

const jsonLines = (run: CliRun): Doc[] =>
  run.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));

/**
 * The first test's crate. On the runtime, Debian's semver 1.0.14 (its sources, its
 * .cargo/config.toml and six test binaries, as the CLI captures them). On the machine's node
 * (scripts/run-tests.mjs' second pass of the CLI's tests) a generated crate of five test binaries
 * and no dependency: that pass tests the CLI on that node (capture, upload, --json, --junit, the
 * jobs commands), and building semver through kiln is the same on any node the CLI runs on, which
 * the runtime's pass of this file and server/test/debian-crate.sandbox already show.
 */
const PARITY_CRATE_ON_THIS_NODE = CLI_ON_THE_RUNTIME ? "semver 1.0.14 (Debian)" : "a generated five-binary crate";

function generatedParityCrate(): Record<string, string> {
  const test = (name: string) => `#[test]\nfn ${name}() {\n    assert_eq!(parity::double(2), 4);\n}\n`;
  return {
    "Cargo.toml": manifest("parity"),
    "src/lib.rs":
      "/// ```\n/// assert_eq!(parity::double(3), 6);\n/// ```\npub fn double(x: u32) -> u32 {\n    x * 2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() {\n        assert_eq!(super::double(1), 2);\n    }\n\n    #[test]\n    #[ignore]\n    fn ignored() {}\n}\n",
    "tests/first.rs": test("first"),
    "tests/second.rs": test("second"),
    "tests/third.rs": test("third"),
  };
}

describe("kiln cargo against a real server (embedded, listening on loopback)", () => {
  let endpoint: string;
  let token: string;
  let client: KilnClient;
  let close: () => Promise<void>;
  let env: Record<string, string>;
  let storage: Awaited<ReturnType<typeof startListeningEmbedded>>["storage"];
  let tenant: string;

  before(async () => {
    const embedded = await startListeningEmbedded();
    endpoint = embedded.endpoint;
    token = embedded.token;
    close = embedded.close;
    storage = embedded.storage;
    tenant = embedded.tenant;
    await onboardRepository(
      embedded.storage,
      { tenantId: embedded.tenant, name: "acme/semver", onboardedBy: "test" },
      new Date(),
    );
    client = createClient({ endpoint, token });
    env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: token };
  });
  after(async () => {
    await close();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  it(`${PARITY_CRATE_ON_THIS_NODE}: kiln cargo test gives the same per-binary results as local cargo; jobs commands read it`, async () => {
    const {
      debianCrate,
      debianCrateInstalled,
      materialize,
      referenceCargoTest,
      directTestCounts,
      evidenceTestCounts,
      withoutEmpty,
    } = await debian();
    // Two copies: local cargo writes Cargo.lock into its own, never into the one kiln captures.
    let dir: string;
    let directDir: string;
    if (CLI_ON_THE_RUNTIME) {
      assert.ok(debianCrateInstalled("semver", "1.0.14"), "apt-get install librust-semver-dev librust-serde-dev");
      dir = materialize(debianCrate("semver", "1.0.14"));
      directDir = materialize(debianCrate("semver", "1.0.14"));
      scratch.push(dir, directDir);
    } else {
      dir = workspace(generatedParityCrate());
      directDir = workspace(generatedParityCrate());
    }
    const targetDir = mkdtempSync(join(tmpdir(), "kiln-cli-direct-target-"));
    scratch.push(targetDir);
    // kiln and the local run at the same time (the local one in its own target dir, outside the workspace).
    const [run, direct] = await Promise.all([
      runCli(["cargo", "test", "--repository", "acme/semver", "--junit", join(targetDir, "junit.xml"), "--json"], {
        cwd: dir,
        env,
      }),
      referenceCargoTest(directDir, { targetDir }),
    ]);
    assert.equal(direct.exitCode, 0, direct.output.slice(-3000));
    assert.equal(run.code, 0, `${run.stderr}\n${run.stdout.slice(-3000)}`);
    const lines = jsonLines(run);
    const result = lines.find((l) => l.type === "result");
    const upload = lines.find((l) => l.type === "upload");
    assert.equal(result.status, "passed");
    assert.equal(result.exit_code, 0);
    assert.ok(
      lines.some((l) => l.type === "log" && /test result: ok/.test(l.text)),
      "the log was streamed",
    );
    assert.ok(upload.parts_total > 0);

    // `kiln jobs evidence --json` is the Evidence document: per-binary counts equal local cargo's.
    const evidence = await runCli(["jobs", "evidence", result.job, "--json"], { env });
    assert.equal(evidence.code, 0, evidence.stderr);
    const doc = JSON.parse(evidence.stdout);
    const keyed = (m: Map<string, unknown>) => Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)));
    const directCounts = withoutEmpty(directTestCounts(direct.output));
    assert.ok(directCounts.size >= 5, direct.output.slice(-2000));
    assert.deepEqual(keyed(evidenceTestCounts(doc.report.tests)), keyed(directCounts));
    const passed = [...directCounts.values()].reduce((n, c) => n + c.passed, 0);
    assert.equal(result.tests.passed, passed);
    assert.equal(result.tests.failed, 0);
    // --junit wrote the evidence's JUnit document: a testcase per test of the evidence (issue 37).
    const junit = readFileSync(join(targetDir, "junit.xml"), "utf8");
    assert.equal(junit.split("<testcase ").length - 1, (doc.report.tests as Doc[]).length);
    assert.match(junit, /^<\?xml version="1.0" encoding="UTF-8"\?>\n<testsuites name="kiln job /);

    // The job ran exactly the captured bytes: its upload's manifest digest is the local one.
    const local = buildArchive(captureWorkspace(dir, { git: false }));
    assert.equal(upload.manifest_sha256, local.manifestSha256);
    const status = await client.call("sources.status", {
      params: { upload: upload.upload },
      query: { repository: "acme/semver" },
    });
    assert.equal(status.manifest_sha256, local.manifestSha256);
    assert.equal(status.admission.job, result.job);

    const get = await runCli(["jobs", "get", result.job, "--json"], { env });
    assert.equal(JSON.parse(get.stdout).status, "passed");
    const logs = await runCli(["jobs", "logs", result.job, "--json"], { env });
    const records = logs.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.ok(records.length > 0 && records.every((r) => typeof r.sequence === "number"));
    const follow = await runCli(["jobs", "logs", result.job, "--follow", "--json"], { env });
    assert.equal(follow.code, 0, follow.stderr);
    assert.deepEqual(
      follow.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).sequence),
      records.map((r) => r.sequence),
      "following a settled log streams every record once and ends",
    );
    const list = await runCli(["jobs", "list", "--json", "--repository", "acme/semver"], { env });
    assert.ok((JSON.parse(list.stdout).jobs as Doc[]).some((j) => j.id === result.job));
    const table = await runCli(["jobs", "list"], { env });
    assert.match(table.stdout, /^JOB\s+STATUS\s+REPOSITORY/);
    assert.match(table.stdout, new RegExp(`${result.job}\\s+passed\\s+acme/semver`));
    const artifacts = await runCli(["jobs", "artifacts", result.job, "--json"], { env });
    assert.equal(artifacts.code, 0, artifacts.stderr);
    // A test job publishes cargo's --timings report and its junit.xml though it asked for nothing (issue 37).
    assert.deepEqual(
      (JSON.parse(artifacts.stdout).publications as Doc[]).flatMap((p) => (p.files as Doc[]).map((f) => f.path)),
      ["cargo-timings/cargo-timing.html", "junit.xml"],
    );
    const cancel = await runCli(["jobs", "cancel", result.job, "--json"], { env });
    assert.equal(cancel.code, 2, "a finished job cannot be cancelled");
    assert.equal(JSON.parse(cancel.stdout).code, "conflict");
  });

  it("a git workspace with a failing test exits with cargo's code (101, as local cargo); retry and cancel via kiln jobs", async () => {
    const root = workspace({
      "Cargo.toml": manifest("failing"),
      ".gitignore": "/target\n/secret.txt\n",
      "src/lib.rs":
        "pub fn two() -> u32 { 2 }\n#[cfg(test)]\nmod tests {\n  #[test] fn good() { assert_eq!(super::two(), 2); }\n  #[test] fn bad() { assert_eq!(super::two(), 3); }\n}\n",
      "secret.txt": "not captured",
    });
    execFileSync("git", ["-C", root, "init", "-q"]);
    execFileSync("git", ["-C", root, "remote", "add", "origin", "git@github.com:acme/widget.git"]);
    execFileSync("git", ["-C", root, "add", "Cargo.toml", ".gitignore"]);
    // src/lib.rs stays untracked (not ignored): it is captured all the same.
    const local = execFileSyncStatus("cargo", ["test", "--offline", "-q"], root);
    assert.equal(local, 101, "local cargo test exits 101 on a failing test");
    rmSync(join(root, "target"), { recursive: true, force: true });
    rmSync(join(root, "Cargo.lock"), { force: true });

    const run = await runCli(["cargo", "test", "--json"], { cwd: root, env });
    assert.equal(run.code, 101, run.stderr);
    const lines = jsonLines(run);
    const result = lines.find((l) => l.type === "result");
    assert.equal(lines.find((l) => l.type === "job").repository, "acme/widget", "repository from the git remote");
    assert.equal(result.status, "failed");
    assert.equal(result.cargo_exit_code, 101);
    assert.deepEqual([result.tests.passed, result.tests.failed], [1, 1]);
    assert.equal(result.tests.failed_tests.length, 1);
    assert.match(result.tests.failed_tests[0], /tests::bad/);
    const human = await runCli(["cargo", "test", "--service-log"], { cwd: root, env });
    assert.equal(human.code, 101);
    assert.match(human.stderr, /^\[kiln\] attempt 1 of \S+ on /m, "--service-log shows the service's lines");
    assert.match(human.stdout, /test tests::bad \.\.\. FAILED/);
    assert.match(human.stderr, /test summary: 1 passed; 1 failed; 0 ignored/);

    const retry = await runCli(["jobs", "retry", result.job, "--json"], { env });
    assert.equal(retry.code, 0, retry.stderr);
    const receipt = JSON.parse(retry.stdout);
    assert.equal(receipt.original, result.job);
    const cancel = await runCli(["jobs", "cancel", receipt.retry, "--json"], { env });
    if (cancel.code === 0) assert.equal(JSON.parse(cancel.stdout).state, "cancellation_requested");
    else assert.equal(JSON.parse(cancel.stdout).code, "conflict", "only when the retry already finished");
  });

  it("--check reports the check run for HEAD, and says so when the captured workspace differs from HEAD", async () => {
    const root = workspace({
      "Cargo.toml": manifest("checked"),
      ".gitignore": "/target\n",
      "src/lib.rs": "pub fn two() -> u32 { 2 }\n",
    });
    const git = (...args: string[]) =>
      execFileSync("git", ["-C", root, "-c", "user.email=t@kiln.test", "-c", "user.name=t", ...args], {
        encoding: "utf8",
      }).trim();
    git("init", "-q");
    git("remote", "add", "origin", "git@github.com:acme/widget.git");

    const uncommitted = await runCli(["cargo", "check", "--check", "--json"], { cwd: root, env });
    assert.equal(uncommitted.code, 2, "no commit: nothing to report a check run for");
    assert.match(uncommitted.stderr, /--check reports a check run for HEAD, and this workspace has no git commit/);

    git("add", "-A");
    git("commit", "-q", "-m", "first");
    const head = git("rev-parse", "HEAD");
    const clean = await runCli(["cargo", "check", "--check", "--json"], { cwd: root, env });
    assert.equal(clean.code, 0, clean.stderr);
    const submitted = jsonLines(clean).find((l) => l.type === "job");
    assert.deepEqual(submitted.check, { head_sha: head, workspace_differs: [] });
    const row = await storage.db
      .selectFrom("jobs")
      .select("head_sha")
      .where("id", "=", submitted.job)
      .executeTakeFirst();
    assert.equal(row?.head_sha, head, "the job carries check.head_sha = HEAD");

    writeFileSync(join(root, "src/lib.rs"), "pub fn two() -> u32 { 1 + 1 }\n");
    writeFileSync(join(root, "src/extra.rs"), "pub fn three() -> u32 { 3 }\n");
    const dirty = await runCli(["cargo", "check", "--check"], { cwd: root, env });
    assert.equal(dirty.code, 0, dirty.stderr);
    assert.match(
      dirty.stderr,
      new RegExp(
        `--check: the captured workspace differs from HEAD ${head.slice(0, 12)} \\(uncommitted: src/extra\\.rs, src/lib\\.rs\\)`,
      ),
    );
  });

  it("--artifact downloads published files under target/kiln-artifacts/<job>/", async () => {
    const root = workspace({ "Cargo.toml": manifest("hello"), "src/main.rs": 'fn main() { println!("hi"); }\n' });
    // No git and no --repository: the repository (and the size) come from the config file.
    const home = freshConfigHome();
    mkdirSync(join(home, "kiln"));
    writeFileSync(join(home, "kiln", "config.json"), JSON.stringify({ repository: "acme/widget", size: "kiln2-cpu" }));
    const run = await runCli(["cargo", "build", "--artifact", "debug/hello", "--artifact", "debug/hello.d", "--json"], {
      cwd: root,
      env: { ...env, XDG_CONFIG_HOME: home },
    });
    assert.equal(run.code, 0, run.stderr);
    const result = jsonLines(run).find((l) => l.type === "result");
    // The two asked for, and cargo's --timings report every build job publishes (issue 37).
    assert.equal(result.artifacts.length, 3, JSON.stringify(result));
    const file = join(root, "target", "kiln-artifacts", result.job, "debug", "hello");
    assert.ok(existsSync(file));
    assert.ok(statSync(file).size > 1000);
    // The built binary keeps its execute bit and runs as downloaded; the dep-info file stays plain.
    assert.notEqual(statSync(file).mode & 0o100, 0, "the binary is executable");
    assert.equal(execFileSync(file, { encoding: "utf8" }), "hi\n");
    assert.equal(statSync(`${file}.d`).mode & 0o111, 0, "hello.d is not");
    const inventory = await client.call("jobs.artifacts", { params: { id: result.job } });
    const published = inventory.publications.flatMap((p) => p.files);
    assert.deepEqual(published.map((f) => [f.path, (f as { executable?: boolean }).executable]).sort(), [
      ["cargo-timings/cargo-timing.html", false],
      ["debug/hello", true],
      ["debug/hello.d", false],
    ]);
  });

  it("Ctrl-C during a running job cancels it and exits 130", async () => {
    const root = workspace({
      "Cargo.toml": manifest("sleepy"),
      "src/lib.rs": "#[test] fn slow() { std::thread::sleep(std::time::Duration::from_secs(300)); }\n",
    });
    const cli = startCli(["cargo", "test", "--repository", "acme/widget"], { cwd: root, env });
    let job = "";
    await until(
      () => {
        job = /job (\S+) submitted/.exec(cli.stderr())?.[1] ?? "";
        return job !== "" && /running 1 test/.test(cli.stdout());
      },
      180_000,
      () => cli.stderr() + cli.stdout(),
    );
    cli.child.kill("SIGINT");
    const done = await cli.done;
    assert.equal(done.code, 130, done.stderr);
    assert.match(done.stderr, /interrupted: cancelling job/);
    assert.doesNotMatch(done.stderr, /\[kiln\] attempt 1 of/, "without --service-log only cargo's lines are shown");
    await until(
      async () => (await client.call("jobs.get", { params: { id: job } })).status === "cancelled",
      30_000,
      () => `job ${job} not cancelled`,
    );
  });

  it("with no --size and no configured size, the job runs at the tenant's default_size (issue 34: the setting decides)", async () => {
    // What a tenant admin sets with tenant.settings.write (this test's token reads and submits only).
    const setSize = async (size: "kiln2-cpu" | "kiln4-cpu") => {
      const written = await writeTenantSettings(storage, {
        tenantId: tenant,
        expectedVersion: (await client.call("tenant.settings.get", {})).version,
        changes: { defaultSize: size, allowedSizes: ["kiln2-cpu", "kiln4-cpu"] },
        changedBy: "test",
        now: new Date(),
      });
      assert.equal(written.kind, "written");
    };
    await setSize("kiln4-cpu");
    try {
      const root = workspace({ "Cargo.toml": manifest("sized"), "src/lib.rs": "pub fn one() -> u32 { 1 }\n" });
      const cli = startCli(["cargo", "check", "--repository", "acme/widget"], { cwd: root, env });
      let job = "";
      await until(
        () => {
          job = /job (\S+) submitted/.exec(cli.stderr())?.[1] ?? "";
          return job !== "";
        },
        180_000,
        () => cli.stderr() + cli.stdout(),
      );
      assert.match(cli.stderr(), new RegExp(`job ${job} submitted \\(kiln4-cpu\\)`));
      // The service stored the size the tenant's setting named (the job row, not only the CLI's words).
      assert.equal((await readJob(storage, { tenantId: tenant, jobId: job }))?.job.size, "kiln4-cpu");
      // --size still wins over the tenant's setting.
      cli.child.kill("SIGTERM");
      await cli.done;
      const named = startCli(["cargo", "check", "--repository", "acme/widget", "--size", "kiln2-cpu"], {
        cwd: root,
        env,
      });
      await until(
        () => /job (\S+) submitted \(kiln2-cpu\)/.test(named.stderr()),
        180_000,
        () => named.stderr() + named.stdout(),
      );
      named.child.kill("SIGTERM");
      await named.done;
    } finally {
      await setSize("kiln2-cpu");
    }
  });

  it("SIGTERM (what CI runners and `timeout` send) of a following run cancels the remote job and exits 143; the job's page is printed", async () => {
    const root = workspace({
      "Cargo.toml": manifest("sleepy"),
      "src/lib.rs":
        "#[test] fn quick() {}\n#[test] fn slow() { std::thread::sleep(std::time::Duration::from_secs(300)); }\n",
    });
    const cli = startCli(["cargo", "test", "--repository", "acme/widget", "--", "--test-threads=1"], {
      cwd: root,
      env,
    });
    let job = "";
    await until(
      () => {
        job = /job (\S+) submitted/.exec(cli.stderr())?.[1] ?? "";
        return job !== "" && /test quick \.\.\. ok/.test(cli.stdout());
      },
      180_000,
      () => cli.stderr() + cli.stdout(),
    );
    const page = `${endpoint}/jobs/${job}`;
    assert.match(cli.stderr(), new RegExp(`job ${job} submitted \\(kiln2-cpu\\): ${page.replaceAll(".", "\\.")}\n`));
    cli.child.kill("SIGTERM");
    const done = await cli.done;
    assert.equal(done.signal, null, "the CLI handled the signal (cancelled the job) rather than dying of it");
    assert.equal(done.code, 143, done.stderr);
    assert.match(done.stderr, new RegExp(`interrupted: cancelling job ${job} \\(SIGTERM\\)`));
    const finished = await client.call("jobs.get", { params: { id: job } });
    assert.equal(finished.status, "cancelled", "the job had ended cancelled before the CLI exited");
    // One final line with the real exit code and the page; the tests that did not run are not crashes.
    const last = done.stderr.trim().split("\n").at(-1) ?? "";
    assert.equal(last, `[kiln] job ${job} cancelled (SIGTERM): ${page}; exit 143`);
    assert.doesNotMatch(done.stderr, /crashed|\(unattributed\)/);
    const evidence = await client.call("jobs.evidence", { params: { id: job } });
    assert.doesNotMatch(JSON.stringify(evidence), /crashed before reporting/);

    const opened = await runCli(["jobs", "open", job, "--no-browser"], { env });
    assert.equal(opened.code, 0, opened.stderr);
    assert.equal(opened.stdout.trim(), page);
    // Where a browser is configured ($BROWSER), `jobs open` starts it on the page.
    const browser = workspace({ "browser.sh": '#!/bin/sh\necho "$1" > "$(dirname "$0")/opened"\n' });
    chmodSync(join(browser, "browser.sh"), 0o755);
    const shown = await runCli(["jobs", "open", job], { env: { ...env, BROWSER: join(browser, "browser.sh") } });
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stderr, /opened in the browser/);
    await until(
      () => existsSync(join(browser, "opened")) && readFileSync(join(browser, "opened"), "utf8") === `${page}\n`,
      30_000,
      () => "the browser was not started on the page",
    );
  });

  it("after a one-file edit the re-run reuses the last upload's packs and sends only that file; the job sees the edit", async () => {
    const files: Record<string, string | Buffer> = {
      "Cargo.toml": manifest("packed"),
      "src/lib.rs":
        "pub fn two() -> u32 { 2 }\n#[cfg(test)]\nmod tests {\n  #[test] fn two() { assert_eq!(super::two(), 2); }\n}\n",
    };
    for (let i = 0; i < 60; i++) files[`data/f${String(i).padStart(2, "0")}.txt`] = randomBytes(20_000).toString("hex");
    const root = workspace(files);
    const cacheHome = mkdtempSync(join(tmpdir(), "kiln-cli-cache-"));
    scratch.push(cacheHome);
    const withCache = { ...env, XDG_CACHE_HOME: cacheHome };
    const upload = (run: CliRun) => jsonLines(run).find((l) => l.type === "upload");

    const first = await runCli(["cargo", "test", "--repository", "acme/widget", "--json"], {
      cwd: root,
      env: withCache,
    });
    assert.equal(first.code, 0, first.stderr);
    // Beside it, the generation its job claimed (unchanged-reruns.sandbox.test.ts).
    const kept = readdirSync(join(cacheHome, "kiln/layouts")).filter((name) => !name.endsWith(".claimed.json"));
    assert.equal(kept.length, 1, "one layout kept for this endpoint and repository");
    assert.equal(statSync(join(cacheHome, "kiln/layouts", kept[0] as string)).mode & 0o777, 0o600);

    const edited =
      "pub fn two() -> u32 { 3 }\n#[cfg(test)]\nmod tests {\n  #[test] fn two() { assert_eq!(super::two(), 2); }\n}\n";
    writeFileSync(join(root, "src/lib.rs"), edited);
    const second = await runCli(["cargo", "test", "--repository", "acme/widget", "--json"], {
      cwd: root,
      env: withCache,
    });
    assert.equal(second.code, 101, "the job ran the edited source");
    const resent = upload(second);
    assert.equal(resent.parts_sent, 1);
    assert.equal(resent.bytes_sent, Buffer.byteLength(edited), "only the edited file's bytes travelled");
    assert.equal(resent.parts_reused, resent.parts_total - 1);
    assert.ok(resent.bytes_total > resent.bytes_sent + 1_000_000, "its old pack (with the old bytes) is reused whole");

    // Another tenant's run with the same cache: the service holds none of its packs and the
    // reused one cannot be rebuilt (it holds the old src/lib.rs), so the CLI lays out afresh.
    const { personWithToken } = await serverTesting();
    const stranger = await personWithToken(storage, { role: "member", now: new Date() });
    await onboardRepository(
      storage,
      { tenantId: stranger.tenant, name: "acme/widget", onboardedBy: "test" },
      new Date(),
    );
    const third = await runCli(["cargo", "test", "--repository", "acme/widget", "--json"], {
      cwd: root,
      env: { ...withCache, KILN_TOKEN: stranger.token },
    });
    assert.equal(third.code, 101, third.stderr);
    const afresh = upload(third);
    assert.equal(afresh.bytes_sent, afresh.bytes_total, "every part sent");
    assert.equal(afresh.manifest_sha256, resent.manifest_sha256, "the same tree");
    assert.ok(afresh.bytes_total < resent.bytes_total, "the fresh layout carries no old bytes");
  });

  it("killed mid-upload and run again: same upload, nothing held is re-sent, the digest is the local manifest's", async () => {
    const files: Record<string, string | Buffer> = {
      "Cargo.toml": manifest("bulky"),
      "src/lib.rs": "pub fn f() {}\n",
    };
    for (let i = 0; i < 6; i++) files[`data/blob${i}.bin`] = randomBytes(3 * 1024 * 1024 + i);
    for (let d = 0; d < 10; d++) files[`assets/d${d}/small.bin`] = randomBytes(40_000);
    const root = workspace(files);
    const archive = buildArchive(captureWorkspace(root, { git: false }));
    const upload = uploadIdOf("acme/widget", archive, 0);
    const proxy = new RecordingProxy(endpoint);
    const viaProxy = { ...env, KILN_ENDPOINT: await proxy.start() };
    try {
      proxy.putDelayMs = 400;
      const first = startCli(["cargo", "build", "--repository", "acme/widget", "--concurrency", "1"], {
        cwd: root,
        env: viaProxy,
      });
      const received = async () => {
        try {
          const s = await client.call("sources.status", { params: { upload }, query: { repository: "acme/widget" } });
          return s.parts_received;
        } catch (error) {
          if (error instanceof KilnRefusal && error.code === "not_found") return 0;
          throw error;
        }
      };
      await until(
        async () => proxy.puts.filter((p) => p.status >= 200 && p.status < 300).length >= 2,
        60_000,
        () => first.stderr(),
      );
      first.child.kill("SIGKILL");
      await first.done;
      // A put the killed run had in flight may still land: wait until the proxy has none.
      await proxy.settled();
      const held = await received();
      assert.ok(held >= 2 && held < archive.sources.length, `held ${held} of ${archive.sources.length}`);
      const putsBefore = proxy.puts.length;

      proxy.putDelayMs = 0;
      const second = await runCli(["cargo", "build", "--repository", "acme/widget", "--json"], {
        cwd: root,
        env: viaProxy,
      });
      assert.equal(second.code, 0, second.stderr);
      const lines = jsonLines(second);
      const summary = lines.find((l) => l.type === "upload");
      assert.equal(summary.upload, upload, "the second run resumed the same upload");
      const secondPuts = proxy.puts.slice(putsBefore);
      assert.equal(secondPuts.length, summary.parts_sent, "every chunk.put of the second run is counted");
      assert.equal(summary.parts_sent, archive.sources.length - held, "only the parts not held were sent");
      assert.equal(summary.parts_reused, held);
      const status = await client.call("sources.status", { params: { upload }, query: { repository: "acme/widget" } });
      assert.equal(status.state, "verified");
      assert.equal(status.manifest_sha256, archive.manifestSha256);
      const result = lines.find((l) => l.type === "result");
      assert.equal(status.admission.job, result.job);
      assert.equal(result.status, "passed");
    } finally {
      await proxy.stop();
    }
  });
});

function execFileSyncStatus(command: string, args: string[], cwd: string): number {
  try {
    execFileSync(command, args, {
      cwd,
      stdio: "ignore",
      env: { ...process.env, CARGO_TARGET_DIR: join(cwd, "target") },
    });
    return 0;
  } catch (error) {
    return (error as { status: number }).status;
  }
}
