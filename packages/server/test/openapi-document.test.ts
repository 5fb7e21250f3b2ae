import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { CATALOGUE } from "@kiln/contract";
import { openSqliteForTest } from "@kiln/storage/testing";
import { compileErrors, validate } from "@readme/openapi-parser";
import { Validator } from "@seriousme/openapi-schema-validator";
import { committedOpenApiPath } from "../src/generate-artifacts.js";
import { openApiDocumentText } from "../src/openapi-document.js";
import { testApp } from "./harness.js";

type Doc = { openapi: string; paths: Record<string, Record<string, { operationId: string; deprecated?: boolean }>> };

async function served(): Promise<{ text: string; status: number; doc: Doc }> {
  const t = await testApp(await openSqliteForTest());
  try {
    const res = await t.app.inject({ method: "GET", url: "/api/openapi.json" });
    return { text: res.body, status: res.statusCode, doc: JSON.parse(res.body) as Doc };
  } finally {
    await t.close();
  }
}

describe("GET /api/openapi.json", () => {
  it("is public and lists every catalogued operation by the spec's identifier, method and path", async () => {
    const { status, doc } = await served();
    assert.equal(status, 200);
    assert.equal(doc.openapi, "3.1.0");
    const listed = new Map<string, string>();
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, entry] of Object.entries(methods))
        listed.set(entry.operationId, `${method.toUpperCase()} ${path}`);
    }
    assert.equal(listed.size, 95);
    for (const op of CATALOGUE) assert.equal(listed.get(op.id), `${op.method} ${op.path}`, op.id);
    const deprecated = Object.values(doc.paths).flatMap((m) => Object.values(m).filter((e) => e.deprecated === true));
    assert.equal(deprecated.length, 3);
  });

  it("passes @readme/openapi-parser", async () => {
    const { doc } = await served();
    const result = await validate(structuredClone(doc) as never);
    assert.ok(result.valid, result.valid ? "" : compileErrors(result));
  });

  it("passes @seriousme/openapi-schema-validator", async () => {
    const { doc } = await served();
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as never);
    assert.ok(result.valid, JSON.stringify(result.errors, null, 2)?.slice(0, 4000));
  });

  it("equals the committed docs/openapi.json (run `npm run generate` after changing the catalogue)", () => {
    const committed = readFileSync(committedOpenApiPath, "utf8");
    assert.equal(openApiDocumentText("committed"), committed);
  });
});
