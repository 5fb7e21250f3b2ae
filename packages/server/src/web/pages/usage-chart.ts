import { escapeHtml } from "./html.js";

/** One bar of a chart: its label, value, and the tooltip text. */
export interface Bar {
  readonly label: string;
  readonly value: number;
  readonly title: string;
}

const WIDTH = 720;
const BAR_HEIGHT = 22;

/**
 * Bars as inline SVG drawn on the server: no script and no chart library (the page policy runs
 * only kiln's own scripts), one row per bar with its label and value, each with a tooltip.
 */
export function barChart(id: string, caption: string, bars: readonly Bar[], format: (n: number) => string): string {
  if (bars.length === 0) return `<p class="muted" id="${escapeHtml(id)}">No usage in this period.</p>`;
  const max = Math.max(1, ...bars.map((b) => b.value));
  const labelWidth = 190;
  const plot = WIDTH - labelWidth - 110;
  const height = bars.length * BAR_HEIGHT + 4;
  const rows = bars
    .map((bar, i) => {
      const y = i * BAR_HEIGHT + 2;
      const width = Math.max(bar.value > 0 ? 1 : 0, Math.round((bar.value / max) * plot));
      return `<g class="bar-row" data-label="${escapeHtml(bar.label)}" data-value="${bar.value}"><title>${escapeHtml(bar.title)}</title>
<text x="${labelWidth - 8}" y="${y + 15}" text-anchor="end">${escapeHtml(bar.label)}</text>
<rect x="${labelWidth}" y="${y + 3}" width="${width}" height="${BAR_HEIGHT - 6}" rx="2"></rect>
<text x="${labelWidth + width + 6}" y="${y + 15}">${escapeHtml(format(bar.value))}</text></g>`;
    })
    .join("\n");
  return `<figure class="chart"><svg id="${escapeHtml(id)}" role="img" aria-label="${escapeHtml(caption)}" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" xmlns="http://www.w3.org/2000/svg">
${rows}</svg><figcaption>${escapeHtml(caption)}</figcaption></figure>`;
}
