/**
 * fast-check arbitraries derived from the catalogue's TypeBox schemas (which are JSON Schema):
 * `validOf(schema)` generates values the schema accepts, `hostileOf(schema)` takes such a value
 * and breaks it the ways an attacker would (wrong types, extra members, huge strings, deep
 * nesting, control characters and lone surrogates). Only the keywords the catalogue's request
 * schemas use are understood; an unknown one throws, so a new keyword cannot silently go
 * unfuzzed.
 */
import fc from "fast-check";

export interface JsonSchema {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  patternProperties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  minProperties?: number;
  maxProperties?: number;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
}

/** Keywords that only describe (or that Ajv fills in) and so need no generation. */
const DESCRIPTIVE = new Set(["description", "title", "default", "examples", "$id", "deprecated", "readOnly"]);
const UNDERSTOOD = new Set([
  "type",
  "const",
  "enum",
  "anyOf",
  "oneOf",
  "allOf",
  "properties",
  "patternProperties",
  "required",
  "additionalProperties",
  "minProperties",
  "maxProperties",
  "items",
  "minItems",
  "maxItems",
  "uniqueItems",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
]);

function checkKeywords(schema: JsonSchema): void {
  for (const key of Object.keys(schema)) {
    if (!UNDERSTOOD.has(key) && !DESCRIPTIVE.has(key)) {
      throw new Error(`schema-arbitrary: keyword ${key} is not understood (${JSON.stringify(schema).slice(0, 200)})`);
    }
  }
}

/** Removes `(?=…)` and `(?!…)` groups (fast-check's stringMatching has no lookaheads). */
function withoutLookaheads(pattern: string): string {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === "\\") {
      out += pattern.slice(i, i + 2);
      i++;
      continue;
    }
    if (pattern.startsWith("(?=", i) || pattern.startsWith("(?!", i)) {
      let depth = 0;
      let inClass = false;
      for (; i < pattern.length; i++) {
        const c = pattern[i];
        if (c === "\\") i++;
        else if (inClass) inClass = c !== "]";
        else if (c === "[") inClass = true;
        else if (c === "(") depth++;
        else if (c === ")" && --depth === 0) break;
      }
      continue;
    }
    out += pattern[i];
  }
  return out;
}

const patternCache = new Map<string, fc.Arbitrary<string>>();

/** Strings matching `pattern` (lookaheads honoured by filtering), within the length bounds. */
function matching(pattern: string, minLength: number, maxLength: number): fc.Arbitrary<string> {
  const key = `${pattern}\u0000${minLength}\u0000${maxLength}`;
  const cached = patternCache.get(key);
  if (cached !== undefined) return cached;
  const full = new RegExp(pattern, "u");
  const base = withoutLookaheads(pattern);
  const fits = (s: string) => s.length >= minLength && s.length <= maxLength && full.test(s);
  const arbitrary = fc.stringMatching(new RegExp(base)).filter(fits);
  patternCache.set(key, arbitrary);
  return arbitrary;
}

const DATE_MIN = new Date("2000-01-01T00:00:00.000Z");
const DATE_MAX = new Date("2100-01-01T00:00:00.000Z");

function stringOf(schema: JsonSchema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = schema.maxLength ?? 10_000;
  if (schema.format === "date-time") {
    return fc.date({ min: DATE_MIN, max: DATE_MAX, noInvalidDate: true }).map((d) => d.toISOString());
  }
  if (schema.format !== undefined) throw new Error(`schema-arbitrary: format ${schema.format} is not understood`);
  if (schema.pattern !== undefined) return matching(schema.pattern, minLength, maxLength);
  const short = fc.string({ minLength, maxLength: Math.min(maxLength, Math.max(minLength, 24)) });
  if (maxLength > 10_000) return short;
  // The bounds themselves are where validation and storage disagree most often.
  return fc.oneof(
    { weight: 4, arbitrary: short },
    { weight: 1, arbitrary: fc.string({ minLength: maxLength, maxLength, unit: "grapheme-ascii" }) },
    { weight: 1, arbitrary: fc.string({ minLength: maxLength, maxLength, unit: "binary" }) },
  );
}

