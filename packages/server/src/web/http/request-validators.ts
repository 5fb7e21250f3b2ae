import { CATALOGUE } from "@kiln/contract";
import { Ajv, type Options, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyInstance, FastifySchemaValidationError } from "fastify";

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

/** An error in ajv's shape, so the error boundary names the field as it names schema errors. */
interface ValueError {
  instancePath: string;
  schemaPath: string;
  keyword: string;
  message: string;
  params: Record<string, unknown>;
}

const pointer = (path: readonly string[]) => path.map((s) => `/${s}`).join("");

/**
 * The first value no schema may let through, whatever the operation: text holding U+0000
 * (PostgreSQL's text cannot store it, so the same request would be kept on SQLite and fail on
 * PostgreSQL; hosts cannot pass it to a program), and a number beyond 2^53 − 1 in magnitude
 * (ajv takes `1e999` and `99999999999999999999` for integers; no kiln value is that large, and
 * the database refuses them past the schema). One pass over the value, which the body parser
 * has already bounded in depth.
 *
 * The pass allocates nothing per member — one path stack, a pointer made only for the value
 * refused: an inline source's bytes are an array of millions of numbers, and a tuple and a path
 * copy per element made this walk (and its garbage collection) take seconds of the one event
 * loop every tenant shares (found by reliability trial T15).
 */
export function unrepresentableValue(value: unknown, path: string[] = []): ValueError | null {
  const stack = [...path];
  return walk(value, stack);
}

const nulIn = (path: readonly string[], message: string): ValueError => ({
  instancePath: pointer(path),
  schemaPath: "#",
  keyword: "nul",
  message,
  params: {},
});

const tooLarge = (path: readonly string[]): ValueError => ({
  instancePath: pointer(path),
  schemaPath: "#",
  keyword: "maximum",
  message: `must be at most ${Number.MAX_SAFE_INTEGER} in magnitude`,
  params: {},
});

function walk(value: unknown, path: string[]): ValueError | null {
  if (typeof value === "string") {
    return value.includes("\0") ? nulIn(path, "contains a NUL byte, which kiln accepts in no text") : null;
  }
  if (typeof value === "number") return Math.abs(value) > Number.MAX_SAFE_INTEGER ? tooLarge(path) : null;
  if (value === null || typeof value !== "object") return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const member: unknown = value[i];
      // Numbers, the bulk of a large body, are checked without touching the path.
      if (typeof member === "number") {
        if (Math.abs(member) <= Number.MAX_SAFE_INTEGER) continue;
      } else if (member === null || typeof member === "boolean") continue;
      path.push(String(i));
      const found = walk(member, path);
      path.pop();
      if (found !== null) return found;
    }
    return null;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (key.includes("\0")) return nulIn(path, "has a member name holding a NUL byte, which kiln accepts in no text");
    path.push(key);
    const found = walk((value as Record<string, unknown>)[key], path);
    path.pop();
    if (found !== null) return found;
  }
  return null;
}

/**
 * The request schemas of the catalogue's operations — the public API, whose inputs the rule of
 * unrepresentableValue holds for. (The host protocol's messages carry what a build printed,
 * which may hold any byte; they are not held to it.)
 */
const API_SCHEMAS = new Set<unknown>(
  CATALOGUE.flatMap((op) => [
    op.request.params,
    op.request.query,
    op.request.body?.encoding === "json" ? op.request.body.schema : undefined,
  ]).filter((schema) => schema !== undefined),
);

/** What a compiled check answers: whether the value passed, and if not, ajv's errors for it. */
export interface CheckedValidator {
  (data: unknown): boolean;
  errors: FastifySchemaValidationError[] | null;
}

/**
 * `schema`'s check, compiled by `ajv` the first time it is called: an app registers every
 * catalogued operation, and compiling all their schemas was most of a process's start (a
 * kiln-server, a kiln-host's agent, each test process), while one process calls few of them.
 * That every schema compiles is tested (request-validators.test.ts).
 */
