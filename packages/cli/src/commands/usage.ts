import type { Command } from "commander";
import { CliExit, connect, EXIT, out, printJson, runCommand, table } from "../output.js";

interface UsageOptions {
  period?: string;
  json?: boolean;
}

const PERIOD = /^[0-9]{4}-(0[1-9]|1[0-2])$/;

const cents = (amount: number | null) => (amount === null ? "-" : `$${(amount / 100).toFixed(2)}`);
const bytes = (n: number) =>
  n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(2)} GiB` : n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${n} B`;

/** `kiln usage`: usage.report as a table per day and per repository, with the period's totals. */
async function usage(options: UsageOptions): Promise<void> {
  if (options.period !== undefined && !PERIOD.test(options.period)) {
    throw new CliExit(EXIT.error, `--period must be a calendar month YYYY-MM, got ${options.period}`);
  }
  const { client } = connect();
  const report = await client.call("usage.report", {
    query: options.period === undefined ? {} : { period: options.period },
  });
  if (options.json) {
    printJson(report);
    return;
  }
  const headers = ["VCPU-SECONDS", "JOBS", "ATTEMPTS", "UPLOADED", "AMOUNT"];
  const measures = (m: Omit<(typeof report.days)[number], "date">) => [
    String(m.vcpu_seconds),
    String(m.jobs),
    String(m.attempts),
    bytes(m.bytes_uploaded),
    cents(m.amount_cents),
  ];
  out(`usage of ${report.tenant} in ${report.period} (as of ${report.as_of})`);
  out("");
  out(
    report.days.length === 0
      ? "no usage this period"
      : table(
          ["DAY", ...headers],
          report.days.map((d) => [d.date, ...measures(d)]),
        ),
  );
  if (report.repositories.length > 0) {
    out("");
    out(
      table(
        ["REPOSITORY", ...headers],
        report.repositories.map((r) => [r.repository, ...measures(r)]),
      ),
    );
  }
  const t = report.totals;
  out("");
  const sizes = t.vcpu_seconds_by_size.map((s) => `${s.size} ${s.vcpu_seconds}`).join(", ");
  out(
    `total: ${t.vcpu_seconds} vCPU-seconds charged (${t.vcpu_seconds - t.adjustment_vcpu_seconds} metered` +
      `${sizes === "" ? "" : `: ${sizes}`}; ${t.adjustment_vcpu_seconds} adjusted), ${t.jobs} jobs, ` +
      `${t.attempts} attempts, ${bytes(t.bytes_uploaded)} uploaded`,
  );
  out(
    report.rate_card === null
      ? "no rate card is set: usage is not priced"
      : `amount: ${cents(t.amount_cents)} (adjustments ${cents(t.adjustment_amount_cents)})`,
  );
  out(
    t.storage_byte_hours === null
      ? "lineage storage: not measured"
      : `lineage storage: ${(t.storage_byte_hours / 2 ** 30).toFixed(2)} GiB-hours (${t.storage_byte_hours} byte-hours)`,
  );
}

export function registerUsageCommand(program: Command): void {
  program
    .command("usage")
    .description("the tenant's usage of a month per day and repository, priced where a rate card is set")
    .option("--period <YYYY-MM>", "the calendar month (UTC); default the current one")
    .option("--json", "print the service's Usage document instead of text")
    .action((options: UsageOptions) => runCommand(options.json === true, () => usage(options)));
}
