/**
 * Rust's panic messages, read line by line wherever they appear (a failed test's captured
 * output on stdout, or stderr under `--nocapture`):
 *
 *     thread 'tests::fails' (17999) panicked at src/lib.rs:7:9:
 *     assertion `left == right` failed: f must be two
 *       left: 1
 *      right: 2
 *     note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
 *
 * The header names the thread (a test's thread is named after the test; the id in parentheses
 * is new in Rust 1.89) and the location; the message follows until a blank line, the note or a
 * backtrace. Rust before 1.73 printed `thread 'x' panicked at 'message', src/lib.rs:7:9` on one line.
 */

export interface PanicMessage {
  /** The panicking thread's name (`tests::fails`, `main`, `<unnamed>`). */
  readonly thread: string;
  /** The panic's location as the compiler named it: relative to the Cargo workspace root for its members. */
  readonly file: string;
  readonly line: number;
  readonly column: number;
  /** The message, lines joined with `\n`, bounded. */
  readonly message: string;
}

const HEADER = /^thread '(?<thread>[^']*)'(?: \(\d+\))? panicked at (?<file>.+):(?<line>\d+):(?<column>\d+):$/;
const OLD_HEADER =
  /^thread '(?<thread>[^']*)'(?: \(\d+\))? panicked at '(?<message>.*)', (?<file>.+):(?<line>\d+):(?<column>\d+)$/;
const END_OF_MESSAGE = /^(note: |stack backtrace:|---- .+ (stdout|stderr) ----$|failures:$)/;
const MAX_MESSAGE_LINES = 40;
const MAX_MESSAGE_CHARS = 4000;

/** Reads panic messages from one stream's lines, in order. */
export class PanicReader {
  #open: { thread: string; file: string; line: number; column: number; lines: string[]; chars: number } | null = null;

  constructor(private readonly onPanic: (panic: PanicMessage) => void) {}

  /** One line (without its newline). */
  push(line: string): void {
    const open = this.#open;
    if (open !== null) {
      if (line.trim() === "" || END_OF_MESSAGE.test(line) || HEADER.test(line) || OLD_HEADER.test(line)) {
        this.#close();
      } else {
        if (open.lines.length < MAX_MESSAGE_LINES && open.chars < MAX_MESSAGE_CHARS) {
          const kept = line.slice(0, MAX_MESSAGE_CHARS - open.chars);
          open.lines.push(kept);
          open.chars += kept.length + 1;
        }
        return;
      }
    }
    const header = HEADER.exec(line)?.groups;
    if (header !== undefined) {
      this.#open = {
        thread: header.thread ?? "",
        file: header.file ?? "",
        line: Number(header.line),
        column: Number(header.column),
        lines: [],
        chars: 0,
      };
      return;
    }
    const old = OLD_HEADER.exec(line)?.groups;
    if (old !== undefined)
      this.onPanic({
        thread: old.thread ?? "",
        file: old.file ?? "",
        line: Number(old.line),
        column: Number(old.column),
        message: (old.message ?? "").slice(0, MAX_MESSAGE_CHARS),
      });
  }

  /** The stream (or the section holding the message) ended. */
  end(): void {
    this.#close();
  }

  #close(): void {
    const open = this.#open;
    if (open === null) return;
    this.#open = null;
    this.onPanic({
      thread: open.thread,
      file: open.file,
      line: open.line,
      column: open.column,
      message: open.lines.join("\n"),
    });
  }
}