function compiledOnFirstUse(
  ajv: Ajv,
  schema: object,
): { (data: unknown): boolean; errors: ValidateFunction["errors"] } {
  let compiled: ValidateFunction | null = null;
  const check = Object.assign(
    (data: unknown): boolean => {
      compiled ??= ajv.compile(schema);
      const ok = compiled(data);
      check.errors = compiled.errors;
      return ok;
    },
    { errors: null as ValidateFunction["errors"] },
  );
  return check;
}

/** The JSON body Ajv: a body already carries its types, so nothing is converted. */
export const jsonBodyAjv = () => ajvWith({ coerceTypes: false });

/**
 * `schema` compiled by `ajv`, followed for a catalogued operation's request by the rule of
 * unrepresentableValue. The one way a request part is checked, on the event loop (the route's
 * validator) and in the body worker (body-worker.ts) alike.
 */
export function checkedValidatorOf(ajv: Ajv, schema: object): CheckedValidator {
  const check = compiledOnFirstUse(ajv, schema);
  if (!API_SCHEMAS.has(schema)) {
    const plain = Object.assign(
      (data: unknown) => {
        const ok = check(data);
        plain.errors = ok ? null : ((check.errors ?? null) as FastifySchemaValidationError[] | null);
        return ok;
      },
      { errors: null as FastifySchemaValidationError[] | null },
    );
    return plain;
  }
  const validate = Object.assign(
    (data: unknown): boolean => {
      if (!check(data)) {
        validate.errors = (check.errors ?? null) as FastifySchemaValidationError[] | null;
        return false;
      }
      const refused = unrepresentableValue(data);
      validate.errors = refused === null ? null : [refused];
      return refused === null;
    },
    { errors: null as FastifySchemaValidationError[] | null },
  );
  return validate;
}

/**
 * Bodies already checked off the event loop (a large body parsed and validated in the body
 * worker), with the verdict: null when valid, else the errors to report. The route's validator
 * answers that verdict instead of checking the body again, so the refusal of a body checked in
 * the worker is made exactly where and as a body checked here would be.
 */
const CHECKED_ELSEWHERE = new WeakMap<object, FastifySchemaValidationError[] | null>();

export function checkedElsewhere(body: object, errors: FastifySchemaValidationError[] | null): object {
  CHECKED_ELSEWHERE.set(body, errors);
  return body;
}

/**
 * The two Ajvs every app in this process compiles its routes' schemas with: made once, so a
 * second app (a test process builds hundreds; a process serving API and operator listeners
 * builds two) finds each catalogued schema compiled in ajv's cache, keyed by the schema object,
 * instead of compiling the whole catalogue again (most of an app's start).
 */
let ajvs: { readonly textual: Ajv; readonly json: Ajv } | null = null;
export const routeAjvs = () => {
  ajvs ??= { textual: ajvWith({ coerceTypes: "array" }), json: jsonBodyAjv() };
  return ajvs;
};

/**
 * Request validation with one Ajv per kind of input. Path, query and header values arrive
 * as strings (and a repeated query member as an array), so they are converted to the
 * schema's type; a JSON body already carries its types, so a value of the wrong type is
 * refused rather than converted (`"scopes": "read"` is not `["read"]`). After the schema,
 * every part of an operation's request is refused a value nothing may carry
 * (unrepresentableValue).
 */
export function installRequestValidators(app: FastifyInstance): void {
  const { textual, json } = routeAjvs();
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart !== "body") return checkedValidatorOf(textual, schema as object);
    const check = checkedValidatorOf(json, schema as object);
    const validate = Object.assign(
      (data: unknown): boolean => {
        if (typeof data === "object" && data !== null && CHECKED_ELSEWHERE.has(data)) {
          validate.errors = CHECKED_ELSEWHERE.get(data) ?? null;
          return validate.errors === null;
        }
        const ok = check(data);
        validate.errors = check.errors;
        return ok;
      },
      { errors: null as FastifySchemaValidationError[] | null },
    );
    return validate;
  });
}
