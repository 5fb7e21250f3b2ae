import { Ajv, type Options } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyInstance } from "fastify";

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const COMMON: Options = {
  removeAdditional: false,
  useDefaults: true,
  // One error per request: allErrors lets a crafted body make validation expensive.
  allErrors: false,
  // The refused value and its schema, so the refusal can name the rule (error-boundary.ts).
  verbose: true,
  addUsedSchema: false,
};

function ajvWith(options: Options): Ajv {
  const ajv = new Ajv({ ...COMMON, ...options });
  addFormats(ajv);
  return ajv;
}

/**
 * Request validation with one Ajv per kind of input. Path, query and header values arrive
 * as strings (and a repeated query member as an array), so they are converted to the
 * schema's type; a JSON body already carries its types, so a value of the wrong type is
 * refused rather than converted (`"scopes": "read"` is not `["read"]`).
 */
export function installRequestValidators(app: FastifyInstance): void {
  const textual = ajvWith({ coerceTypes: "array" });
  const json = ajvWith({ coerceTypes: false });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === "body" ? json : textual).compile(schema as object));
}
