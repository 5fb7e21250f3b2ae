import { escapeHtml } from "./html.js";

/** A run of log text and the classes its ANSI SGR state gives it (`ansi-bold`, `ansi-fg-1`, …). */
export interface AnsiSegment {
  readonly text: string;
  readonly classes: string;
}

/**
 * Splits a log line at its ANSI escape sequences into runs of plain text with the colour
 * classes the SGR codes (`ESC[…m`) set; every other escape sequence is dropped. The text is
 * never markup: the server escapes it and the page script sets it as textContent.
 *
 * Self-contained on purpose (no imports, no outer names): the job page's script embeds this
 * very function's source, so the server and the browser colour a line the same way.
 */
export function ansiSegments(line: string): AnsiSegment[] {
  const segments: AnsiSegment[] = [];
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC
  const sequence = /\u001b\[([0-9;?]*)([A-Za-z])/g;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a lone ESC of a cut-off sequence
  const stray = /\u001b/g;
  let bold = false;
  let dim = false;
  let italic = false;
  let underline = false;
  let fg: number | null = null;
  let bg: number | null = null;
  const classesNow = () =>
    [
      bold ? "ansi-bold" : "",
      dim ? "ansi-dim" : "",
      italic ? "ansi-italic" : "",
      underline ? "ansi-underline" : "",
      fg === null ? "" : `ansi-fg-${fg}`,
      bg === null ? "" : `ansi-bg-${bg}`,
    ]
      .filter((c) => c !== "")
      .join(" ");
  const push = (text: string) => {
    const clean = text.replace(stray, "");
    if (clean !== "") segments.push({ text: clean, classes: classesNow() });
  };
  let last = 0;
  for (let match = sequence.exec(line); match !== null; match = sequence.exec(line)) {
    push(line.slice(last, match.index));
    last = sequence.lastIndex;
    if (match[2] !== "m") continue;
    const codes = (match[1] ?? "") === "" ? [0] : (match[1] ?? "").split(";").map((c) => Number(c) || 0);
    for (let i = 0; i < codes.length; i += 1) {
      const code = codes[i] ?? 0;
      if (code === 0) {
        bold = dim = italic = underline = false;
        fg = bg = null;
      } else if (code === 1) bold = true;
      else if (code === 2) dim = true;
      else if (code === 3) italic = true;
      else if (code === 4) underline = true;
      else if (code === 22) bold = dim = false;
      else if (code === 23) italic = false;
      else if (code === 24) underline = false;
      else if (code >= 30 && code <= 37) fg = code - 30;
      else if (code >= 90 && code <= 97) fg = code - 90 + 8;
      else if (code === 39) fg = null;
      else if (code >= 40 && code <= 47) bg = code - 40;
      else if (code >= 100 && code <= 107) bg = code - 100 + 8;
      else if (code === 49) bg = null;
      // 256-colour and true-colour forms: their parameters are skipped, the colour is not shown.
      else if (code === 38 || code === 48) i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 0;
    }
  }
  push(line.slice(last));
  return segments;
}

/**
 * Whether a log line is where a reader looks first: a rustc error (`error:`, `error[E0308]:`),
 * a failed test (`test name ... FAILED`) or a panic. Self-contained like ansiSegments (embedded
 * in the page script).
 */
export function isErrorLine(line: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC
  const plain = line.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "");
  return /^(error(\[E\d+\])?:|test \S.* \.\.\. FAILED\s*$|thread '.*' panicked at)/.test(plain);
}

/** A log line's text without its ANSI escape sequences: what a reader sees. */
export function plainLogText(line: string): string {
  return ansiSegments(line)
    .map((s) => s.text)
    .join("");
}

/** Text as escaped HTML, each occurrence of `needle` (either case) in a `<mark>`. */
function markedHtml(text: string, needle: string | null): string {
  if (needle === null || needle === "") return escapeHtml(text);
  const lower = text.toLowerCase();
  const wanted = needle.toLowerCase();
  let html = "";
  let from = 0;
  for (let at = lower.indexOf(wanted); at !== -1; at = lower.indexOf(wanted, from)) {
    html += `${escapeHtml(text.slice(from, at))}<mark>${escapeHtml(text.slice(at, at + wanted.length))}</mark>`;
    from = at + wanted.length;
  }
  return html + escapeHtml(text.slice(from));
}

/**
 * A log line's text as escaped HTML: its ANSI runs as spans with their colour classes, and a
 * searched text marked where it lies within one run.
 */
export function ansiToHtml(line: string, needle: string | null = null): string {
  return ansiSegments(line)
    .map((s) => {
      const html = markedHtml(s.text, needle);
      return s.classes === "" ? html : `<span class="${s.classes}">${html}</span>`;
    })
    .join("");
}

/** The colours of the classes ansiSegments gives (the 16 terminal colours, on the log's dark background). */
export const ANSI_STYLE = [
  "#3b3b3b",
  "#ff6b6b",
  "#6bd66b",
  "#e5c15c",
  "#6ba7ff",
  "#d68bd6",
  "#5cc8d6",
  "#dddddd",
  "#7a7a7a",
  "#ff8f8f",
  "#8ff08f",
  "#ffe08a",
  "#9cc4ff",
  "#f0aaf0",
  "#8ae6f0",
  "#ffffff",
]
  .map((colour, n) => `.ansi-fg-${n}{color:${colour}}.ansi-bg-${n}{background:${colour}}`)
  .join("")
  .concat(
    ".ansi-bold{font-weight:700}.ansi-dim{opacity:.7}.ansi-italic{font-style:italic}.ansi-underline{text-decoration:underline}",
  );
