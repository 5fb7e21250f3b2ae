import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { CATALOGUE } from "@kiln/contract";
import { openSqliteForTest } from "@kiln/storage/testing";
import { compileErrors, validate } from "@readme/openapi-parser";
import { Validator } from "@seriousme/openapi-schema-validator";
import { committedOpenApiPath } from "../src/generate-artifacts.js";
import { testApp } from "../src/testing/harness.js";
import { openApiDocumentText } from "../src/web/http/openapi-document.js";

type Schema = {
  title?: string;
  type?: string;
  enum?: unknown[];
  description?: string;
  properties?: Record<string, Schema>;
};
type Doc = {
  openapi: string;
  paths: Record<
    string,
    Record<string, { operationId: string; deprecated?: boolean; "x-kiln-extension"?: { reason: string } }>
  >;
};

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
    assert.equal(listed.size, 99);
    for (const op of CATALOGUE) assert.equal(listed.get(op.id), `${op.method} ${op.path}`, op.id);
    const deprecated = Object.values(doc.paths).flatMap((m) => Object.values(m).filter((e) => e.deprecated === true));
    assert.equal(deprecated.length, 3);
  });

  it("marks kiln's own operations, which the spec lacks, as extensions saying why they exist", async () => {
    const { doc } = await served();
    const extensions = Object.values(doc.paths).flatMap((m) =>
      Object.values(m).filter((e) => e["x-kiln-extension"] !== undefined),
    );
    assert.deepEqual(
      extensions.map((e) => e.operationId),
      ["jobs.logs_search", "repositories.onboard", "repositories.tests", "operator.tenants.list"],
    );
    const reason = (id: string) => extensions.find((e) => e.operationId === id)?.["x-kiln-extension"]?.reason ?? "";
    assert.match(reason("repositories.onboard"), /source-hosting app/);
    assert.match(reason("jobs.logs_search"), /page by page/);
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

  it("writes every union of literals as an enumeration of its exact JSON type, never as anyOf of const", async () => {
    const { text } = await served();
    const constUnions: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (Array.isArray(node)) {
        for (const [i, n] of node.entries()) walk(n, `${path}/${i}`);
        return;
      }
      if (node === null || typeof node !== "object") return;
      const record = node as Record<string, unknown>;
      for (const union of ["anyOf", "oneOf"]) {
        const members = record[union];
        if (Array.isArray(members) && members.every((m) => typeof m === "object" && m !== null && "const" in m))
          constUnions.push(`${path}/${union}`);
      }
      for (const [key, value] of Object.entries(record))
        if (key !== "enum" && key !== "const") walk(value, `${path}/${key}`);
    };
    walk(JSON.parse(text), "#");
    assert.deepEqual(constUnions, []);

    const schemas = (JSON.parse(text) as { components: { schemas: Record<string, Schema> } }).components.schemas;
    const workspace = schemas.CargoWorkspaceRequest?.properties;
    assert.deepEqual(
      { type: workspace?.schema_version?.type, enum: workspace?.schema_version?.enum },
      { type: "integer", enum: [1, 2] },
    );
    assert.match(workspace?.schema_version?.description ?? "", /streamed archive/, "other keywords are kept");
    assert.deepEqual(
      { type: workspace?.size?.type, enum: workspace?.size?.enum },
      { type: "string", enum: ["kiln2-cpu", "kiln4-cpu", "kiln8-cpu", "kiln16-cpu"] },
    );
    assert.deepEqual(
      { title: schemas.Scope?.title, type: schemas.Scope?.type, enum: schemas.Scope?.enum },
      { title: "Scope", type: "string", enum: ["read", "submit", "settings", "credentials", "admin"] },
    );
  });

  it("equals the committed docs/openapi.json (run `npm run generate` after changing the catalogue)", () => {
    const committed = readFileSync(committedOpenApiPath, "utf8");
    assert.equal(openApiDocumentText("committed"), committed);
  });
});
