import type { Operation } from "@kiln/contract";

/**
 * A catalogue schema (TypeBox's TSchema, plain JSON Schema underneath), named through the
 * contract's own types: the CLI reads schemas but imports no schema library.
 */
export type TSchema = Extract<Operation["response"], { encoding: "json" }>["schema"];

/**
 * The schema types a command-line value maps onto without ambiguity: one word typed as the
 * schema says. Objects, arrays and nullable members are not simple; they travel in --body.
 */
export type SimpleKind =
  | { readonly kind: "string" }
  | { readonly kind: "integer" }
  | { readonly kind: "number" }
  | { readonly kind: "boolean" }
  | { readonly kind: "choice"; readonly choices: readonly string[] };

/** The simple kind of a schema, or undefined when a single word cannot carry it. */
export function simpleKindOf(schema: TSchema): SimpleKind | undefined {
  switch (schema.type) {
    case "string":
      return typeof schema.const === "string" ? { kind: "choice", choices: [schema.const] } : { kind: "string" };
    case "integer":
      return { kind: "integer" };
    case "number":
      return { kind: "number" };
    case "boolean":
      return { kind: "boolean" };
  }
  const members = (schema.anyOf ?? schema.enum) as unknown[] | undefined;
  if (!Array.isArray(members) || members.length === 0) return undefined;
  const choices = members.map((m) =>
    typeof m === "string" ? m : typeof (m as TSchema).const === "string" ? ((m as TSchema).const as string) : null,
  );
  return choices.every((c): c is string => c !== null) ? { kind: "choice", choices } : undefined;
}

/** How --help names a simple kind's value. */
export function placeholderOf(kind: SimpleKind): string {
  switch (kind.kind) {
    case "choice":
      return kind.choices.join("|");
    case "boolean":
      return "true|false";
    default:
      return kind.kind;
  }
}

/**
 * The word typed as its schema says, or an Error naming what was expected. Strings pass as
 * given: their patterns and bounds are the schema check's to judge, with its own messages.
 */
export function parseWord(kind: SimpleKind, word: string): unknown {
  switch (kind.kind) {
    case "string":
    case "choice":
      return word;
    case "integer":
      if (!/^-?[0-9]+$/.test(word)) throw new Error(`expected an integer, got ${JSON.stringify(word)}`);
      return Number(word);
    case "number": {
      const value = word.trim() === "" ? Number.NaN : Number(word);
      if (!Number.isFinite(value)) throw new Error(`expected a number, got ${JSON.stringify(word)}`);
      return value;
    }
    case "boolean":
      if (word !== "true" && word !== "false") throw new Error(`expected true or false, got ${JSON.stringify(word)}`);
      return word === "true";
  }
}

/** A member name as a command-line word: `policy_revision` → `policy-revision`. */
export const kebab = (name: string): string => name.replaceAll("_", "-");
