import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CLI_NODE,
  INSPECTOR_TOOL_ERROR,
  KILN_BIN,
  type KilnUnderTest,
  kilnEnv,
  kilnMcpTable,
  resultJson,
  run,
  runInspector,
  startKiln,
  toolNames,
} from "./harness.js";

/** Environment values as the SDK's stdio transport wants them (strings only). */
const stringEnv = (env: NodeJS.ProcessEnv): Record<string, string> =>
  Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));

describe("`kiln mcp` on stdio, against a real kiln server", () => {
  let kiln: KilnUnderTest;
  let token: string;
  const expected = () =>
    kilnMcpTable()
      .filter((row) => row.scope === "read" || row.scope === "submit")
      .map((row) => row.tool)
      .sort();

  before(async () => {
    kiln = await startKiln();
    token = await kiln.mintAgent(["read", "submit"], "stdio-agent");
  });
  after(() => kiln.close());

  it("the SDK's client starts the built bin, lists the credential's tools and calls them", async () => {
    const client = new Client({ name: "kiln-stdio-test", version: "0" });
    const transport = new StdioClientTransport({
      command: CLI_NODE,
      args: [KILN_BIN, "mcp"],
      env: stringEnv(kilnEnv(kiln, token)),
      stderr: "pipe",
    });
    await client.connect(transport);
    try {
      assert.equal(client.getServerVersion()?.name, "kiln");
      assert.deepEqual(await toolNames(client), expected());
      const identity = await client.callTool({ name: "identity_current", arguments: {} });
      assert.equal((resultJson(identity) as { principal: string }).principal, "agent:stdio-agent");
      const refused = await client.callTool({ name: "jobs_cancel", arguments: { id: "nope", idempotency_key: "c1" } });
      assert.equal(refused.isError, true);
      assert.equal((refused.structuredContent as { code: string }).code, "not_found");
    } finally {
      await client.close();
    }
  });

  it("reads the credential from KILN_CREDENTIAL_FILE (trimmed)", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "kiln-cred-")), "credential");
    writeFileSync(file, `  ${token}\n`, { mode: 0o600 });
    const client = new Client({ name: "kiln-stdio-test", version: "0" });
    await client.connect(
      new StdioClientTransport({
        command: CLI_NODE,
        args: [KILN_BIN, "mcp"],
        env: stringEnv(kilnEnv(kiln, "", { KILN_TOKEN: undefined, KILN_CREDENTIAL_FILE: file })),
        stderr: "pipe",
      }),
    );
    try {
      assert.deepEqual(await toolNames(client), expected());
    } finally {
      await client.close();
    }
  });

  it("writes nothing but JSON-RPC on stdout; diagnostics go to stderr and never name the credential", async () => {
    const child = spawn(CLI_NODE, [KILN_BIN, "mcp"], {
      env: kilnEnv(kiln, token),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const messages = [
      {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
      },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
      { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "jobs_get", arguments: { id: "missing" } } },
      { jsonrpc: "2.0", id: 4, method: "resources/templates/list" },
      {
        jsonrpc: "2.0",
        id: 5,
        method: "prompts/get",
        params: { name: "diagnose-a-failure", arguments: { job_id: "j" } },
      },
    ];
    const answered = new Promise<void>((resolve) => {
      child.stdout.on("data", () => {
        if (stdout.split("\n").filter((l) => l.includes('"id":5')).length > 0) resolve();
      });
    });
    for (const message of messages) child.stdin.write(`${JSON.stringify(message)}\n`);
    await answered;
    child.stdin.end();
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    assert.equal(code, 0, stderr);
    const lines = stdout.split("\n").filter((l) => l !== "");
    assert.equal(lines.length, 5, stdout);
    for (const line of lines) {
      const message = JSON.parse(line) as { jsonrpc: string; id: number };
      assert.equal(message.jsonrpc, "2.0");
      assert.ok([1, 2, 3, 4, 5].includes(message.id));
    }
    const refused = lines.map((l) => JSON.parse(l)).find((m) => m.id === 3);
    assert.equal(refused.result.isError, true);
    assert.equal(refused.result.structuredContent.code, "not_found");
    assert.match(stderr, /kiln mcp: \d+ tools for scopes \[read, submit\]/);
    assert.ok(!stderr.includes(token) && !stdout.includes(token), "the credential is never written");
  });

  it("the MCP Inspector CLI lists and calls tools over stdio", async () => {
    // The credential reaches the server as a file's path, never as an argument.
    const credentialFile = join(mkdtempSync(join(tmpdir(), "kiln-cred-")), "credential");
    writeFileSync(credentialFile, token, { mode: 0o600 });
    const server = [CLI_NODE, KILN_BIN, "mcp"];
    const serverEnv = { KILN_ENDPOINT: kiln.endpoint, KILN_CREDENTIAL_FILE: credentialFile };
    const listed = await runInspector(server, ["--method", "tools/list"], serverEnv);
    assert.equal(listed.code, 0, listed.stderr);
    const tools = (JSON.parse(listed.stdout) as { tools: { name: string }[] }).tools.map((t) => t.name).sort();
    assert.deepEqual(tools, expected());

    const called = await runInspector(
      server,
      ["--method", "tools/call", "--tool-name", "jobs_list", "--tool-arg", "limit=3"],
      serverEnv,
    );
    assert.equal(called.code, 0, called.stderr);
    const page = JSON.parse(called.stdout) as {
      isError?: boolean;
      structuredContent: { jobs: unknown[]; total: number };
    };
    assert.equal(page.isError, undefined);
    assert.deepEqual(page.structuredContent.jobs, []);

    const refused = await runInspector(
      server,
      ["--method", "tools/call", "--tool-name", "jobs_get", "--tool-arg", "id=missing"],
      serverEnv,
    );
    assert.equal(refused.code, INSPECTOR_TOOL_ERROR, refused.stderr);
    assert.equal(JSON.parse(refused.stderr.trim().split("\n").at(-1) ?? "").error.code, "tool_is_error");
    const refusal = JSON.parse(refused.stdout) as {
      isError: boolean;
      structuredContent: { code: string; status: number };
    };
    assert.equal(refusal.isError, true);
    assert.deepEqual(
      { code: refusal.structuredContent.code, status: refusal.structuredContent.status },
      { code: "not_found", status: 404 },
    );
  });

  it("refuses to start without a credential, or with one the API refuses", async () => {
    const none = await run(CLI_NODE, [KILN_BIN, "mcp"], {
      env: kilnEnv(kiln, "", { KILN_TOKEN: undefined, KILN_CREDENTIAL_FILE: undefined }),
    });
    assert.notEqual(none.code, 0);
    assert.equal(none.stdout, "");
    assert.match(none.stderr, /KILN_TOKEN/);
    const bogus = "kiln_agent_0000000000000000000000000000000000000000";
    const refused = await run(CLI_NODE, [KILN_BIN, "mcp"], { env: kilnEnv(kiln, bogus) });
    assert.notEqual(refused.code, 0);
    assert.equal(refused.stdout, "");
    assert.match(refused.stderr, /refused/);
    assert.ok(!refused.stderr.includes(bogus));
  });
});
