// The test files' wall times, for scripts/run-tests.mjs: what each file took in the last run
// that ran it (kept in .kiln-test/test-timings.json, which CI keeps with the workspace), the
// order that starts the slowest files first, and the ten slowest printed at the end of a run.
//
// A file's wall time is its own process's, from spawn to exit, as node's test runner reports it
// (the file-level `test:complete` event), and a file run in a process of its own also has the CPU
// that process spent with what it started (scripts/test-file-cpu.mjs). No verdict depends on
// either: they order the files and are shown to people.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, relative } from "node:path";

/**
 * What a file needs, from its name: `*.sandbox.test.ts` real cargo, bubblewrap or rustup;
 * `*.process.test.ts` kiln-server or kiln-host processes; `*.browser.test.ts` chromium. A file
 * without a mark is pure or in-process (both engines, the in-memory executor where a host is
 * needed): what `npm run test:fast` runs.
 */
export const MARKS = ["sandbox", "process", "browser"];

/** @param {string} file @returns {"sandbox" | "process" | "browser" | "in-process"} */
export function markOf(file) {
  const mark = /\.(\w+)\.test\.[jt]s$/.exec(file)?.[1];
  return MARKS.includes(mark) ? mark : "in-process";
}

/** The source a built test file comes from, relative to the root: how files are named in the timings. */
export function sourceOf(root, builtFile) {
  return relative(root, builtFile).replace("/dist/test/", "/test/").replace(/\.js$/, ".ts");
}

/** @returns {Record<string, { seconds: number, passed: boolean, at: string }>} */
export function readTimings(path) {
  if (!existsSync(path)) return {};
  try {
    return JSON.parse(readFileSync(path, "utf8")).files ?? {};
  } catch {
    // A damaged file only costs the order of one run; the run writes it whole again.
    return {};
  }
}

/**
 * The files in the order to start them, so that two at a time finish together rather than one
 * slow file running alone at the end: files with no recorded time first (a new file may be
 * slow), by mark (sandbox, process, browser, then the rest), then the others by their last
 * recorded time, longest first.
 * @param {string[]} files built test files
 * @param {(file: string) => string} nameOf the name a file has in `timings`
 */
export function slowestFirst(files, timings, nameOf) {
  const rank = (file) => {
    const mark = markOf(file);
    return mark === "in-process" ? MARKS.length : MARKS.indexOf(mark);
  };
  const recorded = (file) => timings[nameOf(file)]?.seconds;
  return [...files].sort((a, b) => {
    const [ta, tb] = [recorded(a), recorded(b)];
    if (ta === undefined || tb === undefined) {
      if (ta !== tb) return ta === undefined ? -1 : 1;
      return rank(a) - rank(b) || a.localeCompare(b);
    }
    return tb - ta || a.localeCompare(b);
  });
}

/**
 * Writes this run's times over the last ones (files this run left out keep theirs; files that
 * no longer exist are dropped), longest first.
 * @param {Map<string, { seconds: number, passed: boolean }>} measured by name
 * @param {Set<string>} existing the names of every test file there is now
 */
export function recordTimings(path, previous, measured, existing, at) {
  const files = {};
  for (const [name, timing] of Object.entries(previous)) if (existing.has(name)) files[name] = timing;
  for (const [name, timing] of measured) files[name] = { ...timing, at };
  const sorted = Object.fromEntries(Object.entries(files).sort(([, a], [, b]) => b.seconds - a.seconds));
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify({ files: sorted }, null, 2)}\n`);
}

/** The lines that name this run's ten slowest files, longest first. */
export function slowestLines(measured, count = 10) {
  const slowest = [...measured].sort(([, a], [, b]) => b.seconds - a.seconds).slice(0, count);
  return slowest.map(
    ([name, { seconds, passed }]) => `${seconds.toFixed(1).padStart(7)} s  ${name}${passed ? "" : "  (failed)"}`,
  );
}

/**
 * What scripts/test-file-cpu.mjs appended to `path`: each file's CPU-seconds, with what its
 * process started, by built file (empty when nothing was appended).
 * @returns {Map<string, number>}
 */
export function readFileCpu(path) {
  const cpu = new Map();
  if (!existsSync(path)) return cpu;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    const { file, cpuSeconds } = JSON.parse(line);
    cpu.set(file, cpuSeconds);
  }
  return cpu;
}

/** The lines that name this run's ten costliest files by CPU (those measured), costliest first. */
export function costliestLines(measured, count = 10) {
  const costliest = [...measured]
    .filter(([, timing]) => timing.cpuSeconds !== undefined)
    .sort(([, a], [, b]) => b.cpuSeconds - a.cpuSeconds)
    .slice(0, count);
  return costliest.map(
    ([name, { cpuSeconds, seconds }]) =>
      `${cpuSeconds.toFixed(1).padStart(7)} CPU-s  ${name}  (${seconds.toFixed(1)} s)`,
  );
}
