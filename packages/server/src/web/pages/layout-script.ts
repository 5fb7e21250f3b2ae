/**
 * What every dashboard page runs and shows in its tab, served from kiln's own /assets (the page
 * policy allows no inline script): times in the viewer's own time zone, and on a page about a
 * job, a tab title and icon that follow the job's status as the page's own script updates it.
 */

import { escapeHtml } from "./html.js";

export const LAYOUT_SCRIPT_PATH = "/assets/layout.js";

/** A navigation's links, the section holding `path` (itself or a page under it) marked as the current page. */
export function navigationLinks(sections: readonly (readonly [string, string])[], path: string | undefined): string {
  const pathname = path?.split(/[?#]/)[0] ?? "";
  return sections
    .map(([href, label]) => {
      const current = pathname === href || pathname.startsWith(`${href}/`);
      return `<a href="${href}"${current ? ' aria-current="page"' : ""}>${label}</a>`;
    })
    .join("");
}

/** The icon of a status (a job's), or kiln's own where there is none. */
export function faviconPath(status: string | undefined): string {
  return `/assets/favicon/${encodeURIComponent(status ?? "kiln")}.svg`;
}

/** A status's colour in the tab: green passed, red failed, blue running, amber queued, grey ended otherwise. */
const STATUS_COLOURS: Readonly<Record<string, string>> = {
  passed: "#2da44e",
  failed: "#cf222e",
  running: "#0969da",
  cancellation_requested: "#0969da",
  queued: "#bf8700",
  cancelled: "#6e7781",
};

/** The icon as SVG: a status's coloured disc, or kiln's dark square with a "k". */
export function faviconSvg(name: string): string {
  const colour = STATUS_COLOURS[name];
  if (colour === undefined) {
    return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1d1d1f"/><text x="16" y="23" font-family="system-ui,sans-serif" font-size="20" font-weight="700" text-anchor="middle" fill="#fff">k</text></svg>`;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1d1d1f"/><circle cx="16" cy="16" r="10" fill="${colour}"/></svg>`;
}

/** What every page's head carries: the viewport, both colour schemes, the status icon and the layout script. */
export function pageHead(
  title: string,
  favicon: string | undefined,
  style: string,
  scripts: readonly string[],
): string {
  return `<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark">
<title>${escapeHtml(title)}</title><link rel="icon" id="favicon" href="${escapeHtml(faviconPath(favicon))}" type="image/svg+xml"><style>${style}</style>${[
    LAYOUT_SCRIPT_PATH,
    ...scripts,
  ]
    .map((src) => `<script src="${escapeHtml(src)}" defer></script>`)
    .join("")}`;
}

export const LAYOUT_SCRIPT = `(() => {
  const pad = (n) => String(n).padStart(2, "0");
  // One formatter for the page: building one costs far more than using it, and a followed log
  // used to build one per streamed line (bench/dashboard-log.mjs, docs/benchmarks.md).
  let zoneFormat = null;
  const zoneOf = (date) => {
    try {
      zoneFormat ??= new Intl.DateTimeFormat(undefined, { timeZoneName: "short" });
      const part = zoneFormat
        .formatToParts(date)
        .find((p) => p.type === "timeZoneName");
      return part === undefined ? "" : " " + part.value;
    } catch {
      return "";
    }
  };
  // Each <time datetime> once: its text in the viewer's zone; its title keeps the UTC time. A log
  // line's time (.ts) is not one of these: it is the log's own clock, UTC to the millisecond.
  const localize = () => {
    for (const element of document.querySelectorAll("time[datetime]:not([data-local]):not(.ts)")) {
      const date = new Date(element.getAttribute("datetime"));
      element.dataset.local = "true";
      if (Number.isNaN(date.getTime())) continue;
      if (!element.title) element.title = date.toISOString().slice(0, 19).replace("T", " ") + " UTC";
      element.textContent =
        date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) + " " +
        pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds()) + zoneOf(date);
    }
  };
  // A job's page: the tab's title and icon say its status as the page's script changes it.
  const followStatus = () => {
    const subject = document.body.dataset.titleSubject;
    const holder = document.getElementById("job-status");
    const status = holder === null ? undefined : holder.dataset.status;
    if (subject === undefined || status === undefined) return;
    const title = status.replaceAll("_", " ") + " · " + subject + " · kiln";
    if (document.title !== title) document.title = title;
    const icon = document.getElementById("favicon");
    const href = "/assets/favicon/" + encodeURIComponent(status) + ".svg";
    if (icon !== null && icon.getAttribute("href") !== href) icon.setAttribute("href", href);
  };
  const run = () => {
    localize();
    followStatus();
  };
  run();
  new MutationObserver(run).observe(document.body, {
    subtree: true,
    childList: true,
    attributes: true,
    attributeFilter: ["data-status"],
  });
})();
`;
