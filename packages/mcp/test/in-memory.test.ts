import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@kiln/client";
import { SCOPES, type Scope } from "@kiln/contract";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { createKilnMcpServer, discoverScopes, RESOURCE_NOT_FOUND } from "../src/index.js";
import { combinations, type KilnUnderTest, kilnMcpTable, resultJson, startKiln, toolNames } from "./harness.js";

/** The SDK's own client, connected in memory to kiln's server acting with `token`. */
async function connect(endpoint: string, token: string): Promise<{ client: Client; scopes: Scope[] }> {
  const api = createClient({ endpoint, token });
  const scopes = await discoverScopes(api);
  const server = createKilnMcpServer({ client: api, scopes });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: "kiln-mcp-test", version: "0" });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  return { client, scopes };
}

describe("kiln's MCP server over the SDK's in-memory transport, against a real kiln server", () => {
  let kiln: KilnUnderTest;
  const clients: Client[] = [];
  const open = async (token: string) => {
    const connected = await connect(kiln.endpoint, token);
    clients.push(connected.client);
    return connected;
  };

  before(async () => {
    kiln = await startKiln();
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await kiln.close();
  });

  it("for credentials of each scope combination, lists exactly the spec's tools and kiln's extensions for those scopes", async () => {
    const table = kilnMcpTable();
    const all = combinations(SCOPES);
    assert.equal(all.length, 31);
    for (const [i, scopes] of all.entries()) {
      const token = await kiln.mintAgent(scopes, `combo-${i}`);
      const { client, scopes: discovered } = await open(token);
      assert.deepEqual(discovered, scopes, `scopes of ${scopes.join("+")}`);
      const expected = table
        .filter((row) => scopes.includes(row.scope as Scope))
        .map((row) => row.tool)
        .sort();
      assert.deepEqual(await toolNames(client), expected, `tools of ${scopes.join("+")}`);
    }
    // A person's CLI device token carries its role's scopes: an owner gets every tool.
    const { client } = await open(kiln.ownerToken);
    assert.deepEqual(await toolNames(client), table.map((row) => row.tool).sort());
  });

  it("measures the tools/list payload", async (t) => {
    const { client } = await open(kiln.ownerToken);
    const listed = await client.listTools();
    const bytes = Buffer.byteLength(JSON.stringify(listed));
    t.diagnostic(`tools/list payload: ${bytes} bytes for ${listed.tools.length} tools`);
    console.log(`tools/list payload: ${bytes} bytes for ${listed.tools.length} tools`);
    assert.equal(
      listed.tools.length,
      30,
      "the spec's 27, jobs_logs_search, repositories_onboard and repositories_tests",
    );
    // About 590 bytes a tool: the ceiling grows with the catalogue, never by more than its tools
    // need (the last growth: settings' flaky_retries and flaky_policy, the invocation's
    // repository_directory, 17,766 bytes).
    assert.ok(bytes < 17_900, `tools/list is ${bytes} bytes`);
    for (const tool of listed.tools) {
      assert.ok((tool.description ?? "").length <= 120, `${tool.name}'s description is tight`);
      assert.equal(tool.inputSchema.type, "object");
    }
    const readOnly = (name: string) => listed.tools.find((tool) => tool.name === name)?.annotations?.readOnlyHint;
    assert.equal(readOnly("jobs_get"), true);
    assert.equal(readOnly("jobs_submit"), undefined);
  });

  it("calls a tool and returns the operation's response document", async () => {
    const { client } = await open(await kiln.mintAgent(["read"], "reader"));
    const result = await client.callTool({ name: "identity_current", arguments: {} });
    assert.equal(result.isError, undefined);
    const identity = resultJson(result) as { principal: string; kind: string; scopes: string[]; tenant: string };
    assert.equal(identity.principal, "agent:reader");
    assert.equal(identity.kind, "agent");
    assert.deepEqual(identity.scopes, ["read"]);
    assert.deepEqual(result.structuredContent, identity);
    const jobs = await client.callTool({ name: "jobs_list", arguments: { limit: 5 } });
    assert.deepEqual((resultJson(jobs) as { jobs: unknown[] }).jobs, []);
  });

  it("answers which tests are flaky here (repositories_tests) with a read credential", async () => {
    const { client } = await open(await kiln.mintAgent(["read"], "flaky-asker"));
    await kiln.onboard("acme/history");
    const result = await client.callTool({
      name: "repositories_tests",
      arguments: { owner: "acme", name: "history", sort: "flakiest" },
    });
    assert.equal(result.isError, undefined, JSON.stringify(result.content));
    assert.deepEqual(resultJson(result), {
      repository: "acme/history",
      window: { jobs: 0, from: null, to: null },
      sort: "flakiest",
      tests: [],
      next_cursor: null,
    });
    const unknown = await client.callTool({ name: "repositories_tests", arguments: { owner: "acme", name: "nope" } });
    assert.equal(unknown.isError, true);
    assert.equal((unknown.structuredContent as { code: string }).code, "not_found");
  });

  it("a refused call is a tool error carrying the typed refusal, not a protocol error", async () => {
    const { client } = await open(await kiln.mintAgent(["read"], "refused"));
    const missing = await client.callTool({ name: "jobs_get", arguments: { id: "job-that-does-not-exist" } });
    assert.equal(missing.isError, true);
    const notFound = missing.structuredContent as { code: string; status: number; detail: string };
    assert.equal(notFound.code, "not_found");
    assert.equal(notFound.status, 404);
    assert.equal(typeof notFound.detail, "string");
    assert.deepEqual(resultJson(missing), notFound);

    // The server authorizes nothing itself: a catalogued tool outside the credential's
    // scopes is not listed, and calling it anyway is the API's refusal.
    assert.ok(!(await toolNames(client)).includes("credentials_list"));
    const outOfScope = await client.callTool({ name: "credentials_list", arguments: {} });
    assert.equal(outOfScope.isError, true);
    assert.deepEqual(
      {
        code: (outOfScope.structuredContent as { code: string }).code,
        status: (outOfScope.structuredContent as { status: number }).status,
        scope: (outOfScope.structuredContent as { scope: string }).scope,
      },
      { code: "out_of_scope", status: 403, scope: "credentials" },
    );

    // The API's validation refuses a bad argument and names it.
    const invalid = await client.callTool({ name: "jobs_list", arguments: { limit: 0 } });
    assert.equal(invalid.isError, true);
    assert.equal((invalid.structuredContent as { code: string }).code, "invalid_request");
  });

  it("local failures are tool errors of their own shape; an unknown tool is a protocol error", async () => {
    const { client } = await open(await kiln.mintAgent(["read"], "local"));
    const noId = await client.callTool({ name: "jobs_get", arguments: {} });
    assert.equal(noId.isError, true);
    assert.deepEqual(noId.structuredContent, {
      local_error: { kind: "invalid_arguments", operation: "jobs.get", detail: "jobs_get: missing argument id" },
    });

    // An API that cannot be reached: the request never got an answer.
    const dead = createKilnMcpServer({
      client: createClient({ endpoint: "http://127.0.0.1:9", token: "x" }),
      scopes: ["read"],
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const deadClient = new Client({ name: "kiln-mcp-test", version: "0" });
    clients.push(deadClient);
    await Promise.all([dead.connect(serverSide), deadClient.connect(clientSide)]);
    const unreachable = await deadClient.callTool({ name: "jobs_get", arguments: { id: "x" } });
    assert.equal(unreachable.isError, true);
    const local = (unreachable.structuredContent as { local_error: { kind: string; operation: string } }).local_error;
    assert.deepEqual({ kind: local.kind, operation: local.operation }, { kind: "transport", operation: "jobs.get" });
    assert.ok(!("code" in (unreachable.structuredContent as object)), "not a Refusal");

    await assert.rejects(
      client.callTool({ name: "jobs_explode", arguments: {} }),
      (error: unknown) => error instanceof McpError && error.code === ErrorCode.InvalidParams,
    );
  });

  it("a keyed mutation takes idempotency_key: a repeat with the same key replays the receipt", async () => {
    const victim = await kiln.mintAgent(["read"], "victim");
    void victim;
    const { client } = await open(await kiln.mintAgent(["credentials"], "revoker"));
    assert.deepEqual(await toolNames(client), [
      "credentials_list",
      "credentials_revoke",
      "tenant_registry_credential_replace",
    ]);
    const first = await client.callTool({
      name: "credentials_revoke",
      arguments: { name: "victim", idempotency_key: "revoke-victim" },
    });
    assert.equal(first.isError, undefined, JSON.stringify(first));
    const again = await client.callTool({
      name: "credentials_revoke",
      arguments: { name: "victim", idempotency_key: "revoke-victim" },
    });
    assert.deepEqual(resultJson(again), resultJson(first));
    const unkeyed = await client.callTool({ name: "credentials_revoke", arguments: { name: "victim" } });
    assert.equal(unkeyed.isError, true);
    assert.equal(
      (unkeyed.structuredContent as { local_error: { kind: string } }).local_error.kind,
      "invalid_arguments",
    );
  });

  it("offers kiln:// resources and reads them through their operations", async () => {
    const { client } = await open(await kiln.mintAgent(["read"], "resources"));
    const templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    assert.deepEqual(templates, [
      "kiln://jobs/{id}",
      "kiln://jobs/{id}/evidence",
      "kiln://jobs/{id}/logs",
      "kiln://repositories/{owner}/{name}",
    ]);
    assert.deepEqual(
      (await client.listResources()).resources.map((r) => r.uri),
      ["kiln://usage"],
    );
    await assert.rejects(client.readResource({ uri: "kiln://jobs/no-such-job" }), (error: unknown) => {
      assert.ok(error instanceof McpError);
      assert.equal(error.code, RESOURCE_NOT_FOUND);
      assert.equal((error.data as { refusal: { code: string } }).refusal.code, "not_found");
      return true;
    });
    await assert.rejects(client.readResource({ uri: "kiln://nothing/here" }), McpError);
    // The current period's usage.report document.
    const usage = await client.readResource({ uri: "kiln://usage" });
    assert.equal(usage.contents[0]?.mimeType, "application/json");
    const report = JSON.parse(String((usage.contents[0] as { text?: string } | undefined)?.text)) as {
      period: string;
      totals: { vcpu_seconds: number };
    };
    assert.match(report.period, /^[0-9]{4}-[0-9]{2}$/);
    assert.equal(typeof report.totals.vcpu_seconds, "number");
    // A credential without read sees no resources.
    const { client: submitter } = await open(await kiln.mintAgent(["submit"], "no-read"));
    assert.deepEqual((await submitter.listResourceTemplates()).resourceTemplates, []);
  });

  it("offers the three prompts, each naming the tools to call", async () => {
    const { client } = await open(await kiln.mintAgent(["read", "submit"], "prompter"));
    assert.deepEqual(
      (await client.listPrompts()).prompts.map((p) => p.name),
      ["submit-and-wait", "diagnose-a-failure", "onboard-a-repository"],
    );
    const text = async (name: string, args: Record<string, string>) => {
      const prompt = await client.getPrompt({ name, arguments: args });
      const content = prompt.messages[0]?.content;
      assert.equal(content?.type, "text");
      return (content as { text: string }).text;
    };
    const submit = await text("submit-and-wait", { repository: "acme/widget", cargo_command: "test --workspace" });
    for (const word of [
      "jobs_submit",
      "jobs_get",
      "jobs_evidence",
      "idempotency_key",
      "acme/widget",
      '["--workspace"]',
      "flaky",
      "repositories_tests",
    ]) {
      assert.ok(submit.includes(word), `submit-and-wait names ${word}`);
    }
    const diagnose = await text("diagnose-a-failure", { job_id: "job_1" });
    for (const word of [
      "jobs_get",
      "jobs_evidence",
      "report.tests",
      "failure.cause",
      "jobs_logs",
      "job_1",
      "flaky",
      "repositories_tests",
    ]) {
      assert.ok(diagnose.includes(word), `diagnose-a-failure names ${word}`);
    }
    const onboard = await text("onboard-a-repository", { repository: "acme/widget" });
    for (const word of ["onboarding_surface", "repositories_get", "jobs_submit", 'owner: "acme"']) {
      assert.ok(onboard.includes(word), `onboard-a-repository names ${word}`);
    }
    await assert.rejects(client.getPrompt({ name: "diagnose-a-failure", arguments: {} }), McpError);
  });
});
