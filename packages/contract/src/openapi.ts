import type { TObject, TSchema } from "@sinclair/typebox";
import { type Operation, possibleRefusals } from "./operation.js";
import { REFUSAL_CODES, type RefusalCode } from "./refusal-codes.js";

/** A JSON value as it appears in the generated document. */
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface OpenApiOptions {
  readonly version: string;
  readonly serverUrl?: string;
}

/** Keywords whose values are data, not subschemas: never hoisted. */
const DATA_KEYWORDS = new Set(["const", "default", "enum", "examples", "example"]);

/** The JSON Schema type of a constant, or undefined for an object or array. */
function jsonTypeOf(value: Json): string | undefined {
  if (value === null) return "null";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  if (typeof value === "string" || typeof value === "boolean") return typeof value;
  return undefined;
}

/**
 * A union of literals (TypeBox writes `anyOf` of `{const, type}`) as `{type, enum}`, the form
 * OpenAPI readers and code generators take for an enumeration. The type is the values' own:
 * `integer` for integral numbers, which TypeBox types `number`. Any other union is kept.
 */
function enumOfConsts(node: JsonObject): JsonObject {
  const members = node.anyOf;
  if (!Array.isArray(members) || members.length === 0 || "enum" in node || "type" in node) return node;
  const values: Json[] = [];
  const types = new Set<string>();
  for (const member of members) {
    if (member === null || typeof member !== "object" || Array.isArray(member)) return node;
    if (!("const" in member) || Object.keys(member).some((k) => k !== "const" && k !== "type")) return node;
    const value = member.const as Json;
    const type = jsonTypeOf(value);
    if (type === undefined) return node;
    types.add(type);
    values.push(value);
  }
  // Integral and fractional numbers together are numbers; any other mix is not one type.
  if (types.size === 2 && types.has("integer") && types.has("number")) types.delete("integer");
  const [type] = types;
  if (types.size !== 1 || type === undefined) return node;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key !== "anyOf") out[key] = value;
    else {
      out.type = type;
      out.enum = values;
    }
  }
  return out;
}

/**
 * Turns TypeBox schemas (which carry non-JSON symbols) into plain JSON, writes unions of
 * literals as enumerations, and hoists every titled subschema — a record — into
 * `components.schemas`, referenced by `$ref`.
 * The same title on two different schemas is a contract bug and throws.
 */
class ComponentRegistry {
  readonly schemas: Record<string, JsonObject> = {};
  private readonly serialized = new Map<string, string>();

  ref(schema: TSchema): Json {
    return this.hoist(JSON.parse(JSON.stringify(schema)) as Json, true);
  }

  private hoist(node: Json, isSchema: boolean): Json {
    if (Array.isArray(node)) return node.map((n) => this.hoist(n, isSchema));
    if (node === null || typeof node !== "object") return node;
    let out: JsonObject = {};
    for (const [key, value] of Object.entries(node)) {
      if (DATA_KEYWORDS.has(key)) out[key] = value;
      else if (key === "properties" && value !== null && typeof value === "object" && !Array.isArray(value)) {
        out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.hoist(v, true)]));
      } else out[key] = this.hoist(value, true);
    }
    if (isSchema) out = enumOfConsts(out);
    const title = out.title;
    if (!isSchema || typeof title !== "string") return out;
    const text = JSON.stringify(out);
    const seen = this.serialized.get(title);
    if (seen !== undefined && seen !== text) throw new Error(`two different schemas are titled ${title}`);
    this.serialized.set(title, text);
    this.schemas[title] = out;
    return { $ref: `#/components/schemas/${title}` };
  }
}

const SECURITY_SCHEMES: JsonObject = {
  bearer: {
    type: "http",
    scheme: "bearer",
    description: "A tenant credential: a CLI device token (`kiln_cli_…`) or an agent credential (`kiln_agent_…`).",
  },
  kiln_session: {
    type: "apiKey",
    in: "cookie",
    name: "kiln_session",
    description: "A signed-in dashboard session of a person.",
  },
  kiln_operator_session: {
    type: "apiKey",
    in: "cookie",
    name: "kiln_operator_session",
    description: "An operator session opened with the operator bootstrap credential.",
  },
  operator_bootstrap: {
    type: "http",
    scheme: "bearer",
    description: "The operator bootstrap credential; only opens an operator session.",
  },
};

function securityOf(op: Operation): Json {
  switch (op.security.kind) {
    case "public":
      return [];
    case "session":
      return [{ kiln_session: [] }];
    case "tenant":
      return op.security.cookie === true ? [{ bearer: [] }, { kiln_session: [] }] : [{ bearer: [] }];
    case "operator":
      return [{ kiln_operator_session: [] }];
    case "operator-bootstrap":
      return [{ operator_bootstrap: [] }];
  }
}

function parametersOf(op: Operation, components: ComponentRegistry): Json[] {
  const params: Json[] = [];
  const add = (where: "path" | "query", object: TObject | undefined) => {
    if (object === undefined) return;
    const required = new Set(object.required ?? []);
    for (const [name, schema] of Object.entries(object.properties)) {
      const { description, ...rest } = JSON.parse(JSON.stringify(schema)) as JsonObject;
      params.push({
        name,
        in: where,
        required: where === "path" || required.has(name),
        ...(typeof description === "string" ? { description } : {}),
        schema: components.ref(rest as TSchema),
      });
    }
  };
  add("path", op.request.params);
  add("query", op.request.query);
  if (op.keyed) params.push({ $ref: "#/components/parameters/IdempotencyKey" });
  return params;
}