function integerOf(schema: JsonSchema): fc.Arbitrary<number> {
  const min = schema.minimum ?? (schema.exclusiveMinimum === undefined ? -(2 ** 40) : schema.exclusiveMinimum + 1);
  const max = schema.maximum ?? (schema.exclusiveMaximum === undefined ? 2 ** 40 : schema.exclusiveMaximum - 1);
  const edges = [min, max, Math.min(max, Math.max(min, 0)), Math.min(max, min + 1)];
  // Unbounded above: the largest exact integer, the first inexact one, past PostgreSQL's bigint.
  if (schema.maximum === undefined && schema.exclusiveMaximum === undefined) {
    edges.push(2 ** 31, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2, 2 ** 63, 1e20);
  }
  return fc.oneof(
    fc.constantFrom(...edges),
    fc.integer({ min: Math.max(min, Number.MIN_SAFE_INTEGER), max: Math.min(max, Number.MAX_SAFE_INTEGER) }),
  );
}

function numberOf(schema: JsonSchema): fc.Arbitrary<number> {
  return fc.double({
    min: schema.minimum ?? schema.exclusiveMinimum ?? -1e12,
    max: schema.maximum ?? schema.exclusiveMaximum ?? 1e12,
    minExcluded: schema.exclusiveMinimum !== undefined,
    maxExcluded: schema.exclusiveMaximum !== undefined,
    noNaN: true,
    noDefaultInfinity: true,
  });
}

function objectOf(schema: JsonSchema, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, member] of Object.entries(properties)) model[name] = validOf(member, depth + 1);
  const record = fc.record(model, { requiredKeys: [...required].filter((k) => k in properties) });
  const patterns = Object.entries(schema.patternProperties ?? {});
  const open = typeof schema.additionalProperties === "object" ? schema.additionalProperties : undefined;
  const minProperties = schema.minProperties ?? 0;
  let extra: fc.Arbitrary<Record<string, unknown>> = fc.constant({});
  if (patterns.length > 0 || open !== undefined || schema.additionalProperties === undefined) {
    const keyArb =
      patterns.length > 0
        ? fc.oneof(...patterns.map(([p]) => matching(p, 1, 256)))
        : fc.string({ minLength: 1, maxLength: 16 }).filter((k) => !(k in properties));
    const valueArb =
      patterns.length > 0
        ? fc.oneof(...patterns.map(([, s]) => validOf(s, depth + 1)))
        : open !== undefined
          ? validOf(open, depth + 1)
          : fc.jsonValue({ maxDepth: 2 });
    const wanted = Math.max(0, minProperties - required.size);
    extra = fc.dictionary(keyArb, valueArb, { minKeys: wanted, maxKeys: Math.max(wanted, 4) });
  }
  return fc
    .tuple(record, extra)
    .map(([known, more]) => ({ ...more, ...known }))
    .filter((o) => Object.keys(o).length >= minProperties);
}

/** Values `schema` accepts. */
export function validOf(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
  checkKeywords(schema);
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum !== undefined) return fc.constantFrom(...schema.enum);
  const union = schema.anyOf ?? schema.oneOf;
  if (union !== undefined) return fc.oneof(...union.map((s) => validOf(s, depth)));
  if (schema.allOf !== undefined) {
    throw new Error("schema-arbitrary: allOf is not understood");
  }
  const type = schema.type;
  if (Array.isArray(type)) return fc.oneof(...type.map((t) => validOf({ ...schema, type: t }, depth)));
  switch (type) {
    case "string":
      return stringOf(schema);
    case "integer":
      return integerOf(schema);
    case "number":
      return numberOf(schema);
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "array": {
      const items = schema.items === undefined ? fc.jsonValue({ maxDepth: 2 }) : validOf(schema.items, depth + 1);
      const minLength = schema.minItems ?? 0;
      const maxLength = Math.min(schema.maxItems ?? 6, Math.max(minLength, 6));
      return schema.uniqueItems === true
        ? fc.uniqueArray(items, { minLength, maxLength, selector: (v) => JSON.stringify(v) })
        : fc.array(items, { minLength, maxLength });
    }
    case "object":
      return objectOf(schema, depth);
    case undefined:
      return fc.jsonValue({ maxDepth: 2 });
    default:
      throw new Error(`schema-arbitrary: type ${type} is not understood`);
  }
}

