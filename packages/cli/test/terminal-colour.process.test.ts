import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { openSqliteForTest } from "@kiln/storage/testing";
import { withTerminalColour } from "../src/commands/cargo.js";
import { CLI_NODE, freshConfigHome, KILN_BIN, runCli, serverTesting, startCli, until } from "./harness.js";

/** A Cargo workspace (no git): enough for `kiln cargo` to capture and submit it. */
function workspace(): string {
  const root = mkdtempSync(join(tmpdir(), "kiln-cli-colour-"));
  writeFileSync(join(root, "Cargo.toml"), '[package]\nname = "colour"\nversion = "0.1.0"\nedition = "2021"\n');
  mkdirSync(join(root, "src"));
  writeFileSync(join(root, "src/lib.rs"), "pub fn f() {}\n");
  return root;
}

/** The environment a run starts from: the test process's, without any colour preference of its own. */
function plainEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("KILN_") && name !== "NO_COLOR" && name !== "CARGO_TERM_COLOR") env[name] = value;
  }
  return { ...env, ...extra };
}

/** Runs `kiln <args>` on a pseudo-terminal (util-linux `script`), its output read as a terminal would show it. */
function startInTerminal(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): { child: ChildProcess; output(): string } {
  const quote = (word: string) => `'${word.replaceAll("'", "'\\''")}'`;
  const child = spawn("script", ["-qec", [CLI_NODE, KILN_BIN, ...args].map(quote).join(" "), "/dev/null"], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.setEncoding("utf8").on("data", (c: string) => {
    output += c;
  });
  return { child, output: () => output };
}

describe("kiln cargo colours cargo's output for a terminal", () => {
  let close: () => Promise<void>;
  let endpoint: string;
  let token: string;
  let root: string;
  let env: Record<string, string>;

  before(async () => {
    const { testApp, personWithToken } = await serverTesting();
    const t = await testApp(await openSqliteForTest());
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    endpoint = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    close = t.close;
    token = (await personWithToken(t.storage, { role: "admin" })).token;
    env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: token };
    root = workspace();
    const added = await runCli(["repos", "add", "acme/colour"], { env });
    assert.equal(added.code, 0, added.stderr);
  });
  after(async () => {
    await close();
    rmSync(root, { recursive: true, force: true });
  });

  /** The command of the job a run submitted (this server has no host: the job waits, queued). */
  async function submittedCommand(output: () => string): Promise<string> {
    let id: string | undefined;
    await until(
      () => {
        id = /job (job_[A-Za-z0-9]+) submitted/.exec(output())?.[1];
        return id !== undefined;
      },
      60_000,
      output,
    );
    const res = await fetch(`${endpoint}/api/jobs/${id}`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200);
    return ((await res.json()) as { description: string }).description;
  }

  async function inTerminal(extra: Record<string, string>, args: string[] = []): Promise<string> {
    const run = startInTerminal(
      ["cargo", "build", "--repository", "acme/colour", ...args],
      root,
      plainEnvironment({ ...env, ...extra }),
    );
    const ended = new Promise((resolve) => run.child.once("close", resolve));
    try {
      return await submittedCommand(run.output);
    } finally {
      // script passes the signal to the CLI, which cancels its job and exits.
      run.child.kill("SIGTERM");
      await ended;
    }
  }

  async function inPipe(extra: Record<string, string>): Promise<string> {
    const cli = startCli(["cargo", "build", "--repository", "acme/colour"], {
      cwd: root,
      env: { ...env, NO_COLOR: "", CARGO_TERM_COLOR: "", ...extra },
    });
    try {
      return await submittedCommand(cli.stderr);
    } finally {
      cli.child.kill("SIGTERM");
      await cli.done;
    }
  }

  it("on a terminal cargo runs with --color=always, and the job's command says so", async () => {
    assert.equal(await inTerminal({}), "cargo build --color=always");
  });

  it("NO_COLOR on a terminal, or CARGO_TERM_COLOR=never, keeps it off", async () => {
    assert.equal(await inTerminal({ NO_COLOR: "1" }), "cargo build");
    assert.equal(await inTerminal({ CARGO_TERM_COLOR: "never" }), "cargo build");
  });

  it("into a pipe cargo is not coloured, unless CARGO_TERM_COLOR=always asks", async () => {
    assert.equal(await inPipe({}), "cargo build");
    assert.equal(await inPipe({ CARGO_TERM_COLOR: "always" }), "cargo build --color=always");
  });

  it("the person's own --color wins, and --json is never coloured", () => {
    const tty = { isTTY: true, env: {}, json: false };
    assert.deepEqual(withTerminalColour(["--color", "never", "--workspace"], tty), ["--color", "never", "--workspace"]);
    assert.deepEqual(withTerminalColour(["--", "--color=never"], tty), ["--color=always", "--", "--color=never"]);
    assert.deepEqual(withTerminalColour([], { ...tty, json: true }), []);
    assert.deepEqual(withTerminalColour([], { ...tty, env: { CARGO_TERM_COLOR: "auto", NO_COLOR: "" } }), [
      "--color=always",
    ]);
  });
});
