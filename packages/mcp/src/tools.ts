import { CATALOGUE, type Operation, type Scope } from "@kiln/contract";
import { compactSchema, type JsonSchema, plainSchema } from "./json-schema.js";

/** The argument naming a keyed mutation's idempotency key. */
export const IDEMPOTENCY_KEY_ARGUMENT = "idempotency_key";

/** Where one tool argument goes in the API request. */
export type ArgumentPlace = "params" | "query" | "body";

/**
 * One MCP tool: a catalogue operation with an MCP name. Its input is one object of the
 * operation's path parameters, query parameters and body members (a body that is not an
 * object is the `body` member), plus `idempotency_key` for a keyed mutation.
 */
export interface KilnTool {
  readonly name: string;
  readonly scope: Scope;
  readonly operation: Operation;
  readonly description: string;
  readonly inputSchema: JsonSchema & { type: "object" };
  /** A GET operation changes nothing: hosts may run it without asking. */
  readonly readOnly: boolean;
  /** Argument name → where it goes. */
  readonly places: ReadonlyMap<string, ArgumentPlace>;
  /** The body is not an object of members: the `body` argument is the whole body. */
  readonly wholeBody: boolean;
  /** An open body: arguments not named elsewhere go into it. */
  readonly openBody: boolean;
}

/**
 * Descriptions are kept for the tool's own arguments (and the members of an argument
 * that has none); patterns for the arguments themselves. The API validates every request against the full
 * catalogue schema, so the listed schema is the same shape with less said.
 */
const COMPACT = { describeDepth: 1, maxDescription: 120, maxDeepDescription: 100, patternDepth: 1 } as const;

const IDEMPOTENCY_KEY_SCHEMA: JsonSchema = {
  type: "string",
  description: "Same key: the same request, retried safely. New request: new key.",
};

/** The object schema of one request part, or undefined when it has none. */
function objectSchemaOf(schema: unknown): JsonSchema | undefined {
  const plain = plainSchema(schema);
  return plain.type === "object" && typeof plain.properties === "object" ? plain : undefined;
}

function toolDescription(op: Operation): string {
  return op.summary;
}

/** Builds the tool for one catalogue entry that names an MCP tool. */
export function toolOf(op: Operation): KilnTool {
  if (op.mcp === undefined) throw new Error(`${op.id} names no MCP tool`);
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  const places = new Map<string, ArgumentPlace>();
  const add = (name: string, schema: unknown, place: ArgumentPlace, isRequired: boolean) => {
    if (places.has(name) || name === IDEMPOTENCY_KEY_ARGUMENT) {
      throw new Error(`${op.id}: the argument ${name} would name two request members`);
    }
    places.set(name, place);
    properties[name] = compactSchema(schema, COMPACT, 1);
    if (isRequired) required.push(name);
  };
  const addObject = (schema: JsonSchema, place: ArgumentPlace) => {
    const requiredMembers = new Set((schema.required as string[] | undefined) ?? []);
    for (const [name, member] of Object.entries(schema.properties as JsonSchema)) {
      add(name, member, place, requiredMembers.has(name));
    }
  };
  const params = op.request.params === undefined ? undefined : objectSchemaOf(op.request.params);
  const query = op.request.query === undefined ? undefined : objectSchemaOf(op.request.query);
  if (params !== undefined) addObject(params, "params");
  if (query !== undefined) addObject(query, "query");
  let wholeBody = false;
  let openBody = false;
  const body = op.request.body;
  if (body?.encoding === "json") {
    const object = objectSchemaOf(body.schema);
    if (object === undefined) {
      wholeBody = true;
      add("body", body.schema, "body", true);
    } else {
      openBody = object.additionalProperties !== false;
      addObject(object, "body");
    }
  } else if (body?.encoding === "bytes") {
    throw new Error(`${op.id}: a raw-bytes body has no MCP tool form`);
  }
  if (op.keyed) {
    properties[IDEMPOTENCY_KEY_ARGUMENT] = IDEMPOTENCY_KEY_SCHEMA;
    required.push(IDEMPOTENCY_KEY_ARGUMENT);
  }
  const inputSchema: JsonSchema & { type: "object" } = {
    type: "object",
    properties,
    ...(required.length > 0 ? { required } : {}),
  };
  return {
    name: op.mcp.tool,
    scope: op.mcp.scope,
    operation: op,
    description: toolDescription(op),
    inputSchema,
    readOnly: op.method === "GET",
    places,
    wholeBody,
    openBody,
  };
}

/** Every tool of the catalogue, in catalogue order. */
export const KILN_TOOLS: readonly KilnTool[] = CATALOGUE.filter((op) => op.mcp !== undefined).map(toolOf);

const BY_NAME = new Map(KILN_TOOLS.map((tool) => [tool.name, tool]));

export function toolByName(name: string): KilnTool | undefined {
  return BY_NAME.get(name);
}

/** The tools a credential holding `scopes` is offered: one per operation its scopes permit. */
export function toolsForScopes(scopes: readonly Scope[]): KilnTool[] {
  return KILN_TOOLS.filter((tool) => scopes.includes(tool.scope));
}

/** A tool's arguments split into the API request's parts. */
export interface SplitArguments {
  readonly params: Record<string, unknown>;
  readonly query: Record<string, unknown>;
  readonly body: unknown;
  readonly idempotencyKey: string | undefined;
}

/** The arguments cannot form a request (a local failure: nothing was sent). */
export class InvalidToolArguments extends Error {
  constructor(
    readonly tool: string,
    message: string,
  ) {
    super(`${tool}: ${message}`);
    this.name = "InvalidToolArguments";
  }
}

/**
 * Splits a call's arguments into path parameters, query and body. Values are not
 * validated here: the API validates every request against the catalogue and its
 * refusal names the member.
 */
export function splitArguments(tool: KilnTool, args: Record<string, unknown>): SplitArguments {
  const params: Record<string, unknown> = {};
  const query: Record<string, unknown> = {};
  const members: Record<string, unknown> = {};
  let body: unknown;
  let idempotencyKey: string | undefined;
  for (const [name, value] of Object.entries(args)) {
    if (name === IDEMPOTENCY_KEY_ARGUMENT && tool.operation.keyed) {
      if (typeof value !== "string" || value === "") {
        throw new InvalidToolArguments(tool.name, `${IDEMPOTENCY_KEY_ARGUMENT} must be a non-empty string`);
      }
      idempotencyKey = value;
      continue;
    }
    const place = tool.places.get(name) ?? (tool.openBody ? "body" : undefined);
    if (place === undefined) throw new InvalidToolArguments(tool.name, `unknown argument ${name}`);
    if (place === "params") params[name] = value;
    else if (place === "query") query[name] = value;
    else if (tool.wholeBody) body = value;
    else members[name] = value;
  }
  for (const [name, place] of tool.places) {
    if (place === "params" && params[name] === undefined) {
      throw new InvalidToolArguments(tool.name, `missing argument ${name}`);
    }
  }
  if (tool.operation.keyed && idempotencyKey === undefined) {
    throw new InvalidToolArguments(tool.name, `missing argument ${IDEMPOTENCY_KEY_ARGUMENT}`);
  }
  if (tool.operation.request.body?.encoding === "json" && !tool.wholeBody) body = members;
  return { params, query, body, idempotencyKey };
}