/** A value of another JSON type than `value`'s. */
export function otherTypeThan(value: unknown): fc.Arbitrary<unknown> {
  const kinds: fc.Arbitrary<unknown>[] = [];
  if (typeof value !== "string") kinds.push(fc.string({ maxLength: 8 }), fc.constant(""));
  if (typeof value !== "number") kinds.push(fc.integer(), fc.constant(1.5), fc.constant(-1), fc.constant(1e308));
  if (typeof value !== "boolean") kinds.push(fc.boolean());
  if (value !== null) kinds.push(fc.constant(null));
  if (!Array.isArray(value)) kinds.push(fc.constant([]), fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }));
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    kinds.push(fc.constant({}), fc.dictionary(fc.string({ maxLength: 4 }), fc.integer(), { maxKeys: 3 }));
  }
  return fc.oneof(...kinds);
}

/** Strings no schema should let through to storage or a host. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "\u0000",
    "a\u0000b",
    "\ud800",
    "x\udfffy",
    "\u202e",
    "\uffff",
    "../../etc/passwd",
    "%00",
    "__proto__",
    "\u0024{HOME}",
    "'; drop table jobs; --",
    "\r\nset-cookie: x=y",
    "\u0085\u2028\u2029",
    " ",
  ),
  fc.string({ unit: "binary", maxLength: 32 }),
  fc.string({ unit: "binary-ascii", maxLength: 32 }),
);

/** A huge string: past any maxLength, some past the default body limit. */
export const hugeString: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom(257, 4_097, 70_000, 1_100_000), fc.constantFrom("a", "é", "\u0000", "😀", "/"))
  .map(([n, c]) => c.repeat(n));

/**
 * Stands where deep nesting goes: JSON text cannot be built by JSON.stringify thousands of levels
 * deep, so `deepText` replaces the placeholder's string literal in the serialized body.
 */
export const DEEP_PLACEHOLDER = "__kiln_reliability_deep_nesting__";

/** `levels` nested arrays or objects around `1`, as JSON text. */
export function deepText(levels: number, asObject: boolean): string {
  return asObject ? `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}` : `${"[".repeat(levels)}1${"]".repeat(levels)}`;
}

type Path = (string | number)[];

/** Every path into a JSON value (the root included), parents before children. */
export function pathsOf(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) pathsOf(v, [...prefix, i], out);
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) pathsOf(v, [...prefix, k], out);
  }
  return out;
}

function getAt(value: unknown, path: Path): unknown {
  let current = value;
  for (const step of path) current = (current as Record<string | number, unknown>)[step];
  return current;
}

