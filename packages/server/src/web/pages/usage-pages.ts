import { Readable } from "node:stream";
import type { ResponseDocumentOf } from "@kiln/contract";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { formatTime } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { dashboardPages } from "./open-page.js";
import { formatBytes } from "./page-parts.js";
import { type PageContext, performAsPerson } from "./perform-as-person.js";
import { barChart } from "./usage-chart.js";

type Usage = ResponseDocumentOf<"usage.report">;

const EXPORT_PAGE = 1000;

const cents = (amount: number | null) => (amount === null ? "—" : `$${(amount / 100).toFixed(2)}`);
const vcpuSeconds = (n: number) => `${n.toLocaleString("en-US")} vCPU·s`;

/** The period a URL asks for (`YYYY-MM`), or none (the operation defaults to the current month). */
function periodOf(request: FastifyRequest): { period?: string } {
  const raw = (request.query as { period?: unknown }).period;
  return typeof raw === "string" && raw !== "" ? { period: raw } : {};
}

function renderUsage(usage: Usage): string {
  const t = usage.totals;
  const priced = usage.rate_card !== null;
  const totals = `<div class="summary" id="usage-totals">
<div><strong id="total-vcpu-seconds">${t.vcpu_seconds.toLocaleString("en-US")}</strong>vCPU-seconds</div>
<div><strong id="total-jobs">${t.jobs}</strong>jobs</div><div><strong>${t.attempts}</strong>attempts</div>
<div><strong>${escapeHtml(formatBytes(t.bytes_uploaded))}</strong>uploaded</div>
<div><strong id="total-amount">${cents(t.amount_cents)}</strong>${priced ? "charged" : "no rate card"}</div></div>`;
  const perDay = barChart(
    "chart-days",
    `vCPU-seconds per day, ${usage.period}`,
    usage.days.map((d) => ({
      label: d.date,
      value: d.vcpu_seconds,
      title: `${d.date}: ${vcpuSeconds(d.vcpu_seconds)}, ${d.jobs} jobs, ${d.attempts} attempts${priced ? `, ${cents(d.amount_cents)}` : ""}`,
    })),
    vcpuSeconds,
  );
  const perRepository = barChart(
    "chart-repositories",
    `vCPU-seconds per repository, ${usage.period}`,
    usage.repositories.map((r) => ({
      label: r.repository,
      value: r.vcpu_seconds,
      title: `${r.repository}: ${vcpuSeconds(r.vcpu_seconds)}, ${r.jobs} jobs${priced ? `, ${cents(r.amount_cents)}` : ""}`,
    })),
    vcpuSeconds,
  );
  const rows = usage.repositories
    .map(
      (r) =>
        `<tr data-repository="${escapeHtml(r.repository)}"><td>${escapeHtml(r.repository)}</td><td class="num">${r.jobs}</td><td class="num">${r.attempts}</td><td class="num">${r.vcpu_seconds.toLocaleString("en-US")}</td><td class="num">${escapeHtml(formatBytes(r.bytes_uploaded))}</td><td class="num">${cents(r.amount_cents)}</td></tr>`,
    )
    .join("\n");
  const exportHref = `/usage/export.ndjson?period=${encodeURIComponent(usage.period)}`;
  return `<form class="filters" method="get" action="/usage"><label>Month<input type="month" name="period" value="${escapeHtml(usage.period)}"></label><button type="submit">Show</button></form>
<p class="muted">Complete up to ${formatTime(usage.as_of)}. Adjustments: ${t.adjustment_vcpu_seconds.toLocaleString("en-US")} vCPU-seconds (${cents(t.adjustment_amount_cents)}).
<a id="export" href="${escapeHtml(exportHref)}">Download the export</a> (every metering record and adjustment, NDJSON; totals equal this report).</p>
${totals}<h2>Per day</h2>${perDay}<h2>Per repository</h2>${perRepository}
${rows === "" ? "" : `<table id="usage-repositories"><thead><tr><th>Repository</th><th>Jobs</th><th>Attempts</th><th>vCPU-seconds</th><th>Uploaded</th><th>Amount</th></tr></thead><tbody>${rows}</tbody></table>`}`;
}

/**
 * Every page of usage.export for the period as NDJSON lines (`{"type":"metering",…}`,
 * `"storage"`, `"upload"`, `"adjustment"`, then one `"totals"`): one export page held at a time.
 */
async function* exportLines(ctx: PageContext, period: { period?: string }): AsyncGenerator<string> {
  let cursor: string | undefined;
  let first = true;
  do {
    const page: ResponseDocumentOf<"usage.export"> = await performAsPerson(ctx, "usage.export", {
      query: { limit: EXPORT_PAGE, ...(cursor === undefined ? period : { cursor }) },
    });
    if (first) {
      yield `${JSON.stringify({ type: "period", tenant: page.tenant, period: page.period, as_of: page.as_of, rate_card: page.rate_card })}\n`;
    }
    for (const record of page.records) yield `${JSON.stringify({ type: "metering", ...record })}\n`;
    for (const record of page.storage) yield `${JSON.stringify({ type: "storage", ...record })}\n`;
    for (const record of page.uploads) yield `${JSON.stringify({ type: "upload", ...record })}\n`;
    for (const record of page.adjustments) yield `${JSON.stringify({ type: "adjustment", ...record })}\n`;
    if (page.totals !== null) yield `${JSON.stringify({ type: "totals", ...page.totals })}\n`;
    first = false;
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
}

/** The usage page (usage.report as charts and a table) and its download (usage.export, every page). */
export function registerUsagePages(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const pages = dashboardPages(deps, handlers);

  app.get("/usage", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    try {
      const usage = await performAsPerson(ctx, "usage.report", { query: periodOf(request) });
      return pages.send(ctx, 200, { title: `Usage ${usage.period}`, body: renderUsage(usage) });
    } catch (error) {
      return pages.refused(ctx, "Usage", error, { href: "/usage", label: "This month's usage" });
    }
  });

  app.get("/usage/export.ndjson", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const period = periodOf(request);
    const lines = exportLines(ctx, period);
    try {
      // The first page is read before answering, so a refused period is a refusal page, not a broken download.
      const head = await lines.next();
      const name = `kiln-usage-${period.period ?? "current"}.ndjson`;
      return reply
        .type("application/x-ndjson; charset=utf-8")
        .header("content-disposition", `attachment; filename="${name}"`)
        .header("cache-control", "no-store")
        .send(
          Readable.from(
            (async function* () {
              if (head.done !== true) yield head.value;
              yield* lines;
            })(),
          ),
        );
    } catch (error) {
      return pages.refused(ctx, "Usage export", error, { href: "/usage", label: "This month's usage" });
    }
  });
}