function requestBodyOf(op: Operation, components: ComponentRegistry): Json | undefined {
  const body = op.request.body;
  if (body === undefined) return undefined;
  if (body.encoding === "json") {
    return {
      required: true,
      ...(body.maxBytes === undefined ? {} : { description: `At most ${body.maxBytes} bytes.` }),
      content: { "application/json": { schema: components.ref(body.schema) } },
    };
  }
  return {
    required: true,
    description: `${body.description} At most ${body.maxBytes} bytes.`,
    content: {
      "application/octet-stream": { schema: { type: "string", contentMediaType: "application/octet-stream" } },
    },
  };
}

function successOf(op: Operation, components: ComponentRegistry): [string, Json] {
  const r = op.response;
  switch (r.encoding) {
    case "json":
      return [
        "200",
        { description: op.summary, content: { "application/json": { schema: components.ref(r.schema) } } },
      ];
    case "bytes":
      return [
        "200",
        {
          description: r.description,
          content: { [r.contentType]: { schema: { type: "string", contentMediaType: r.contentType } } },
        },
      ];
    case "sse":
      return [
        "200",
        {
          description: r.description,
          content: {
            "text/event-stream": {
              schema: { type: "string", description: "Server-sent events; each frame's data is JSON." },
              "x-kiln-event": components.ref(r.event),
            },
          },
        },
      ];
    case "none":
      return ["204", { description: r.description }];
  }
}

/** Refusal responses grouped by HTTP status; each lists the codes it may carry. */
function refusalResponsesOf(op: Operation): Record<string, Json> {
  const byStatus = new Map<number, RefusalCode[]>();
  for (const code of possibleRefusals(op)) {
    const status = REFUSAL_CODES[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, Json> = {};
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    out[String(status)] = {
      description: `Refused: ${codes.map((c) => `\`${c}\``).join(", ")}.`,
      content: { "application/json": { schema: { $ref: "#/components/schemas/Refusal" } } },
    };
  }
  return out;
}

/**
 * The OpenAPI 3.1 document, generated from the catalogue alone. operationIds are the
 * spec's identifiers; `x-kiln-*` members carry what OpenAPI has no field for.
 */
export function buildOpenApiDocument(catalogue: readonly Operation[], refusal: TSchema, options: OpenApiOptions) {
  const components = new ComponentRegistry();
  components.ref(refusal);
  const paths: Record<string, JsonObject> = {};
  for (const op of catalogue) {
    const [status, success] = successOf(op, components);
    const body = requestBodyOf(op, components);
    const entry: JsonObject = {
      operationId: op.id,
      summary: op.summary,
      ...(op.description === undefined ? {} : { description: op.description }),
      tags: [op.tag],
      ...(op.deprecated === true ? { deprecated: true } : {}),
      ...(op.extension === undefined ? {} : { "x-kiln-extension": { reason: op.extension.reason } }),
      security: securityOf(op),
      parameters: parametersOf(op, components),
      ...(body === undefined ? {} : { requestBody: body }),
      responses: { [status]: success, ...refusalResponsesOf(op) },
      "x-kiln-refusals": [...op.refusals],
      "x-kiln-keyed": op.keyed,
      ...(op.idempotency === "durable-owner" ? { "x-kiln-idempotency": "durable-owner" } : {}),
      ...(op.shownOnce === undefined ? {} : { "x-kiln-shown-once": [...op.shownOnce] }),
      ...(op.security.kind === "tenant" ? { "x-kiln-scope": op.security.scope } : {}),
      ...(op.mcp === undefined ? {} : { "x-kiln-mcp-tool": op.mcp.tool }),
    };
    const methods = paths[op.path] ?? {};
    if (methods[op.method.toLowerCase()] !== undefined) throw new Error(`${op.method} ${op.path} is catalogued twice`);
    methods[op.method.toLowerCase()] = entry;
    paths[op.path] = methods;
  }
  const tags = [...new Set(catalogue.map((op) => op.tag))].map((name) => ({ name }));
  return {
    openapi: "3.1.0",
    info: {
      title: "kiln",
      version: options.version,
      summary: "A hosted remote Cargo build service.",
      description:
        "kiln runs the exact cargo build/check/test of a captured Cargo workspace in an isolated machine of the chosen size, with a warm cache, and returns durable logs, test results, evidence, artifacts and a usage bill. Every refusal is a Refusal document; its code fixes the HTTP status.",
    },
    ...(options.serverUrl === undefined ? {} : { servers: [{ url: options.serverUrl }] }),
    tags,
    paths,
    components: {
      schemas: components.schemas,
      securitySchemes: SECURITY_SCHEMES,
      parameters: {
        IdempotencyKey: {
          name: "idempotency-key",
          in: "header",
          required: true,
          description:
            "Exactly one per keyed mutation. General mutations keep their receipt 24 hours (a changed body is idempotency_key_reused; a repeat within the five-minute reservation is idempotency_key_in_flight). Source transfer keys are the upload id; job submission keys are the submission identity.",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
      },
    },
  };
}
