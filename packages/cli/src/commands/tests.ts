import { REPOSITORY_PATTERN, type ResponseDocumentOf, TEST_HISTORY_SORTS, TEST_HISTORY_WINDOW } from "@kiln/contract";
import type { Command } from "commander";
import { gitFacts } from "../archive/workspace.js";
import { ConfigError } from "../config.js";
import { CliExit, connect, EXIT, out, printJson, runCommand, table } from "../output.js";

type TestHistoryPage = ResponseDocumentOf<"repositories.tests">;
type TestHistory = TestHistoryPage["tests"][number];
type Sort = (typeof TEST_HISTORY_SORTS)[number];

interface TestsOptions {
  json?: boolean;
  window?: string;
  sort?: string;
  limit?: string;
  cursor?: string;
}

const REPOSITORY = new RegExp(REPOSITORY_PATTERN);
/** Tests per section of the overview. */
const OVERVIEW_ROWS = 10;

const ms = (value: number | null) =>
  value === null ? "-" : value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${value} ms`;
const percent = (rate: number) => `${Math.round(rate * 100)}%`;
const trendOf = (t: TestHistory) =>
  t.trend.ratio === null ? t.trend.direction : `${t.trend.direction} (×${t.trend.ratio.toFixed(2)})`;
/** The outcomes of its runs, oldest to newest, one letter each: P passed, F failed, f flaky, i ignored. */
const outcomes = (t: TestHistory) =>
  [...t.recent]
    .reverse()
    .map((r) => ({ passed: "P", failed: "F", flaky: "f", ignored: "i" })[r.outcome])
    .join("");

/** The repository asked for, else the configuration's, else the git remote of the current directory. */
function repositoryOf(argument: string | undefined): string {
  const repository = argument ?? connect().environment.config.repository ?? gitFacts(process.cwd()).repository;
  if (repository === undefined) {
    throw new ConfigError(
      "which repository? name it (kiln tests owner/name), set `repository` in the config file, or run in a git checkout with a remote origin",
    );
  }
  if (!REPOSITORY.test(repository)) {
    throw new CliExit(EXIT.error, `a repository is owner/name, e.g. acme/widget; got ${JSON.stringify(repository)}`);
  }
  return repository;
}

function integerOption(name: string, value: string | undefined, maximum: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > maximum) {
    throw new CliExit(EXIT.error, `--${name} must be a whole number from 1 to ${maximum}, got ${value}`);
  }
  return n;
}

function section(title: string, tests: readonly TestHistory[], empty: string): void {
  out("");
  out(title);
  if (tests.length === 0) {
    out(`  ${empty}`);
    return;
  }
  out(
    table(
      ["TEST", "RUNS", "FLAKY", "P50", "P90", "TREND", "OUTCOMES (OLD→NEW)"],
      tests.map((t) => [
        `${t.target}: ${t.name}`,
        String(t.runs),
        t.flaky === 0 ? "-" : `${t.flaky} (${percent(t.flaky_rate)})`,
        ms(t.duration_ms.p50),
        ms(t.duration_ms.p90),
        trendOf(t),
        outcomes(t),
      ]),
    ),
  );
}

/**
 * `kiln tests [owner/name]`: the repository's test history (repositories.tests, a kiln extension).
 * Without --sort, three sections: the flakiest, the newly failing and the slowest tests over the
 * window; with --sort, one page of that order (--cursor continues it).
 */
async function tests(argument: string | undefined, options: TestsOptions): Promise<void> {
  const repository = repositoryOf(argument);
  const [owner = "", name = ""] = repository.split("/");
  const window = integerOption("window", options.window, TEST_HISTORY_WINDOW.maximum);
  const limit = integerOption("limit", options.limit, 1000);
  if (options.sort !== undefined && !(TEST_HISTORY_SORTS as readonly string[]).includes(options.sort)) {
    throw new CliExit(EXIT.error, `--sort is one of ${TEST_HISTORY_SORTS.join(", ")}; got ${options.sort}`);
  }
  const { client } = connect();
  const read = (sort: Sort, rows: number | undefined, cursor?: string) =>
    client.call("repositories.tests", {
      params: { owner, name },
      query: {
        sort,
        ...(window === undefined ? {} : { window }),
        ...(rows === undefined ? {} : { limit: rows }),
        ...(cursor === undefined ? {} : { cursor }),
      },
    });
  if (options.sort !== undefined) {
    const page = await read(options.sort as Sort, limit, options.cursor);
    if (options.json) {
      printJson(page);
      return;
    }
    out(`${repository}: tests over the last ${page.window.jobs} test jobs, by ${page.sort}`);
    section(page.sort, page.tests, "none");
    if (page.next_cursor !== null)
      out(`more: kiln tests ${repository} --sort ${page.sort} --cursor ${page.next_cursor}`);
    return;
  }
  const rows = limit ?? OVERVIEW_ROWS;
  const [flakiest, failing, slowest] = await Promise.all([
    read("flakiest", rows),
    read("newly_failing", rows),
    read("slowest", rows),
  ]);
  if (options.json) {
    printJson({ flakiest, newly_failing: failing, slowest });
    return;
  }
  if (slowest.window.jobs === 0) {
    out(`${repository}: no test jobs yet (kiln cargo test records each job's tests here)`);
    return;
  }
  out(
    `${repository}: tests over the last ${slowest.window.jobs} test jobs (${slowest.window.from} to ${slowest.window.to})`,
  );
  section("flakiest (failed, then passed on a re-run)", flakiest.tests, "no flaky tests");
  section("newly failing (the latest run failed after passing)", failing.tests, "nothing newly failing");
  section("slowest (by mean duration)", slowest.tests, "no measured durations");
}

export function registerTestsCommand(program: Command): void {
  program
    .command("tests")
    .description("a repository's test history: the flakiest, the newly failing and the slowest tests")
    .argument("[owner/name]", "the repository (default: the config's, else the git remote origin's)")
    .option(
      "--window <jobs>",
      `the most recent test jobs to read (1-${TEST_HISTORY_WINDOW.maximum}, default ${TEST_HISTORY_WINDOW.default})`,
    )
    .option("--sort <order>", `one page in one order: ${TEST_HISTORY_SORTS.join(", ")}`)
    .option("--limit <n>", "tests per section or page")
    .option("--cursor <cursor>", "continue a --sort page")
    .option("--json", "print the TestHistoryPage documents")
    .action((repository: string | undefined, options: TestsOptions) =>
      runCommand(options.json === true, () => tests(repository, options)),
    );
}
