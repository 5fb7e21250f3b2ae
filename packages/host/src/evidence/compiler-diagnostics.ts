/**
 * rustc's error diagnostics as Cargo renders them on stderr (`--message-format=
 * json-render-diagnostics` leaves them out of the JSON messages), read line by line:
 *
 *     error[E0308]: mismatched types
 *      --> src/lib.rs:1:34
 *       |
 *     1 | pub fn f() -> u32 { let x: u32 = "a"; x }
 *       |                            ---   ^^^ expected `u32`, found `&str`
 *
 * A diagnostic starts at column 0 with its level and, for most errors, a code; its primary
 * location is the first `-->` line; it ends at a blank line. Cargo's own `error:` lines (could
 * not compile, a failed build script, a failed test binary) are not rustc's and are left out.
 */

export interface CompilerError {
  /** e.g. `E0308`; null for an error without a code (`cannot find value`, a linker failure). */
  readonly code: string | null;
  readonly message: string;
  /** The primary location as rustc printed it: relative to the Cargo workspace root for its members. */
  readonly file: string | null;
  readonly line: number | null;
  readonly column: number | null;
  /** The diagnostic as rendered (its first lines, bounded). */
  readonly rendered: string;
}

const HEADER = /^error(?:\[(?<code>[A-Z]\d{4})\])?: (?<message>.+)$/;
const CARGO_OWN =
  /^error: (could not compile|failed to run custom build command|aborting due to|test failed|doctest failed|bench failed|\d+ targets? failed|no matching package|failed to)/;
const LOCATION = /^\s*--> (?<file>.+):(?<line>\d+):(?<column>\d+)$/;
const MAX_RENDERED_LINES = 40;
const MAX_RENDERED_CHARS = 4000;
/** Diagnostics kept: the first ones are what a reader needs; the count goes on. */
const MAX_KEPT = 20;

export class CompilerDiagnosticReader {
  readonly #errors: CompilerError[] = [];
  #seen = 0;
  #open: { code: string | null; message: string; location: RegExpExecArray | null; lines: string[] } | null = null;

  /** One line of Cargo's stderr (ANSI colours removed). */
  push(line: string): void {
    const open = this.#open;
    if (open !== null) {
      if (line.trim() === "" || HEADER.test(line) || /^(warning|error)[:[]/.test(line)) this.#close();
      else {
        open.location ??= LOCATION.exec(line);
        if (open.lines.length < MAX_RENDERED_LINES) open.lines.push(line);
        return;
      }
    }
    const header = HEADER.exec(line);
    if (header?.groups === undefined || CARGO_OWN.test(line)) return;
    this.#open = {
      code: header.groups.code ?? null,
      message: header.groups.message ?? "",
      location: null,
      lines: [line],
    };
  }

  end(): void {
    this.#close();
  }

  /** The first errors read, in order. */
  get errors(): readonly CompilerError[] {
    return this.#errors;
  }

  /** Every error diagnostic read, kept or not. */
  get count(): number {
    return this.#seen;
  }

  #close(): void {
    const open = this.#open;
    if (open === null) return;
    this.#open = null;
    this.#seen += 1;
    if (this.#errors.length >= MAX_KEPT) return;
    const location = open.location?.groups;
    this.#errors.push({
      code: open.code,
      message: open.message,
      file: location?.file ?? null,
      line: location === undefined ? null : Number(location.line),
      column: location === undefined ? null : Number(location.column),
      rendered: open.lines.join("\n").slice(0, MAX_RENDERED_CHARS),
    });
  }
}
