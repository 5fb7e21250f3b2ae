// Issue 21's fixed-cost timeline as a table: where a warm run's and an edited run's time goes,
// span by span, for every crate of a bench that compares kiln with bare cargo.
import { fmt, table } from "./output.mjs";

/**
 * One row a span, two columns a crate (its warm and its edit runs): the `median` of that span
 * (ms) over the crate's runs. `results` maps a crate to its runs (`kilnWarm`, `kilnEdit`), each
 * with a `timeline` of span → ms; the spans are the first warm run's.
 */
export function timelineTable(results, median) {
  const spans = Object.keys(Object.values(results)[0]?.kilnWarm[0]?.timeline ?? {});
  return table(
    ["span (ms, median)", ...Object.keys(results).flatMap((name) => [`${name} warm`, `${name} edit`])],
    spans.map((span) => [
      span,
      ...Object.values(results).flatMap((r) =>
        [r.kilnWarm, r.kilnEdit].map((runs) => fmt(median(runs.map((x) => x.timeline[span])), 0)),
      ),
    ]),
  );
}
