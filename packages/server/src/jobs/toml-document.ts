import { parse } from "smol-toml";

/** A TOML file of the source as admission reads it: its value, or why it does not parse (the parser's first line). */
export type TomlDocument = { readonly toml: unknown } | { readonly error: string };

/** Reads one TOML file of the captured source by repository-relative path; null when the source has none. */
export type TomlReader = (path: string) => Promise<TomlDocument | null>;

/**
 * Parses a TOML file's bytes. Pure (a body worker runs it: http/body-worker.ts): smol-toml holds
 * its thread for about half a microsecond a byte, and memory several times the text, so admission
 * bounds the files first (jobs/admission-source.ts) and parses them off the event loop.
 */
export function parseTomlDocument(bytes: Uint8Array): TomlDocument {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  try {
    return { toml: parse(text) };
  } catch (error) {
    return { error: (error instanceof Error ? error.message : String(error)).split("\n")[0] || "parse error" };
  }
}