/** A deep copy of `value` with the value at `path` replaced. */
export function setAt(value: unknown, path: Path, replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path as [string | number, ...Path];
  if (Array.isArray(value)) {
    const copy = [...value];
    copy[head as number] = setAt(copy[head as number], rest, replacement);
    return copy;
  }
  const copy = { ...(value as Record<string, unknown>) };
  Object.defineProperty(copy, head, {
    value: setAt(copy[head as string], rest, replacement),
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return copy;
}

export type Mutation = "wrong-type" | "extra-member" | "huge-string" | "deep-nesting" | "nasty-string" | "drop-member";

export interface Mutated {
  readonly value: unknown;
  readonly mutation: Mutation;
  /** For deep-nesting: what replaces DEEP_PLACEHOLDER's string literal in the JSON text. */
  readonly deep?: { readonly levels: number; readonly asObject: boolean };
}

/** `value` broken at one of its paths, with the kind of break. */
export function mutated(value: unknown): fc.Arbitrary<Mutated> {
  const paths = pathsOf(value);
  const objects = paths.filter((p) => {
    const v = getAt(value, p);
    return v !== null && typeof v === "object" && !Array.isArray(v);
  });
  const members = paths.filter((p) => p.length > 0 && typeof p[p.length - 1] === "string");
  const strings = paths.filter((p) => typeof getAt(value, p) === "string");
  const options: fc.Arbitrary<Mutated>[] = [
    fc
      .constantFrom(...paths)
      .chain((p) =>
        otherTypeThan(getAt(value, p)).map((v) => ({ value: setAt(value, p, v), mutation: "wrong-type" as const })),
      ),
    fc
      .tuple(fc.constantFrom(...paths), hugeString)
      .map(([p, s]) => ({ value: setAt(value, p, s), mutation: "huge-string" as const })),
    fc
      .tuple(fc.constantFrom(...paths), fc.constantFrom(63, 65, 200, 5_000, 20_000), fc.boolean())
      .map(([p, levels, asObject]) => ({
        value: setAt(value, p, DEEP_PLACEHOLDER),
        mutation: "deep-nesting" as const,
        deep: { levels, asObject },
      })),
  ];
  if (objects.length > 0) {
    const extraKey = fc.oneof(
      fc.constantFrom("__proto__", "constructor", "prototype", "extra", "", "id", "tenant_id", "tenant"),
      fc.string({ maxLength: 12 }),
    );
    options.push(
      fc.tuple(fc.constantFrom(...objects), extraKey, fc.jsonValue({ maxDepth: 2 })).map(([p, k, v]) => ({
        value: setAt(value, [...p, k], v),
        mutation: "extra-member" as const,
      })),
    );
  }
  if (strings.length > 0) {
    options.push(
      fc
        .tuple(fc.constantFrom(...strings), nastyString, fc.constantFrom("replace", "append", "prepend"))
        .map(([p, s, how]) => {
          const old = getAt(value, p) as string;
          const next = how === "replace" ? s : how === "append" ? old + s : s + old;
          return { value: setAt(value, p, next), mutation: "nasty-string" as const };
        }),
    );
  }
  if (members.length > 0) {
    options.push(
      fc.constantFrom(...members).map((p) => {
        const parent = getAt(value, p.slice(0, -1)) as Record<string, unknown>;
        const { [p[p.length - 1] as string]: _dropped, ...rest } = parent;
        return { value: setAt(value, p.slice(0, -1), rest), mutation: "drop-member" as const };
      }),
    );
  }
  return fc.oneof(...options);
}

/**
 * JSON text of `value` with one object's first member written twice (the first time with
 * `shadow` as its value): JSON.parse keeps the last, so a server that validates one copy and
 * stores another would show here.
 */
export function withDuplicateKey(value: unknown, shadow: unknown): string | null {
  const text = JSON.stringify(value);
  const objectStart = /\{"((?:[^"\\]|\\.)*)":/.exec(text);
  if (objectStart === null) return null;
  const key = objectStart[1] ?? "";
  const at = objectStart.index + 1;
  return `${text.slice(0, at)}"${key}":${JSON.stringify(shadow)},${text.slice(at)}`;
}

/** The UTF-8 bytes of `text` with invalid sequences placed inside its first string literal (or at its start). */
export function withInvalidUtf8(text: string, sequence: Buffer): Buffer {
  const bytes = Buffer.from(text, "utf8");
  const quote = bytes.indexOf(0x22);
  const at = quote === -1 ? 0 : quote + 1;
  return Buffer.concat([bytes.subarray(0, at), sequence, bytes.subarray(at)]);
}

export const INVALID_UTF8: readonly Buffer[] = [
  Buffer.from([0xff]),
  Buffer.from([0xc3, 0x28]),
  Buffer.from([0xed, 0xa0, 0x80]), // an encoded surrogate
  Buffer.from([0xf4, 0x90, 0x80, 0x80]), // past U+10FFFF
  Buffer.from([0xc0, 0xaf]), // overlong '/'
  Buffer.from([0xe2, 0x82]), // truncated
  Buffer.from([0x00]),
];
