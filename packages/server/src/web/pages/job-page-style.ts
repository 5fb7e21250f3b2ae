/**
 * The job page's own rules, appended to the dashboard's style: the log viewer (lines, folds,
 * search hits, the timestamps toggle) and the running job's live panel.
 */
/**
 * The log viewer. The timestamps toggle is a checkbox just before the log (`~`, not `:has()`:
 * with `:has()` each followed chunk re-checked the whole section; the longest main-thread task
 * of bench/dashboard-log.mjs went from 53 ms to over 1 s).
 */
export const LOG_VIEW_STYLE = `div.log{background:#111;color:#ddd;padding:.8rem;overflow:auto;max-height:32rem;font:.82rem/1.35 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre;margin:0}
div.log .line{display:block}div.log .stderr{color:#f7b1b1}div.log .system{color:#9cc9ff}
div.log .seq{color:#777;user-select:none;text-decoration:none}div.log .seq:hover{color:#ddd;text-decoration:underline}
div.log .ts{display:none;color:#8a8a8a;user-select:none}#log-times:checked~#log-lines .ts{display:inline}
div.log .line.found,div.log .line:target{outline:2px solid #e5c15c;background:#2a2614}div.log .hit mark,code.log-excerpt mark{background:#e5c15c;color:#111}
div.log .chunk{display:block;content-visibility:auto}div.log details{margin:0}div.log summary{cursor:pointer;list-style-position:inside}
div.log summary .line{display:inline}div.log .fold-kiln>summary{color:#9cc9ff}div.log .fold-verdict{color:#8a8a8a;margin-left:1.5rem}
div.log .fold-failed>summary .fold-verdict{color:#ff8f8f}
.log-toolbar{display:flex;flex-wrap:wrap;gap:.6rem 1rem;align-items:center;margin:0 0 .6rem}.log-toolbar form{display:flex;gap:.3rem;margin:0}
.log-toolbar input[type=search]{font:inherit;padding:.2rem .4rem;width:16rem;max-width:60vw}.log-toolbar button{font:inherit;padding:.2rem .7rem}
#log-search ol{margin:.3rem 0 .8rem;padding-left:1.4rem;max-height:14rem;overflow:auto}#log-search li{margin:.15rem 0}
code.log-excerpt{white-space:pre-wrap;word-break:break-all}.log-pages{display:flex;gap:1rem}`;

/** The running job's live panel. */
export const LIVE_VIEW_STYLE = `.live{background:#fff;border:1px solid #d6e6ff;border-radius:6px;padding:.5rem .9rem;margin:.8rem 0}
.live p{margin:.25rem 0}.live-tests{margin:.2rem 0;padding-left:1.3rem;max-height:10rem;overflow:auto}
.live-tests .binary-ok::marker{color:#135c25}.live-tests .binary-failed{color:#8a1111}#live-elapsed{font-variant-numeric:tabular-nums;font-weight:600}`;
