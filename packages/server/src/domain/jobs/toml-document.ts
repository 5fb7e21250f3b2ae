import { parse } from "smol-toml";

/** A TOML file of the source as admission reads it: its value, or why it does not parse (the parser's first line). */
export type TomlDocument = { readonly toml: unknown } | { readonly error: string };

/** Reads one TOML file of the captured source by repository-relative path; null when the source has none. */
export type TomlReader = (path: string) => Promise<TomlDocument | null>;

/**
 * How deep tables and arrays of a TOML file admission reads may nest. Real Cargo files nest a
 * few levels (`[target.'cfg(…)'.dependencies.foo]` is four); dotted keys nest without bound in
 * smol-toml (its own limit is for inline values), and a value nested a few thousand levels deep
 * overflows the stack of whatever copies it between threads or walks it.
 */
export const MAX_TOML_DEPTH = 64;

/**
 * Parses a TOML file's bytes. Pure (a body worker runs it: http/body-worker.ts): smol-toml holds
 * its thread for about half a microsecond a byte, and memory several times the text, so admission
 * bounds the files first (jobs/admission-source.ts) and parses them off the event loop. A file
 * nested deeper than MAX_TOML_DEPTH is answered as one that does not parse.
 */
export function parseTomlDocument(bytes: Uint8Array): TomlDocument {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  let toml: unknown;
  try {
    toml = parse(text);
  } catch (error) {
    return { error: (error instanceof Error ? error.message : String(error)).split("\n")[0] || "parse error" };
  }
  return nestedDeeperThan(toml, MAX_TOML_DEPTH)
    ? { error: `tables or arrays nested deeper than ${MAX_TOML_DEPTH} levels` }
    : { toml };
}

/** Whether tables and arrays nest deeper than `limit` in `value` (walked without recursion). */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const pending: [unknown, number][] = [[value, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, depth] = next;
    if (typeof node !== "object" || node === null || node instanceof Date) continue;
    if (depth >= limit) return true;
    for (const child of Object.values(node)) pending.push([child, depth + 1]);
  }
  return false;
}
