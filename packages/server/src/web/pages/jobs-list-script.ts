/**
 * What the jobs list does without a reload, served from /assets: events.stream's job events
 * are hints (spec: reconciled against authoritative reads), so on each one — and once when
 * the stream opens, to cover what changed before it — the script fetches the list page as
 * it is (same filters, same cursor) and swaps its `#jobs-live` part (summary counts and rows)
 * for the fresh server-rendered one. Hints arriving while a fetch runs coalesce into one more.
 */
export const JOBS_LIST_SCRIPT = `"use strict";
let refreshing = false;
let again = false;
async function refreshList() {
  if (refreshing) {
    again = true;
    return;
  }
  refreshing = true;
  try {
    do {
      again = false;
      const response = await fetch(location.pathname + location.search, { credentials: "same-origin" });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("jobs-live");
      const current = document.getElementById("jobs-live");
      if (fresh === null || current === null) return;
      current.replaceWith(document.adoptNode(fresh));
    } while (again);
  } finally {
    refreshing = false;
  }
}
const events = new EventSource("/api/events");
events.addEventListener("open", () => void refreshList());
events.addEventListener("job", () => void refreshList());
`;
