/** A JSON Schema as plain data (TypeBox schemas minus their symbol-keyed metadata). */
export type JsonSchema = { [keyword: string]: unknown };

const isSchema = (value: unknown): value is JsonSchema =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A catalogue (TypeBox) schema as plain JSON Schema: symbols and undefined members dropped. */
export function plainSchema(schema: unknown): JsonSchema {
  return JSON.parse(JSON.stringify(schema)) as JsonSchema;
}

/** Keywords that cost tokens in tools/list and change nothing for a caller. */
const DROPPED = new Set(["title", "$id", "$schema", "examples"]);

/**
 * Size bounds: the API enforces them (and its refusal names the member); an agent
 * composing a call gains little from reading them.
 */
const BOUNDS = new Set(["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"]);

/** Keywords that describe a value without constraining it (a `{const}` branch may carry them). */
const ANNOTATIONS = new Set(["title", "description"]);

function constOf(branch: unknown): { type: unknown; value: unknown } | undefined {
  if (!isSchema(branch) || !("const" in branch)) return undefined;
  if (Object.keys(branch).some((k) => k !== "const" && k !== "type" && !ANNOTATIONS.has(k))) return undefined;
  return { type: branch.type ?? typeof branch.const, value: branch.const };
}

/** `anyOf` of literals of one type → `{type, enum}`. */
function literalUnion(branches: unknown[]): JsonSchema | undefined {
  const consts = branches.map(constOf);
  if (consts.length === 0 || consts.some((c) => c === undefined)) return undefined;
  const types = new Set(consts.map((c) => c?.type));
  if (types.size !== 1) return undefined;
  return { type: consts[0]?.type, enum: consts.map((c) => c?.value) };
}

/** `anyOf [X, {type: null}]` with a single-typed X → X with `type: [T, "null"]`. */
function nullableUnion(branches: unknown[]): JsonSchema | undefined {
  if (branches.length !== 2) return undefined;
  const nullIndex = branches.findIndex((b) => isSchema(b) && b.type === "null" && Object.keys(b).length === 1);
  const other = branches[1 - nullIndex];
  if (nullIndex < 0 || !isSchema(other) || typeof other.type !== "string") return undefined;
  if ("enum" in other) return { ...other, enum: [...(other.enum as unknown[]), null], type: [other.type, "null"] };
  return { ...other, type: [other.type, "null"] };
}

export interface CompactOptions {
  /**
   * Depth (0 = the schema given) down to which descriptions are kept. Deeper ones are
   * dropped: agents pay for every byte of tools/list, and the member names, enums and
   * patterns say most of it.
   */
  readonly describeDepth: number;
  /** Longest description kept at the top (depth ≤ 1); longer ones are cut after a sentence. */
  readonly maxDescription: number;
  /** Longest description kept deeper. */
  readonly maxDeepDescription: number;
  /** Depth down to which `pattern`s are kept (a member's own, e.g. `owner/name`). */
  readonly patternDepth: number;
}

/** The text cut after its last whole sentence within `max` characters (else at a word). */
function tightDescription(text: string, max: number): string {
  if (text.length <= max) return text;
  let cut = -1;
  for (const match of text.matchAll(/[.;](?=\s)/g)) {
    if (match.index >= max) break;
    cut = match.index;
  }
  if (cut >= 20) return `${text.slice(0, cut)}.`;
  const word = text.lastIndexOf(" ", max - 1);
  return `${text.slice(0, word > 0 ? word : max - 1)}…`;
}

/**
 * A smaller schema with the same meaning for a caller: titles dropped, literal unions as
 * `enum`, nullable unions as type arrays, `additionalProperties: true` (the default)
 * dropped, and descriptions kept only near the top and tightened.
 */
export function compactSchema(
  schema: unknown,
  options: CompactOptions,
  depth = 0,
  describeUntil = options.describeDepth,
): unknown {
  if (Array.isArray(schema)) return schema.map((s) => compactSchema(s, options, depth, describeUntil));
  if (!isSchema(schema)) return schema;
  let node: JsonSchema = schema;
  const union = Array.isArray(node.anyOf) ? node.anyOf : undefined;
  if (union !== undefined) {
    const merged = literalUnion(union) ?? nullableUnion(union);
    if (merged !== undefined) {
      const { anyOf: _anyOf, ...rest } = node;
      node = { ...merged, ...rest };
    }
  }
  // Where the deepest described level says nothing about an object, its members are
  // described instead (once): `workspace` has no description, so its members keep theirs.
  const childUntil =
    depth === describeUntil && describeUntil === options.describeDepth && typeof node.description !== "string"
      ? describeUntil + 1
      : describeUntil;
  const out: JsonSchema = {};
  for (const [keyword, value] of Object.entries(node)) {
    if (DROPPED.has(keyword) || BOUNDS.has(keyword)) continue;
    if (keyword === "pattern" && depth > options.patternDepth) continue;
    // Closed records refuse unknown members at the API; below the arguments themselves
    // the keyword only costs bytes, and `true` is the default anyway.
    if (keyword === "additionalProperties" && typeof value === "boolean" && (value || depth > 0)) continue;
    if (keyword === "description") {
      if (depth <= describeUntil && typeof value === "string") {
        out.description = tightDescription(value, depth <= 1 ? options.maxDescription : options.maxDeepDescription);
      }
      continue;
    }
    if (keyword === "properties" || keyword === "patternProperties") {
      out[keyword] = Object.fromEntries(
        Object.entries(value as JsonSchema).map(([name, sub]) => [
          name,
          compactSchema(sub, options, depth + 1, childUntil),
        ]),
      );
      continue;
    }
    if (keyword === "const" || keyword === "enum" || keyword === "default") {
      out[keyword] = value;
      continue;
    }
    out[keyword] = compactSchema(value, options, keyword === "items" ? depth : depth + 1, describeUntil);
  }
  return out;
}
