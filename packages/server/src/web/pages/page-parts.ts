import { randomUUID } from "node:crypto";
import type { ResponseDocumentOf } from "@kiln/contract";
import { escapeHtml } from "./html.js";

type SettingView = ResponseDocumentOf<"tenant.settings.get">["settings"][number];

/** Bytes as a short human size (binary units, as quotas are set). */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

/** A share of a limit as a bar with its figures (`used of limit`), for quotas and concurrency. */
export function meter(id: string, used: number, limit: number | undefined, format: (n: number) => string): string {
  if (limit === undefined) return `<span id="${escapeHtml(id)}">${escapeHtml(format(used))} (no limit set)</span>`;
  const share = limit === 0 ? 1 : Math.min(1, used / limit);
  return `<span class="meter" id="${escapeHtml(id)}" data-used="${used}" data-limit="${limit}"><span class="meter-fill${share >= 0.9 ? " meter-high" : ""}" style="width:${(share * 100).toFixed(1)}%"></span></span> ${escapeHtml(format(used))} of ${escapeHtml(format(limit))}`;
}

/** The hidden idempotency key every mutation form carries: a double submission performs once. */
export const keyField = (): string => `<input type="hidden" name="idempotency_key" value="${randomUUID()}">`;

/** A one-button form posting to `action` (with its own idempotency key). */
export function postButton(action: string, label: string, attributes = ""): string {
  return `<form method="post" action="${escapeHtml(action)}" class="inline">${keyField()}<button type="submit"${attributes}>${escapeHtml(label)}</button></form>`;
}

/** A setting's value as text (a list joined by commas). */
export function settingValueText(value: SettingView["value"]): string {
  return Array.isArray(value) ? value.join(", ") : String(value);
}

/** Effective settings as a table: name, value, where it comes from, whether it applies and why. */
export function settingsTable(id: string, settings: readonly SettingView[]): string {
  if (settings.length === 0) return `<p class="muted" id="${escapeHtml(id)}">None.</p>`;
  const rows = settings
    .map(
      (s) =>
        `<tr data-setting="${escapeHtml(s.name)}"><td class="mono">${escapeHtml(s.name)}</td><td class="mono">${escapeHtml(settingValueText(s.value))}</td><td>${escapeHtml(s.origin)}</td><td>${s.status === undefined ? "" : `<span class="status status-${escapeHtml(s.status.replace(" ", "."))}">${escapeHtml(s.status)}</span>`}</td><td class="muted">${escapeHtml(s.detail ?? "")}</td></tr>`,
    )
    .join("\n");
  return `<table id="${escapeHtml(id)}"><thead><tr><th>Setting</th><th>Value</th><th>Origin</th><th>Status</th><th>Why</th></tr></thead><tbody>
${rows}</tbody></table>`;
}

/**
 * A notice chosen by a fixed key after a redirect (`?notice=saved`): the page says only what
 * it knows, never text from the URL.
 */
export function noticeOf(raw: unknown, notices: Readonly<Record<string, string>>): string {
  const text = typeof raw === "string" && Object.hasOwn(notices, raw) ? notices[raw] : undefined;
  return text === undefined ? "" : `<p class="notice" id="notice" role="status">${escapeHtml(text)}</p>`;
}
