import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CLI_NODE,
  type HttpMcpProcess,
  INITIALIZE,
  INSPECTOR_TOOL_ERROR,
  KILN_BIN,
  type KilnUnderTest,
  kilnEnv,
  kilnMcpTable,
  MCP_POST_HEADERS,
  rawRequest,
  resultJson,
  run,
  runInspector,
  startHttpMcp,
  startKiln,
  toolNames,
} from "./harness.js";

const CALLER_TOKEN = "caller-token-0123456789abcdefghijklmnopqrstuvwxyz";

async function sdkClient(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: "kiln-http-test", version: "0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

describe("`kiln mcp http` (streamable HTTP), against a real kiln server", () => {
  let kiln: KilnUnderTest;
  let token: string;
  let open: HttpMcpProcess;
  const processes: HttpMcpProcess[] = [];
  const start = async (address: string, extra: NodeJS.ProcessEnv = {}) => {
    const started = await startHttpMcp(address, kilnEnv(kiln, token, extra));
    processes.push(started);
    return started;
  };
  const readTools = () =>
    kilnMcpTable()
      .filter((row) => row.scope === "read")
      .map((row) => row.tool)
      .sort();

  before(async () => {
    kiln = await startKiln();
    token = await kiln.mintAgent(["read"], "http-agent");
    open = await start("127.0.0.1:0", { KILN_MCP_HTTP_TOKEN: undefined });
  });
  after(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await kiln.close();
  });

  it("prints the bound address on stderr and serves the SDK's client at POST /mcp", async () => {
    assert.match(open.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = await sdkClient(open.url);
    try {
      assert.deepEqual(await toolNames(client), readTools());
      const tenant = await client.callTool({ name: "cli_tenant", arguments: {} });
      assert.equal((resultJson(tenant) as { principal: string }).principal, "agent:http-agent");
      const refused = await client.callTool({ name: "jobs_retry", arguments: { id: "x", idempotency_key: "r1" } });
      assert.equal(refused.isError, true);
      assert.deepEqual(
        {
          code: (refused.structuredContent as { code: string }).code,
          scope: (refused.structuredContent as { scope: string }).scope,
        },
        { code: "out_of_scope", scope: "submit" },
      );
    } finally {
      await client.close();
    }
  });

  it("answers each JSON-RPC POST with a JSON response, statelessly", async () => {
    const init = await rawRequest(open.url, { headers: MCP_POST_HEADERS, body: INITIALIZE });
    assert.equal(init.status, 200, init.body);
    assert.match(String(init.headers["content-type"]), /^application\/json/);
    assert.equal(init.headers["mcp-session-id"], undefined);
    assert.equal(
      (JSON.parse(init.body) as { result: { serverInfo: { name: string } } }).result.serverInfo.name,
      "kiln",
    );
    // No session: a tools/list needs no initialize before it on the same connection.
    const list = await rawRequest(open.url, {
      headers: MCP_POST_HEADERS,
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(list.status, 200, list.body);
    assert.equal((JSON.parse(list.body) as { result: { tools: unknown[] } }).result.tools.length, readTools().length);
    assert.equal((await rawRequest(open.url, { method: "GET" })).status, 405);
    assert.equal(
      (await rawRequest(open.url.replace("/mcp", "/other"), { headers: MCP_POST_HEADERS, body: INITIALIZE })).status,
      404,
    );
  });

  it("the MCP Inspector CLI lists and calls tools over streamable HTTP", async () => {
    const listed = await runInspector([open.url], ["--transport", "http", "--method", "tools/list"]);
    assert.equal(listed.code, 0, listed.stderr);
    const tools = (JSON.parse(listed.stdout) as { tools: { name: string }[] }).tools.map((t) => t.name).sort();
    assert.deepEqual(tools, readTools());
    const called = await runInspector(
      [open.url],
      ["--transport", "http", "--method", "tools/call", "--tool-name", "identity_current"],
    );
    assert.equal(called.code, 0, called.stderr);
    const identity = JSON.parse(called.stdout) as { structuredContent: { principal: string; scopes: string[] } };
    assert.deepEqual(identity.structuredContent.scopes, ["read"]);
    const refused = await runInspector(
      [open.url],
      ["--transport", "http", "--method", "tools/call", "--tool-name", "jobs_evidence", "--tool-arg", "id=missing"],
    );
    assert.equal(refused.code, INSPECTOR_TOOL_ERROR, refused.stderr);
    assert.equal(JSON.parse(refused.stderr.trim().split("\n").at(-1) ?? "").error.code, "tool_is_error");
    const refusal = JSON.parse(refused.stdout) as { isError: boolean; structuredContent: { code: string } };
    assert.equal(refusal.isError, true);
    assert.equal(refusal.structuredContent.code, "not_found");
  });

  it("refuses a foreign Origin (DNS rebinding) and a non-loopback Host; serves its own origin", async () => {
    const foreign = await rawRequest(open.url, {
      headers: { ...MCP_POST_HEADERS, origin: "http://evil.example" },
      body: INITIALIZE,
    });
    assert.equal(foreign.status, 403);
    assert.match(foreign.body, /Origin/);
    const rebound = await rawRequest(open.url, {
      headers: { ...MCP_POST_HEADERS, host: `evil.example:${new URL(open.url).port}` },
      body: INITIALIZE,
    });
    assert.equal(rebound.status, 403);
    const port = new URL(open.url).port;
    for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
      const own = await sdkClient(open.url, { origin });
      try {
        assert.deepEqual(await toolNames(own), readTools(), origin);
      } finally {
        await own.close();
      }
    }
  });

  it("a page on another loopback port is a foreign Origin unless KILN_MCP_HTTP_ALLOWED_ORIGINS names it", async () => {
    // Any local dev server's page could otherwise act with this server's kiln credential.
    for (const origin of ["http://localhost:6274", "http://127.0.0.1:3000", "http://[::1]:8080"]) {
      await assert.rejects(sdkClient(open.url, { origin }), /403|Origin/, `${origin} was served`);
      const raw = await rawRequest(open.url, { headers: { ...MCP_POST_HEADERS, origin }, body: INITIALIZE });
      assert.equal(raw.status, 403, `${origin}: ${raw.body}`);
    }
    const configured = await start("127.0.0.1:0", {
      KILN_MCP_HTTP_ALLOWED_ORIGINS: "http://localhost:6274, https://inspector.example",
    });
    for (const origin of ["http://localhost:6274", "https://inspector.example"]) {
      const client = await sdkClient(configured.url, { origin });
      try {
        assert.deepEqual(await toolNames(client), readTools(), origin);
      } finally {
        await client.close();
      }
    }
    await assert.rejects(sdkClient(configured.url, { origin: "http://localhost:6275" }), /403|Origin/);
    for (const misconfigured of ["localhost:6274", "http://localhost:6274/page", "file:///tmp", "*"]) {
      const result = await run(process.execPath, [KILN_BIN, "mcp", "http", "127.0.0.1:0"], {
        env: kilnEnv(kiln, token, { KILN_MCP_HTTP_ALLOWED_ORIGINS: misconfigured }),
        timeoutMs: 20_000,
      });
      assert.equal(result.code, 2, `${misconfigured} started: ${result.stderr}`);
      assert.match(result.stderr, /KILN_MCP_HTTP_ALLOWED_ORIGINS .* not an origin/);
    }
  });

  it("a non-loopback listen without a long enough caller token refuses to start", async () => {
    for (const [address, callerToken] of [
      ["0.0.0.0:0", undefined],
      ["[::]:0", undefined],
      ["192.0.2.10:0", undefined],
      ["0.0.0.0:0", "x".repeat(31)],
    ] as const) {
      const result = await run(CLI_NODE, [KILN_BIN, "mcp", "http", address], {
        env: kilnEnv(kiln, token, { KILN_MCP_HTTP_TOKEN: callerToken }),
        timeoutMs: 20_000,
      });
      assert.notEqual(result.code, 0, `${address} started: ${result.stderr}`);
      assert.equal(result.stdout, "");
      assert.match(result.stderr, /KILN_MCP_HTTP_TOKEN/);
      assert.match(result.stderr, /32/);
      assert.ok(!result.stderr.includes(token));
    }
  });

  it("with a caller token, every request must present it: without the bearer, HTTP 401", async () => {
    const guarded = await start("0.0.0.0:0", { KILN_MCP_HTTP_TOKEN: CALLER_TOKEN });
    const url = `http://127.0.0.1:${new URL(guarded.url).port}/mcp`;
    const missing = await rawRequest(url, { headers: MCP_POST_HEADERS, body: INITIALIZE });
    assert.equal(missing.status, 401);
    assert.match(String(missing.headers["www-authenticate"]), /^Bearer/);
    const wrong = await rawRequest(url, {
      headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${CALLER_TOKEN}x` },
      body: INITIALIZE,
    });
    assert.equal(wrong.status, 401);
    const notBearer = await rawRequest(url, {
      headers: { ...MCP_POST_HEADERS, authorization: CALLER_TOKEN },
      body: INITIALIZE,
    });
    assert.equal(notBearer.status, 401);
    const client = await sdkClient(url, { authorization: `Bearer ${CALLER_TOKEN}` });
    try {
      assert.deepEqual(await toolNames(client), readTools());
    } finally {
      await client.close();
    }
    // A foreign Origin is refused even with the bearer.
    const foreign = await rawRequest(url, {
      headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${CALLER_TOKEN}`, origin: "https://evil.example" },
      body: INITIALIZE,
    });
    assert.equal(foreign.status, 403);
    // Loopback with a caller token: the token is required there too.
    const loopback = await start("127.0.0.1:0", { KILN_MCP_HTTP_TOKEN: CALLER_TOKEN });
    assert.equal((await rawRequest(loopback.url, { headers: MCP_POST_HEADERS, body: INITIALIZE })).status, 401);
    for (const p of [guarded, loopback]) {
      assert.ok(!p.stderr().includes(CALLER_TOKEN) && !p.stderr().includes(token), "no secret is logged");
    }
  });
});
