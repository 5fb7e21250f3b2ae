import { table } from "../output.js";

/**
 * A compact text rendering of any response document, for reading at a terminal; `--json` gives
 * the document itself. Derived from the value's shape alone, so every operator operation's
 * answer renders without a per-operation printer:
 * - a list of records is a table of the members whose values are single words in every row
 *   (the others are named beneath it: `--json` shows them);
 * - a record is `member: value` lines, nested records indented, lists of words on one line,
 *   lists of records as `-` items;
 * - null is `-`.
 */
export function renderDocument(value: unknown): string {
  if (Array.isArray(value) && value.length > 0 && value.every(isRecord)) return renderTable(value);
  if (isRecord(value) || Array.isArray(value)) return renderLines(value, "").join("\n");
  return word(value);
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const isWord = (value: unknown) => value === null || typeof value !== "object";

const word = (value: unknown): string => (value === null || value === undefined ? "-" : String(value));

function renderTable(rows: Record<string, unknown>[]): string {
  const members = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  const columns = members.filter((m) => rows.every((row) => isWord(row[m])));
  const nested = members.filter((m) => !columns.includes(m));
  const text = table(
    columns.map((c) => c.toUpperCase()),
    rows.map((row) => columns.map((c) => word(row[c]))),
  );
  return nested.length === 0 ? text : `${text}\n(${rows.length} rows; also ${nested.join(", ")}: see --json)`;
}

function renderLines(value: Record<string, unknown> | unknown[], indent: string): string[] {
  if (Array.isArray(value)) {
    if (value.length === 0) return [`${indent}(none)`];
    return value.flatMap((item) => {
      if (!isRecord(item) && !Array.isArray(item)) return [`${indent}- ${word(item)}`];
      const [first = "", ...rest] = renderLines(item, `${indent}  `);
      return [`${indent}- ${first.trimStart()}`, ...rest];
    });
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return [`${indent}(empty)`];
  return entries.flatMap(([member, item]) => {
    if (isWord(item)) return [`${indent}${member}: ${word(item)}`];
    if (Array.isArray(item) && item.length === 0) return [`${indent}${member}: (none)`];
    if (Array.isArray(item) && item.every(isWord)) return [`${indent}${member}: ${item.map(word).join(", ")}`];
    return [`${indent}${member}:`, ...renderLines(item as Record<string, unknown> | unknown[], `${indent}  `)];
  });
}
