/**
 * After a red build the failure is shown where people look (issue 36): real cargo in the real
 * sandbox behind a real server on loopback, the built `kiln` as a process, and the dashboard's
 * job page as a signed-in viewer sees it. A crate that does not compile and a crate whose test
 * panics after 5,000 lines of output (its panic on the log's sixth page).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { addPersonToTenant, onboardRepository, readJob } from "@kiln/storage";
import { type CliRun, freshConfigHome, runCli, serverTesting, startListeningEmbedded } from "./harness.js";

// biome-ignore lint/suspicious/noExplicitAny: JSON documents read loosely in assertions.
type Doc = any;

const REPOSITORY = "acme/failures";
const manifest = (name: string) =>
  `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n`;

const BROKEN = {
  "Cargo.toml": manifest("broken"),
  "src/lib.rs": 'pub fn answer() -> u32 {\n    let x: u32 = "forty-two";\n    x\n}\n',
};

const NOISY = {
  "Cargo.toml": manifest("noisy"),
  "src/lib.rs":
    'pub fn two() -> u32 {\n    2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn quiet() {\n        assert_eq!(super::two(), 2);\n    }\n\n    #[test]\n    fn noisy() {\n        for i in 0..5000 {\n            println!("noise line {i}");\n        }\n        assert_eq!(super::two(), 3, "two is not three");\n    }\n}\n',
};

/** A Cargo workspace of two members, run from one member's directory: paths are the repository's. */
const NESTED = {
  "Cargo.toml": '[workspace]\nmembers = ["crates/core", "crates/app"]\nresolver = "2"\n',
  "crates/core/Cargo.toml": manifest("core"),
  "crates/core/src/lib.rs": BROKEN["src/lib.rs"],
  "crates/app/Cargo.toml": `${manifest("app")}core = { path = "../core" }\n`,
  "crates/app/src/lib.rs":
    '#[cfg(test)]\nmod tests {\n    #[test]\n    fn answer() {\n        assert_eq!(core::answer(), 43, "the answer is 42");\n    }\n}\n',
};

const scratch: string[] = [];
function workspace(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "kiln-cli-failures-"));
  scratch.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const resultOf = (run: CliRun): Doc =>
  run.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l))
    .find((l) => l.type === "result");

