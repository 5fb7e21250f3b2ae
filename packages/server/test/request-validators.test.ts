import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CATALOGUE, HOST_PROTOCOL_ROUTES, HostCertificateRequest } from "@kiln/contract";
import { checkedValidatorOf, routeAjvs } from "../src/web/http/request-validators.js";

/**
 * The routes' checks compile their schemas on first use (a process calls few of the catalogue's
 * operations), so a schema ajv cannot compile would not stop a server's start: here every schema
 * a route is given is compiled, with the Ajv its route uses, and checks a value.
 */
describe("request validators", () => {
  it("compile every catalogued operation's params, query and JSON body, and every host-protocol message", () => {
    const { textual, json } = routeAjvs();
    const schemas: [string, object, "textual" | "json"][] = [];
    for (const op of CATALOGUE) {
      if (op.request.params !== undefined) schemas.push([`${op.id} params`, op.request.params, "textual"]);
      if (op.request.query !== undefined) schemas.push([`${op.id} query`, op.request.query, "textual"]);
      if (op.request.body?.encoding === "json") schemas.push([`${op.id} body`, op.request.body.schema, "json"]);
    }
    for (const [name, route] of Object.entries(HOST_PROTOCOL_ROUTES))
      schemas.push([`host ${name}`, route.body, "json"]);
    schemas.push(["host certificate request", HostCertificateRequest, "json"]);
    assert.ok(schemas.length > CATALOGUE.length, `${schemas.length} schemas`);
    for (const [name, schema, kind] of schemas) {
      const check = checkedValidatorOf(kind === "textual" ? textual : json, schema);
      // A value no request schema admits: an array where every part is an object.
      assert.equal(check([1]), false, `${name} admitted [1]`);
      assert.ok(check.errors !== null && check.errors.length > 0, `${name} refused [1] without saying why`);
    }
  });

  it("compile a schema ajv cannot take only when first called, and then refuse it loudly", () => {
    const check = checkedValidatorOf(routeAjvs().json, { type: "object", properties: { a: { type: "no-such-type" } } });
    assert.throws(() => check({}), /no-such-type|schema is invalid/);
  });
});
