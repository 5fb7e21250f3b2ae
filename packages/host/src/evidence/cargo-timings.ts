import { TIMELINE_UNITS_LIMIT, type TimelineItem, type TimelineUnit } from "@kiln/contract";

/**
 * Cargo's `--timings` HTML report, summarised (issue 37 item 5): the units it timed (start and
 * duration, from the report's embedded `UNIT_DATA`), the wall time, and the critical path —
 * the chain that ends with the unit that finished last, each unit on it started by the one
 * before it (`unblocked_units` / `unblocked_rmeta_units` name, for each unit, the units that
 * could start when it finished or had its metadata; older cargo says `unlocked_…`). It is
 * the path cargo's own report draws for that unit when its dependency lines are shown.
 */

interface UnitData {
  readonly i: number;
  readonly name: string;
  readonly version: string;
  readonly target: string;
  readonly start: number;
  readonly duration: number;
  readonly unblocked_units?: readonly number[];
  readonly unblocked_rmeta_units?: readonly number[];
  readonly unlocked_units?: readonly number[];
  readonly unlocked_rmeta_units?: readonly number[];
}

/** `""` is a library; `" (test)"`, `" mid \"lib\" (doc test)"`, `" build-script (run)"`, `" bin \"app\""` as cargo names them. */
function targetOf(raw: string): string {
  const text = raw.trim();
  const kind = /\(([^)]*)\)$/.exec(text)?.[1];
  if (/build[- ]script/.test(text)) return kind === "run" ? "build-script-run" : "build-script";
  if (kind !== undefined) return kind;
  return text === "" ? "lib" : (text.split(" ")[0] ?? "lib");
}

const ms = (seconds: number) => Math.max(0, Math.round(seconds * 1000));

/** The report's units, or null when it carries no UNIT_DATA cargo's way. */
function unitData(html: string): UnitData[] | null {
  const start = html.indexOf("const UNIT_DATA = ");
  if (start < 0) return null;
  const open = html.indexOf("[", start);
  const close = html.indexOf("\n];", open);
  if (open < 0 || close < 0) return null;
  try {
    const parsed: unknown = JSON.parse(html.slice(open, close + 2));
    return Array.isArray(parsed) ? (parsed as UnitData[]) : null;
  } catch {
    return null;
  }
}

/** "Total time: 12.3s" or "1m 5.2s" in the report's summary table, in ms; null when absent. */
function totalTime(html: string): number | null {
  const found = /<td>Total time:<\/td><td>(?:(\d+)m\s*)?([\d.]+)s/.exec(html);
  if (found === null) return null;
  return ms(Number(found[1] ?? 0) * 60 + Number(found[2]));
}

/** The timeline of a cargo `--timings` report; null when the report cannot be read. */
export function summariseCargoTimings(html: string, artifact: string): TimelineItem | null {
  const data = unitData(html);
  if (data === null) return null;
  const unit = (u: UnitData): TimelineUnit => ({
    name: u.name,
    version: u.version,
    target: targetOf(u.target),
    start_ms: ms(u.start),
    duration_ms: ms(u.duration),
  });
  const byIndex = new Map(data.map((u) => [u.i, u]));
  const startedBy = new Map<number, number>();
  for (const u of data) {
    for (const next of [
      ...(u.unblocked_units ?? u.unlocked_units ?? []),
      ...(u.unblocked_rmeta_units ?? u.unlocked_rmeta_units ?? []),
    ]) {
      startedBy.set(next, u.i);
    }
  }
  const end = (u: UnitData) => u.start + u.duration;
  const last = data.reduce<UnitData | null>((a, u) => (a === null || end(u) > end(a) ? u : a), null);
  const path: UnitData[] = [];
  for (let at = last; at !== null && at !== undefined && path.length <= data.length; ) {
    path.unshift(at);
    const before = startedBy.get(at.i);
    at = before === undefined ? null : (byIndex.get(before) ?? null);
  }
  const wall = totalTime(html) ?? (last === null ? 0 : ms(end(last)));
  const first = path[0];
  const pathMs = first === undefined || last === null ? 0 : ms(end(last) - first.start);
  const units = [...data].sort((a, b) => a.start - b.start || a.i - b.i);
  return {
    wall_ms: wall,
    artifact,
    critical_path_ms: pathMs,
    critical_path_share: wall === 0 ? 0 : Math.min(1, pathMs / wall),
    critical_path: path.map(unit),
    units: units.slice(0, TIMELINE_UNITS_LIMIT).map(unit),
  };
}