describe("the failure, first: kiln cargo, jobs.evidence and the job page name the error or panic and its file:line", () => {
  let embedded: Awaited<ReturnType<typeof startListeningEmbedded>>;
  let env: Record<string, string>;
  let cookie: string;

  before(async () => {
    embedded = await startListeningEmbedded();
    await onboardRepository(
      embedded.storage,
      { tenantId: embedded.tenant, name: REPOSITORY, onboardedBy: "test" },
      new Date(),
    );
    env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: embedded.endpoint, KILN_TOKEN: embedded.token };
    const email = `viewer@${embedded.tenant}.example`;
    await addPersonToTenant(embedded.storage, { tenantId: embedded.tenant, email, role: "viewer" }, new Date());
    const { signIn } = await serverTesting();
    cookie = await signIn(embedded.app, embedded.storage, email);
  });
  after(async () => {
    await embedded.close();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  const page = async (url: string) => {
    const res = await embedded.app.inject({ method: "GET", url, cookies: { kiln_session: cookie } });
    assert.equal(res.statusCode, 200, res.body);
    return res.body;
  };
  const logRecord = async (job: string, sequence: number): Promise<Doc> => {
    const res = await embedded.jobs.api("GET", `/api/jobs/${job}/logs?limit=1&cursor=l${sequence - 1}`);
    assert.equal(res.status, 200, res.body);
    return res.json().records[0];
  };

  it("a compile error: its code, message and src/lib.rs:2:18 in the CLI's summary, the job's failure, the evidence and the job page", async () => {
    const root = workspace(BROKEN);
    const human = await runCli(["cargo", "build", "--repository", REPOSITORY], { cwd: root, env });
    assert.equal(human.code, 101, human.stderr);
    assert.match(
      human.stderr,
      /\[kiln\] what failed:\n\[kiln\] {3}error\[E0308\]: mismatched types \(log #\d+\)\n\[kiln\] {5}--> src\/lib\.rs:2:18\n/,
    );
    assert.match(
      human.stderr,
      /; first: error\[E0308\]: mismatched types at src\/lib\.rs:2:18\)/,
      "the job line says it too",
    );

    const json = await runCli(["cargo", "build", "--repository", REPOSITORY, "--json"], { cwd: root, env });
    const result = resultOf(json);
    assert.equal(result.status, "failed");
    assert.equal(result.failure.cause, "build_error");
    assert.equal(result.failures.length, 1, JSON.stringify(result.failures));
    const [error] = result.failures;
    assert.deepEqual(
      [error.kind, error.code, error.message, error.location, error.attempt],
      [
        "compiler_error",
        "E0308",
        "mismatched types",
        { file: "src/lib.rs", line: 2, column: 18, in_repository: true, printed: "src/lib.rs:2:18" },
        1,
      ],
    );
    assert.match(error.rendered, /expected `u32`, found `&str`/);
    assert.equal((await logRecord(result.job, error.log_sequence)).text, "error[E0308]: mismatched types");

    const evidence = await runCli(["jobs", "evidence", result.job], { env });
    assert.match(evidence.stdout, /what failed:\n {2}error\[E0308\]: mismatched types/);

    const body = await page(`/jobs/${result.job}`);
    assert.match(body, /<section id="failures"><h2>What failed<\/h2>/);
    assert.match(
      body,
      /error\[E0308\]<\/strong>: mismatched types at <span class="mono location">src\/lib\.rs:2:18<\/span>/,
    );
    assert.ok(body.includes(`href="/jobs/${result.job}?log_line=${error.log_sequence}#L${error.log_sequence}"`));
  });

  it("a test that panics after 5,000 lines: the panic's message and src/lib.rs:17:9 everywhere, its output link on the log's sixth page", async () => {
    const root = workspace(NOISY);
    const run = await runCli(["cargo", "test", "--repository", REPOSITORY, "--json"], { cwd: root, env });
    assert.equal(run.code, 101, run.stderr);
    const result = resultOf(run);
    assert.equal(result.failure.cause, "test_failure");
    assert.match(
      result.failure.detail,
      /^1 test\(s\) failed; first: tests::noisy panicked at src\/lib\.rs:17:9: assertion `left == right` failed: two is not three$/,
    );
    assert.equal(result.failures.length, 1, JSON.stringify(result.failures));
    const [panic] = result.failures;
    assert.deepEqual(
      [panic.kind, panic.test, panic.target, panic.location?.file, panic.location?.line, panic.location?.column],
      ["test_panic", "tests::noisy", "noisy (lib)", "src/lib.rs", 17, 9],
    );
    assert.equal(panic.message.split("\n")[0], "assertion `left == right` failed: two is not three");
    assert.ok(panic.log_sequence > 5000, `the panic comes after the noise (log #${panic.log_sequence})`);
    assert.match(
      (await logRecord(result.job, panic.log_sequence)).text,
      /^thread 'tests::noisy'.* panicked at src\/lib\.rs:17:9:$/,
    );

    const evidence = JSON.parse((await runCli(["jobs", "evidence", result.job, "--json"], { env })).stdout);
    const noisy = evidence.report.tests.find((t: Doc) => t.name === "tests::noisy");
    assert.equal(noisy.panic.log_sequence, panic.log_sequence);
    assert.equal(noisy.panic.location.printed, "src/lib.rs:17:9");

    const human = await runCli(["jobs", "evidence", result.job], { env });
    assert.match(
      human.stdout,
      /what failed:\n {2}noisy \(lib\): tests::noisy panicked at src\/lib\.rs:17:9 \(log #\d+\)\n {6}assertion `left == right` failed: two is not three\n/,
    );

    // The job page's first log page does not hold the panic; its links open the page that does.
    const first = await page(`/jobs/${result.job}`);
    const link = `/jobs/${result.job}?log_line=${panic.log_sequence}#L${panic.log_sequence}`;
    assert.ok(!first.includes(`id="L${panic.log_sequence}"`), "the panic is past the first log page");
    assert.ok(
      first.includes(`data-line="${panic.log_sequence}" href="${link}">output</a>`),
      "the tests table links it",
    );
    assert.match(
      first,
      /<details class="panic"><summary>panicked at <span class="mono">src\/lib\.rs:17:9<\/span>: assertion `left == right` failed: two is not three<\/summary>/,
    );
    assert.match(
      first,
      /<li class="test-panic"><strong class="mono">noisy \(lib\): tests::noisy<\/strong> panicked at/,
    );
    const sixth = await page(link.replace(/#.*$/, ""));
    assert.match(
      sixth,
      new RegExp(
        `id="L${panic.log_sequence}"><a class="seq" href="#L${panic.log_sequence}">\\s*\\d+ </a><time class="ts"[^>]*>[^<]*</time>thread &#39;tests::noisy&#39;`,
      ),
    );
  });

  it("a nested workspace run from a member's directory: the error and the panic name repository paths (crates/…), not the member's", async () => {
    const root = workspace(NESTED);
    const member = join(root, "crates/app");
    const build = resultOf(
      await runCli(["cargo", "build", "--repository", REPOSITORY, "--json"], { cwd: member, env }),
    );
    assert.equal(build.failure.cause, "build_error");
    const [error] = build.failures;
    assert.deepEqual(
      [error.code, error.location?.file, error.location?.line, error.location?.in_repository],
      ["E0308", "crates/core/src/lib.rs", 2, true],
    );

    writeFileSync(join(root, "crates/core/src/lib.rs"), "pub fn answer() -> u32 {\n    42\n}\n");
    const test = resultOf(await runCli(["cargo", "test", "--repository", REPOSITORY, "--json"], { cwd: member, env }));
    assert.equal(test.failure.cause, "test_failure");
    const [panic] = test.failures;
    assert.deepEqual(
      [panic.test, panic.target, panic.location?.file, panic.location?.line, panic.location?.in_repository],
      ["tests::answer", "app (lib)", "crates/app/src/lib.rs", 5, true],
    );
    assert.match(test.failure.detail, /tests::answer panicked at crates\/app\/src\/lib\.rs:5:9: /);
  });

  it("a Cargo workspace in rust/ of a git repository: the check run's annotations name rust/src/lib.rs", async () => {
    const root = workspace({ "rust/Cargo.toml": BROKEN["Cargo.toml"], "rust/src/lib.rs": BROKEN["src/lib.rs"] });
    const git = (...args: string[]) =>
      execFileSync("git", ["-C", root, "-c", "user.email=t@kiln.test", "-c", "user.name=t", ...args], {
        encoding: "utf8",
      });
    git("init", "-q");
    git("add", "-A");
    git("commit", "-q", "-m", "broken");
    const build = resultOf(
      await runCli(["cargo", "build", "--repository", REPOSITORY, "--json"], { cwd: join(root, "rust"), env }),
    );
    assert.equal(build.failure.cause, "build_error");
    // The job's own paths are the Cargo workspace's; the check run names the repository's.
    assert.equal(build.failures[0].location?.file, "src/lib.rs");
    const record = await readJob(embedded.storage, { tenantId: embedded.tenant, jobId: build.job });
    assert.ok(record !== undefined);
    const { completedCheckRun } = await serverTesting();
    const checkRun: Doc = completedCheckRun(record, null, "https://kiln.example");
    assert.deepEqual(
      checkRun.output.annotations.map((a: Doc) => [a.path, a.start_line, a.annotation_level]),
      [["rust/src/lib.rs", 2, "failure"]],
    );
  });
});
