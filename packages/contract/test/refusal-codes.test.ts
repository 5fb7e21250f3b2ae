import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CATALOGUE } from "../src/catalogue.js";
import { buildOpenApiDocument } from "../src/openapi.js";
import { Refusal } from "../src/records/refusal.js";
import { REFUSAL_CODES, SPEC_REFUSAL_CODES } from "../src/refusal-codes.js";
import { specRefusalStatuses } from "./spec-tables.js";

describe("refusal codes", () => {
  it("the table holds the spec's 22 codes with the spec's statuses", () => {
    const spec = specRefusalStatuses();
    assert.equal(spec.size, 22);
    assert.deepEqual([...SPEC_REFUSAL_CODES].sort(), [...spec.keys()].sort());
    for (const [code, status] of spec)
      assert.equal(REFUSAL_CODES[code as keyof typeof REFUSAL_CODES].status, status, code);
  });

  it("every code is documented with its meaning and appears in the served document", () => {
    const text = JSON.stringify(buildOpenApiDocument(CATALOGUE, Refusal, { version: "test" }));
    for (const [code, entry] of Object.entries(REFUSAL_CODES)) {
      assert.ok(entry.meaning.length > 10, `${code} is undocumented`);
      if (code !== "not_implemented") assert.ok(text.includes(`\`${code}\``), `${code} is in no operation's responses`);
    }
  });
});
