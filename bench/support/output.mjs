// What the benches print: progress lines on stderr, figures in Markdown tables on stdout.

/** One progress line on stderr (stdout carries the results). */
export const log = (line) => process.stderr.write(`${line}\n`);

/** A figure with `digits` decimals; "–" for one that is missing (null, undefined, NaN). */
export const fmt = (x, digits = 2) => (x === null || x === undefined || Number.isNaN(x) ? "–" : x.toFixed(digits));

/** A Markdown table of `rows` under `header`. */
export const table = (header, rows) => {
  const lines = [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`];
  for (const row of rows) lines.push(`| ${row.join(" | ")} |`);
  return lines.join("\n");
};
