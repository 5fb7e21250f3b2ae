import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { closeSync, constants, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CLI_DIALECTS, freshConfigHome, KILN_BIN, runCli, serverTesting, startCli, until } from "./harness.js";

/** A Cargo workspace (no git): enough for `kiln cargo` to find its root and read its tree. */
function workspace(): string {
  const root = mkdtempSync(join(tmpdir(), "kiln-cli-repos-"));
  writeFileSync(join(root, "Cargo.toml"), '[package]\nname = "fresh"\nversion = "0.1.0"\nedition = "2021"\n');
  mkdirSync(join(root, "src"));
  writeFileSync(join(root, "src/lib.rs"), "pub fn f() {}\n");
  return root;
}

/**
 * Runs the built `kiln` with its stdout a pipe nobody reads any more (the reader end closed
 * before the CLI starts), as `kiln … | head -3` is once head has its lines: every write to
 * stdout fails with EPIPE, deterministically.
 */
function runWithClosedStdout(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  const fifo = join(mkdtempSync(join(tmpdir(), "kiln-cli-epipe-")), "out");
  execFileSync("mkfifo", [fifo]);
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writer = openSync(fifo, constants.O_WRONLY);
  closeSync(reader);
  const child = spawn(process.execPath, [KILN_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", writer, "pipe"],
  });
  closeSync(writer);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stderr }));
  });
}

for (const dialect of CLI_DIALECTS) {
  describe(`kiln repos against a real server (${dialect.name})`, { skip: dialect.skip }, () => {
    let close: () => Promise<void>;
    let admin: Record<string, string>;
    let member: Record<string, string>;
    let root: string;

    before(async () => {
      const { testApp, personWithToken } = await serverTesting();
      const t = await testApp(await dialect.openFresh());
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      const endpoint = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
      close = t.close;
      const owner = await personWithToken(t.storage, { role: "admin" });
      const person = await personWithToken(t.storage, { tenant: owner.tenant, role: "member" });
      admin = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: owner.token };
      member = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: person.token };
      root = workspace();
    });
    after(async () => {
      await close();
      rmSync(root, { recursive: true, force: true });
    });

    it("kiln cargo on a repository not onboarded is refused before the tree is read, naming `kiln repos add`", async () => {
      const run = await runCli(["cargo", "build", "--repository", "acme/fresh"], { cwd: root, env: member });
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /refused \(not_found\): repository acme\/fresh is not onboarded/);
      assert.match(run.stderr, /`kiln repos add acme\/fresh`/);
      assert.doesNotMatch(run.stderr, /sources\.capabilities/, "no operation id");
      assert.doesNotMatch(run.stderr, / files \(/, "refused before the workspace was scanned and hashed");
    });

    it("a wrong token is refused before the tree is read, saying to sign in", async () => {
      const run = await runCli(["cargo", "build", "--repository", "acme/fresh"], {
        cwd: root,
        env: { ...member, KILN_TOKEN: "kiln_cli_not-a-real-token-at-all" },
      });
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /refused \(unauthenticated\): .*kiln login/);
      assert.doesNotMatch(run.stderr, / files \(/);
    });

    it("a member is refused and told to ask an admin; an admin onboards it; again changes nothing", async () => {
      const refused = await runCli(["repos", "add", "acme/fresh"], { env: member });
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /refused \(out_of_scope\): .*ask a tenant admin or owner/);
      assert.doesNotMatch(refused.stderr, /repositories\.onboard/);

      const added = await runCli(["repos", "add", "acme/fresh"], { env: admin });
      assert.equal(added.code, 0, added.stderr);
      assert.match(added.stdout, /^acme\/fresh onboarded/m);
      const again = await runCli(["repos", "add", "acme/fresh", "--json"], { env: admin });
      assert.equal(again.code, 0, again.stderr);
      assert.equal((JSON.parse(again.stdout) as { created: boolean }).created, false);

      const listed = await runCli(["repos", "list"], { env: member });
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /^acme\/fresh\s+0$/m);
      // Onboarded, the same run gets past the check to reading the tree (this server has no host
      // to run the job, so the run is stopped once it has).
      const cli = startCli(["cargo", "build", "--repository", "acme/fresh"], { cwd: root, env: member });
      await until(
        () => /acme\/fresh: \d+ files \(/.test(cli.stderr()),
        60_000,
        () => cli.stderr(),
      );
      cli.child.kill("SIGTERM");
      const stopped = await cli.done;
      assert.doesNotMatch(stopped.stderr, /not onboarded/);
    });

    it("a name that is not owner/name is refused in the user's words, without a pattern", async () => {
      const run = await runCli(["repos", "add", "acme"], { env: admin });
      assert.equal(run.code, 2);
      assert.match(run.stderr, /owner\/name .* e\.g\. acme\/widget; got "acme"/);
      assert.doesNotMatch(run.stderr, /\^\[/);
    });

    it("a closed output (kiln … | head) ends the command quietly: no EPIPE stack trace", async () => {
      for (const args of [["repos", "list"], ["jobs", "list"], ["--help"]]) {
        const run = await runWithClosedStdout(args, admin);
        assert.equal(run.code, 0, `${args.join(" ")}: ${run.stderr}`);
        assert.equal(run.stderr, "", args.join(" "));
      }
    });
  });
}
