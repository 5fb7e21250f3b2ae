import { randomUUID } from "node:crypto";
import { type JOB_STATUSES, jobPagePath, TERMINAL_JOB_STATUSES } from "@kiln/contract";
import type { Command } from "commander";
import {
  describeCounts,
  describeFailures,
  describeFlaky,
  downloadArtifacts,
  exitCodeOf,
  followLogs,
  type LogRecord,
  lastAttemptFailures,
  printRecord,
  readLogs,
  testSummary,
} from "../job-output.js";
import { browserCommand, openInBrowser } from "../open-in-browser.js";
import { connect, err, out, printJson, printJsonLine, runCommand, table } from "../output.js";

type JobStatus = (typeof JOB_STATUSES)[number];

interface JsonOption {
  json?: boolean;
}

const when = (at: string | null | undefined) => (at ? at.replace("T", " ").replace(/\.\d+Z$/, "Z") : "-");

async function list(options: JsonOption & { repository?: string; status?: string; limit?: string; cursor?: string }) {
  const { client } = connect();
  const page = await client.call("jobs.list", {
    query: {
      ...(options.repository === undefined ? {} : { repository: options.repository }),
      ...(options.status === undefined ? {} : { status: options.status as JobStatus }),
      ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
      limit: Number(options.limit ?? 20),
    },
  });
  if (options.json) return printJson(page);
  out(
    table(
      ["JOB", "STATUS", "REPOSITORY", "BRANCH", "ACCEPTED", "DESCRIPTION"],
      page.jobs.map((j) => [j.id, j.status, j.repo, j.branch, when(j.accepted_at), j.description]),
    ),
  );
  const s = page.summary;
  out(`\n${page.total} jobs: ${s.queued} queued, ${s.running} running, ${s.passed} passed, ${s.failed} failed`);
  if (page.next_cursor !== null) out(`more: kiln jobs list --cursor ${page.next_cursor}`);
}

async function get(id: string, options: JsonOption) {
  const { environment, client } = connect();
  const job = await client.call("jobs.get", { params: { id } });
  if (options.json) return printJson(job);
  out(`job        ${job.id}`);
  out(`page       ${environment.endpoint}${jobPagePath(job.id)}`);
  out(`status     ${job.status}${job.failure ? ` (${job.failure.cause}: ${job.failure.detail})` : ""}`);
  out(`repository ${job.repo} @ ${job.branch}${job.sha_short ? ` ${job.sha_short}` : ""}`);
  out(`command    ${job.description}`);
  out(`accepted   ${when(job.accepted_at)}   started ${when(job.started_at)}   finished ${when(job.finished_at)}`);
  if (job.retry_of) out(`retry of   ${job.retry_of}`);
  if (job.queue_annotation) out(`queued     ${job.queue_annotation}`);
  for (const t of job.transitions) out(`  ${when(t.at)}  ${t.from ?? "-"} → ${t.to}  ${t.reason}`);
}

async function logs(id: string, options: JsonOption & { follow?: boolean }) {
  const { client } = connect();
  const print = options.json ? (r: unknown) => printJsonLine(r) : (r: LogRecord) => printRecord(r);
  if (options.follow) await followLogs(client, id, print);
  else for (const record of await readLogs(client, id)) print(record);
}

async function evidence(id: string, options: JsonOption) {
  const { client } = connect();
  const doc = await client.call("jobs.evidence", { params: { id } });
  if (options.json) return printJson(doc);
  const job = doc.job;
  out(`job ${job.id}: ${job.status}${job.failure ? ` (${job.failure.cause}: ${job.failure.detail})` : ""}`);
  const phases = doc.report.phases.map(
    (p) => `${p.name} ${p.status}${p.duration_ms === null ? "" : ` ${p.duration_ms} ms`}`,
  );
  if (phases.length > 0) out(`phases: ${phases.join(", ")}`);
  const caches = doc.report.caches.map((c) => `${c.outcome}${c.reason ? ` (${c.reason})` : ""}`);
  if (caches.length > 0) out(`cache: ${caches.join(", ")}`);
  const summary = testSummary(doc);
  for (const [target, counts] of Object.entries(summary.byTarget)) out(`tests ${target}: ${describeCounts(counts)}`);
  if (Object.keys(summary.byTarget).length > 0) out(`tests total: ${describeCounts(summary.total)}`);
  for (const name of summary.failed) out(`  failed: ${name}`);
  for (const line of describeFlaky(summary.flaky)) out(line);
  const failures = lastAttemptFailures(doc);
  if (failures.length > 0) out("what failed:");
  for (const line of describeFailures(failures)) out(`  ${line}`);
  if (doc.usage) out(`usage: ${doc.usage.seconds} s on ${doc.usage.size} (${doc.usage.vcpu_seconds} vCPU-s)`);
  if (TERMINAL_JOB_STATUSES.has(job.status)) out(`exit code: ${exitCodeOf(job, doc)}`);
}

