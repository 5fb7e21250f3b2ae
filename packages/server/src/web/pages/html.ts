const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** A minimal page for a visitor not signed in (sign-in, device approval); the dashboard has its own layout. */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>${escapeHtml(title)} · kiln</title>
<link rel="icon" href="/assets/favicon/kiln.svg" type="image/svg+xml">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#1d1d1f;overflow-wrap:anywhere}
code,.code{font-family:ui-monospace,monospace;background:#f2f2f2;padding:.1rem .3rem;border-radius:4px}
.code{font-size:1.6rem;letter-spacing:.15em}button{font:inherit;padding:.4rem 1rem}
@media (prefers-color-scheme:dark){body{background:#141518;color:#e4e4e7}a{color:#8ab4f8}code,.code{background:#26272c}}</style></head>
<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
}
