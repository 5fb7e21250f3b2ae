import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CATALOGUE, SCOPES } from "@kiln/contract";
import {
  IDEMPOTENCY_KEY_ARGUMENT,
  InvalidToolArguments,
  KILN_TOOLS,
  splitArguments,
  toolByName,
} from "../src/index.js";
import { kilnMcpTable, specMcpTable } from "./harness.js";

describe("tools derived from the catalogue", () => {
  it("are exactly the spec's MCP table and kiln's extensions: names, operations and scopes", () => {
    assert.equal(specMcpTable().length, 27);
    const expected = kilnMcpTable();
    assert.deepEqual(
      expected.map((row) => row.tool).filter((tool) => !specMcpTable().some((row) => row.tool === tool)),
      ["jobs_logs_search", "repositories_onboard", "repositories_tests"],
    );
    const byName = (a: { tool: string }, b: { tool: string }) => a.tool.localeCompare(b.tool);
    assert.deepEqual(
      KILN_TOOLS.map((t) => ({ tool: t.name, operation: t.operation.id, scope: t.scope })).sort(byName),
      [...expected].sort(byName),
    );
    for (const tool of KILN_TOOLS) assert.ok(SCOPES.includes(tool.scope));
  });

  it("take one object of path parameters, query parameters and body members, plus idempotency_key when keyed", () => {
    for (const tool of KILN_TOOLS) {
      const op = tool.operation;
      const names = Object.keys(tool.inputSchema.properties as object);
      const expected = [
        ...Object.keys((op.request.params as { properties?: object } | undefined)?.properties ?? {}),
        ...Object.keys((op.request.query as { properties?: object } | undefined)?.properties ?? {}),
        ...(op.request.body?.encoding === "json"
          ? Object.keys((op.request.body.schema as { properties?: object }).properties ?? { body: 1 })
          : []),
        ...(op.keyed ? [IDEMPOTENCY_KEY_ARGUMENT] : []),
      ];
      assert.deepEqual(names, expected, tool.name);
      const required = (tool.inputSchema.required as string[] | undefined) ?? [];
      assert.equal(required.includes(IDEMPOTENCY_KEY_ARGUMENT), op.keyed, tool.name);
      for (const param of Object.keys((op.request.params as { properties?: object } | undefined)?.properties ?? {})) {
        assert.ok(required.includes(param), `${tool.name}: path parameter ${param} is required`);
      }
    }
    const submit = toolByName("jobs_submit");
    assert.deepEqual(submit?.inputSchema.required, [
      "schema_version",
      "repository",
      "size",
      "workspace",
      "idempotency_key",
    ]);
    // Literal unions are listed as enums, titles are gone.
    const size = (submit?.inputSchema.properties as Record<string, { enum?: unknown[] }> | undefined)?.size;
    assert.deepEqual(size?.enum, ["kiln2-cpu", "kiln4-cpu", "kiln8-cpu", "kiln16-cpu"]);
    assert.ok(!JSON.stringify(KILN_TOOLS.map((t) => t.inputSchema)).includes('"title"'));
  });

  it("route arguments back to the request parts; unknown or missing ones are local errors", () => {
    const write = toolByName("repositories_settings_write");
    assert.ok(write !== undefined);
    assert.deepEqual(
      splitArguments(write, {
        owner: "acme",
        name: "widget",
        version: 3,
        changes: { affected_tests: true },
        idempotency_key: "k1",
      }),
      {
        params: { owner: "acme", name: "widget" },
        query: {},
        body: { version: 3, changes: { affected_tests: true } },
        idempotencyKey: "k1",
      },
    );
    const logs = toolByName("jobs_logs");
    assert.ok(logs !== undefined);
    assert.deepEqual(splitArguments(logs, { id: "j1", limit: 5 }), {
      params: { id: "j1" },
      query: { limit: 5 },
      body: undefined,
      idempotencyKey: undefined,
    });
    assert.throws(() => splitArguments(logs, { id: "j1", colour: "red" }), InvalidToolArguments);
    assert.throws(() => splitArguments(logs, {}), /missing argument id/);
    assert.throws(() => splitArguments(write, { owner: "a", name: "b", version: 1, changes: {} }), /idempotency_key/);
  });

  it("every catalogue entry with an MCP tool is a tool, and no other", () => {
    assert.deepEqual(
      KILN_TOOLS.map((t) => t.operation.id),
      CATALOGUE.filter((op) => op.mcp !== undefined).map((op) => op.id),
    );
  });
});
