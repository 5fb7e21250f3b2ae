/**
 * What the tenant dashboard and the operator console look like in common: type, the header bar,
 * tables, badges, facts and notices. Each layout appends its own rules (the operator's header is
 * a different colour, so a person never mistakes one console for the other).
 */
export const BASE_STYLE = `*{box-sizing:border-box}body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{display:flex;align-items:center;gap:1.5rem;padding:.6rem 1.5rem;background:#1d1d1f;color:#fff}
header a{color:#fff;text-decoration:none}header nav{display:flex;gap:1rem;flex-wrap:wrap}header .brand{font-weight:700;font-size:1.1rem}
header .who{margin-left:auto;display:flex;gap:.8rem;align-items:center;font-size:.9rem;color:#ccc}
header form{margin:0}header button{font:inherit;font-size:.85rem;padding:.2rem .7rem;cursor:pointer}
main{max-width:76rem;margin:1.5rem auto;padding:0 1.5rem}h1{font-size:1.5rem;margin:.2rem 0 1rem}
h2{font-size:1.15rem;margin:1.8rem 0 .6rem}a{color:#0645ad}
table{border-collapse:collapse;width:100%;background:#fff;font-size:.92rem}
th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid #e5e5e5;vertical-align:top}
th{background:#f0f0f0;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88em}
.status{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-size:.8rem;font-weight:600;background:#e5e5e5}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0}dl.facts dt{color:#555}dl.facts dd{margin:0}
.notice{background:#fff8e1;border:1px solid #f0dca0;padding:.6rem .8rem;border-radius:6px}.muted{color:#666}
header nav a[aria-current="page"]{font-weight:700;text-decoration:underline;text-underline-offset:.35rem;text-decoration-thickness:2px}
main{overflow-wrap:break-word}input,select,textarea{max-width:100%}dl.facts dd{min-width:0;overflow-wrap:anywhere}
@media (max-width:48rem){header{flex-wrap:wrap;gap:.3rem 1rem;padding:.5rem .8rem}header nav{gap:.3rem .8rem}
header .who{margin-left:0;flex-wrap:wrap}main{padding:0 .7rem;margin-top:1rem}main p,main li,main dd{overflow-wrap:anywhere}
table{display:block;overflow-x:auto}}
@media (prefers-color-scheme:dark){body{background:#141518;color:#e4e4e7}a{color:#8ab4f8}
table{background:#1c1d21}th{background:#26272c}th,td{border-bottom-color:#33343a}dl.facts dt,.muted{color:#a1a1aa}
.status{background:#33343a;color:#e4e4e7}.notice{background:#2e2913;border-color:#5e5120;color:#f0e6c0}
input,select,textarea,button{background:#1c1d21;color:#e4e4e7;border:1px solid #45464d}}
`;