/** The job's page: printed always, and shown in a browser where there is one (never an error where not). */
async function open(id: string, options: JsonOption & { browser?: boolean }) {
  const { environment, client } = connect();
  const job = await client.call("jobs.get", { params: { id } });
  const url = `${environment.endpoint}${jobPagePath(job.id)}`;
  const command = options.browser === false ? null : browserCommand(url);
  const opened = command !== null && (await openInBrowser(command));
  if (options.json) return printJson({ job: job.id, url, opened });
  out(url);
  if (opened) err(`opened in the browser (${command?.[0]})`);
}

async function cancel(id: string, options: JsonOption) {
  const { client } = connect();
  const receipt = await client.call("jobs.cancel", { params: { id }, idempotencyKey: `cancel-${id}` });
  if (options.json) return printJson(receipt);
  out(`cancellation requested for ${receipt.job} by ${receipt.requested_by}`);
}

async function retry(id: string, options: JsonOption) {
  const { client } = connect();
  const receipt = await client.call("jobs.retry", { params: { id }, idempotencyKey: `retry-${id}-${randomUUID()}` });
  if (options.json) return printJson(receipt);
  out(`retrying ${receipt.original} as ${receipt.retry}`);
}

async function artifacts(id: string, options: JsonOption & { download?: string }) {
  const { client } = connect();
  if (options.download !== undefined) {
    const saved = await downloadArtifacts(client, id, options.download);
    if (options.json) return printJson({ job: id, directory: options.download, files: saved });
    if (saved.length === 0) out(`job ${id} published no artifacts`);
    for (const f of saved) out(`${f.file}  ${f.bytes} bytes  sha256 ${f.sha256}`);
    return;
  }
  const inventory = await client.call("jobs.artifacts", { params: { id } });
  if (options.json) return printJson(inventory);
  const rows: string[][] = [];
  for (const p of inventory.publications) {
    for (const f of p.files) rows.push([String(p.attempt), String(f.index), String(f.bytes), f.path]);
  }
  if (rows.length === 0) return out(`job ${id} published no artifacts`);
  out(table(["ATTEMPT", "INDEX", "BYTES", "PATH"], rows));
  out(`\nexpires ${when(inventory.expires_at)}; download: kiln jobs artifacts ${id} --download DIR`);
}

export function registerJobsCommands(program: Command): void {
  const jobs = program.command("jobs").description("list, inspect, follow, cancel and retry jobs");
  const json = (c: Command) => c.option("--json", "print the service's JSON document instead of text");
  const wrap =
    <A extends unknown[]>(body: (...args: A) => Promise<unknown>) =>
    (...args: A) => {
      const options = args.find((a): a is JsonOption => typeof a === "object" && a !== null && !Array.isArray(a));
      return runCommand(options?.json === true, async () => {
        await body(...args);
      });
    };
  json(
    jobs
      .command("list")
      .description("the tenant's jobs, newest first (a table; --json: the JobsPage)")
      .option("--repository <owner/name>", "only this repository's jobs")
      .option("--status <status>", "only jobs with this status")
      .option("--limit <n>", "page size, 1 to 1000", "20")
      .option("--cursor <cursor>", "continue from a previous page"),
  ).action(wrap(list));
  json(jobs.command("get").description("one job's status and transitions").argument("<job>")).action(wrap(get));
  json(
    jobs
      .command("logs")
      .description("a job's log (--follow streams it until the job settles; --json: one JSON line per record)")
      .argument("<job>")
      .option("-f, --follow", "stream new records until the log settles"),
  ).action(wrap(logs));
  json(jobs.command("evidence").description("phases, caches, test results and usage").argument("<job>")).action(
    wrap(evidence),
  );
  json(
    jobs
      .command("open")
      .description("print a job's page in the dashboard and open it in a browser where there is one")
      .argument("<job>")
      .option("--no-browser", "only print the page's URL"),
  ).action(wrap(open));
  json(jobs.command("cancel").description("request cancellation of a job").argument("<job>")).action(wrap(cancel));
  json(jobs.command("retry").description("submit a fresh job retrying a terminal one").argument("<job>")).action(
    wrap(retry),
  );
  json(
    jobs
      .command("artifacts")
      .description("a job's published artifacts (--download DIR saves them, verifying their SHA-256)")
      .argument("<job>")
      .option("--download <dir>", "save the last publication's files under this directory"),
  ).action(wrap(artifacts));
}
