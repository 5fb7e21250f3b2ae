import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { TSchema } from "@sinclair/typebox";
import { CATALOGUE } from "../src/catalogue.js";
import { A } from "../src/refusal-codes.js";
import { specMcpTools, specOperations } from "./spec-tables.js";

const spec = specOperations();
const byId = new Map(CATALOGUE.map((op) => [op.id, op]));

const SCOPE_LETTERS: Record<string, string> = { R: "read", S: "submit", ST: "settings", C: "credentials", AD: "admin" };

describe("operation catalogue against the spec's endpoint tables", () => {
  it("the spec has 92 operations and the catalogue holds each exactly once, with the spec's method and path", () => {
    assert.equal(spec.length, 92);
    assert.equal(new Set(CATALOGUE.map((op) => op.id)).size, CATALOGUE.length, "duplicate operation ids");
    for (const s of spec) {
      const op = byId.get(s.id);
      assert.ok(op, `${s.id} is missing from the catalogue`);
      assert.equal(`${op.method} ${op.path}`, `${s.method} ${s.path}`, s.id);
    }
  });

  it("besides the spec's operations, only the three deprecated predecessor routes and the marked extensions", () => {
    const specIds = new Set(spec.map((s) => s.id));
    const extra = CATALOGUE.filter((op) => !specIds.has(op.id));
    const predecessors = extra.filter((op) => op.extension === undefined);
    assert.deepEqual(predecessors.map((op) => `${op.method} ${op.path}`).sort(), [
      "POST /api/jobs",
      "POST /api/v2/jobs",
      "POST /api/v3/jobs",
    ]);
    for (const op of predecessors) {
      assert.equal(op.deprecated, true, op.id);
      assert.equal(op.keyed, false, op.id);
      assert.ok(op.refusals.includes("legacy_unsupported"), op.id);
    }
    assert.equal(CATALOGUE.filter((op) => op.deprecated === true).length, 3);
    // An extension is kiln's own: never one of the spec's ids; like every tenant operation it has an MCP tool.
    const extensions = extra.filter((op) => op.extension !== undefined);
    assert.deepEqual(
      extensions.map((op) => op.id),
      ["jobs.logs_search", "repositories.onboard", "repositories.tests", "operator.tenants.list"],
    );
    for (const op of CATALOGUE.filter((o) => specIds.has(o.id))) assert.equal(op.extension, undefined, op.id);
    for (const op of extensions) {
      // A tenant operation has an MCP tool; an operator's, like the spec's operator operations, none.
      if (op.security.kind !== "operator") assert.ok(op.mcp !== undefined, `${op.id} has an MCP tool`);
      assert.ok((op.extension?.reason ?? "").length > 20, `${op.id} says why it exists`);
    }
  });

  it("each entry lists exactly the spec's refusals (A and K expanded)", () => {
    for (const s of spec) {
      const op = byId.get(s.id);
      assert.deepEqual([...(op?.refusals ?? [])].sort(), [...s.refusals].sort(), s.id);
    }
  });

  it("keyed exactly where the spec's refusals include K", () => {
    for (const s of spec) {
      assert.equal(byId.get(s.id)?.keyed, s.refusals.includes("idempotency_key_required"), s.id);
    }
  });

  it("security follows the spec's scope or security column", () => {
    for (const s of spec) {
      const op = byId.get(s.id);
      assert.ok(op);
      const cell = s.security;
      if (s.section === "Operator endpoints") {
        assert.equal(op.security.kind, s.id === "operator.session.create" ? "operator-bootstrap" : "operator", s.id);
      } else if (cell?.startsWith("public")) {
        assert.equal(op.security.kind, "public", s.id);
      } else if (cell === "signed-in session only") {
        assert.equal(op.security.kind, "session", s.id);
      } else {
        const letter = cell?.split(/[ ,]/)[0] ?? "";
        assert.equal(op.security.kind, "tenant", s.id);
        if (op.security.kind !== "tenant") continue;
        assert.equal(op.security.scope, SCOPE_LETTERS[letter], s.id);
        assert.equal(op.security.cookie === true, cell?.includes("cookie ok") === true, `${s.id} cookie`);
        assert.equal(op.security.human === true, cell?.includes("device token only") === true, `${s.id} human`);
        for (const code of A) assert.ok(op.refusals.includes(code), `${s.id} lacks ${code}`);
      }
    }
  });

  it("MCP tools and scopes equal the spec's MCP table plus kiln's extensions, and only those operations have one", () => {
    const table = specMcpTools();
    assert.equal(table.length, 27);
    const fromCatalogue = CATALOGUE.filter((op) => op.mcp !== undefined && op.extension === undefined).map((op) => ({
      tool: op.mcp?.tool,
      operation: op.id,
      scope: op.mcp?.scope,
    }));
    const sort = (xs: { tool?: string }[]) => [...xs].sort((a, b) => String(a.tool).localeCompare(String(b.tool)));
    assert.deepEqual(sort(fromCatalogue), sort(table));
  });
});

/** Walks every schema reachable from the catalogue. */
function* schemas(node: unknown, seen = new Set<unknown>()): Generator<Record<string, unknown>> {
  if (node === null || typeof node !== "object" || seen.has(node)) return;
  seen.add(node);
  if (Array.isArray(node)) {
    for (const n of node) yield* schemas(n, seen);
    return;
  }
  const record = node as Record<string, unknown>;
  yield record;
  for (const [key, value] of Object.entries(record)) {
    if (key === "const" || key === "default" || key === "examples" || key === "enum") continue;
    if (key === "properties" && value !== null && typeof value === "object") {
      for (const v of Object.values(value)) yield* schemas(v, seen);
    } else yield* schemas(value, seen);
  }
}

function catalogueSchemas(): Record<string, unknown>[] {
  const roots: TSchema[] = [];
  for (const op of CATALOGUE) {
    if (op.request.params) roots.push(op.request.params);
    if (op.request.query) roots.push(op.request.query);
    if (op.request.body?.encoding === "json") roots.push(op.request.body.schema);
    if (op.response.encoding === "json") roots.push(op.response.schema);
    if (op.response.encoding === "sse") roots.push(op.response.event);
  }
  return [...schemas(roots)];
}

describe("record schemas", () => {
  it("no object schema is empty: every object names its members", () => {
    for (const s of catalogueSchemas()) {
      if (s.type !== "object") continue;
      const named = Object.keys((s.properties as object | undefined) ?? {}).length > 0;
      const patterned = s.patternProperties !== undefined || typeof s.additionalProperties === "object";
      assert.ok(named || patterned, `empty object schema ${String(s.title ?? JSON.stringify(s).slice(0, 80))}`);
    }
  });

  it("every titled record is closed or open on purpose, and titles are unique per shape", () => {
    const byTitle = new Map<string, string>();
    for (const s of catalogueSchemas()) {
      if (typeof s.title !== "string") continue;
      const text = JSON.stringify(s);
      const seen = byTitle.get(s.title);
      assert.ok(seen === undefined || seen === text, `two different schemas titled ${s.title}`);
      byTitle.set(s.title, text);
      if (s.type === "object") {
        assert.ok(typeof s.additionalProperties === "boolean", `${s.title} must say whether it is closed or open`);
      }
    }
    assert.ok(byTitle.size > 100, `only ${byTitle.size} records`);
  });

  it("request parts of every operation are closed (unknown query or path members are refused)", () => {
    for (const op of CATALOGUE) {
      for (const part of [op.request.params, op.request.query]) {
        if (part !== undefined) assert.equal(part.additionalProperties, false, op.id);
      }
    }
  });
});
