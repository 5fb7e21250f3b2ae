/**
 * T6 settlement under kill -9 of the server and the host, over 50 jobs.
 *
 * PostgreSQL (the scale-out engine, where a server and a host are separate processes). A real
 * `kiln-server serve` (no local host) on a fixed loopback port, and a real remote `kiln-host`
 * (the package's bin: the sandbox executor, real cargo, its own certificate) speaking the host
 * protocol to its host listener over mutual TLS.
 * One tenant submits KILN_T6_JOBS (50) jobs of a small real crate — `cargo test` and `cargo
 * build` — and cancels a few at seeded moments (queued ones, and running ones). At KILN_T6_KILLS
 * (6) seeded points of the run (after a seeded number of jobs ended, once some job is running,
 * after a seeded 0–4 s) the server, the host or both are sent SIGKILL and started again on the
 * same database, data directories and port. When every job has ended, the trial reads the
 * jobs, attempts, transitions and events back and asks the server for usage.report and every
 * page of usage.export for the month.
 *
 * Broken: a job not ended exactly once (other than one terminal transition, one terminal job
 * event, a settlement naming its status); an attempt still running; a metering record missing
 * for a settled attempt, or two for one (duplicate settlement rows), or one for an attempt that
 * never ran; a record's vCPU-seconds other than the metering rule applied to the attempt's own
 * times (vCPUs × whole seconds from its start to its end, or to the cancellation request); an
 * attempt the platform ended (lost when its host was killed, or failed with cause
 * infrastructure) without an `infrastructure` adjustment crediting its record in full, or such a
 * credit for any other attempt; a job cancelled before placement without its zero adjustment;
 * the export's totals other than the report's, or other than its records plus adjustments.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { HEALTH_REPORTED_MESSAGE } from "@kiln/host";
import { onboardRepository, openStorage } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { mintHostEnrollmentToken } from "../src/domain/hosts/host-identities.js";
import { personWithToken } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { type ServerProcess, startServerProcess, stopServerProcess } from "../test/server-process.js";
import { REPOSITORY } from "./fixtures.js";
import { SeededRandom, trialSeed } from "./seeded-random.js";
import { count, runTrial } from "./trial.js";

const JOBS = Number(process.env.KILN_T6_JOBS ?? 50);
const KILLS = Number(process.env.KILN_T6_KILLS ?? 6);
const SEED = trialSeed("T6", 6);
const KILN_HOST_BIN = fileURLToPath(new URL("../../../host/dist/src/remote/main.js", import.meta.url));
/** Only so a hung run ends with "did not run" rather than never; never a verdict. */
const GIVE_UP_MS = 60 * 60 * 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject()));
    });
  });
}

/** The kiln-host process: started, killed with SIGKILL, started again; ready once it reported health. */
class HostProcess {
  child: ChildProcess | undefined;
  output = "";
  constructor(private readonly env: NodeJS.ProcessEnv) {}

  /** Starts it and resolves once it reported its health (it exits when the server is down: then again). */
  async start(): Promise<void> {
    for (;;) {
      const child = spawn(process.execPath, [KILN_HOST_BIN], { env: this.env, stdio: ["ignore", "pipe", "pipe"] });
      this.child = child;
      const ready = await new Promise<boolean>((resolve) => {
        const look = (chunk: Buffer) => {
          this.output = (this.output + chunk.toString("utf8")).slice(-20_000);
          if (new RegExp(HEALTH_REPORTED_MESSAGE).test(this.output)) resolve(true);
        };
        child.stdout?.on("data", look);
        child.stderr?.on("data", look);
        child.once("exit", () => resolve(false));
      });
      if (ready) {
        this.output = "";
        return;
      }
      await sleep(500);
    }
  }

  kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 30_000).unref();
    });
  }
}

interface ExportRecord {
  job: string;
  attempt: number;
  vcpus: number;
  vcpu_seconds: number;
  started_at: string;
  ended_at: string;
  outcome: string;
}
interface ExportAdjustment {
  kind: string;
  job: string | null;
  attempt: number | null;
  vcpu_seconds: number;
}
interface Totals {
  vcpu_seconds: number;
  attempts: number;
  adjustment_vcpu_seconds: number;
}

await runTrial("T6", "settlement under kills", async () => {
  const postgres = DIALECTS.find((d) => d.name === "postgres");
  if (postgres === undefined || postgres.skip !== false)
    throw new Error("T6 needs PostgreSQL (KILN_TEST_POSTGRES_URL)");
  const broken: string[] = [];
  const fail = (what: string) => broken.push(what);
  const random = new SeededRandom(SEED);
  const database = await postgres.createDatabase();
  const databaseUrl = database.options.databaseUrl ?? "";
  const serverDir = mkdtempSync(join(tmpdir(), "kiln-t6-server-"));
  const hostDir = mkdtempSync(join(tmpdir(), "kiln-t6-host-"));
  const storage = await openStorage(database.options);
  const port = await freePort();
  // Remote hosts speak the host protocol over mutual TLS on the host listener (docs/scale-out.md).
  const hostPort = await freePort();
  const serverEnv = {
    KILN_DATABASE_URL: databaseUrl,
    KILN_DATA_DIR: serverDir,
    KILN_LOCAL_HOST: "off",
    KILN_LISTEN: `127.0.0.1:${port}`,
    KILN_HOST_LISTEN: `127.0.0.1:${hostPort}`,
  };
  const origin = `http://127.0.0.1:${port}`;
  let server: ServerProcess | undefined;
  const owner = await personWithToken(storage, { role: "owner", now: new Date() });
  await onboardRepository(storage, { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "t6" }, new Date());
  const { token } = await mintHostEnrollmentToken(storage, { hostId: "t6-host", createdBy: "t6", now: new Date() });
  const host = new HostProcess({
    ...process.env,
    KILN_ENDPOINT: `https://127.0.0.1:${hostPort}`,
    // Enrolls once (its certificate is kept in its data dir and survives its kills).
    KILN_HOST_ENROLLMENT_TOKEN: token,
    KILN_HOST_DATA_DIR: hostDir,
    KILN_HOST_VCPUS: "2",
  });
  const kills = { server: 0, host: 0 };
  let serverDown = false;
  try {
    server = await startServerProcess(serverEnv);
    await host.start();

    /** A request to the server, repeated while a kill has it down (connection refused or cut). */
    const call = async (method: "GET" | "POST", path: string, body?: unknown, key?: string) => {
      for (;;) {
        try {
          const res = await fetch(`${origin}${path}`, {
            method,
            headers: {
              authorization: `Bearer ${owner.token}`,
              ...(key === undefined ? {} : { "idempotency-key": key }),
              ...(body === undefined ? {} : { "content-type": "application/json" }),
            },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          });
          return { status: res.status, body: await res.text() };
        } catch (error) {
          if (!serverDown) throw error;
          await sleep(200);
        }
      }
    };

    // ---- 50 jobs, submitted before any kill (the kills are about settlement, T10 about intake).
    const jobs: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const submitted = await call(
        "POST",
        "/api/v4/jobs",
        inlineSubmission(REPOSITORY, random.next() < 0.7 ? "test" : "build"),
        `t6-job-${i}`,
      );
      if (submitted.status !== 200) throw new Error(`submit ${i}: ${submitted.status} ${submitted.body}`);
      jobs.push(String(JSON.parse(submitted.body)));
    }
    // Cancellations: two queued jobs at once (cancelled before placement), and, at two of the
    // kill points, whichever job is running then.
    const cancelQueued = [jobs[JOBS - 1], jobs[JOBS - 2]].filter((j): j is string => j !== undefined);
    for (const id of cancelQueued) {
      const r = await call("POST", `/api/jobs/${id}/cancel`, undefined, `t6-cancel-${id}`);
      if (r.status !== 200) fail(`cancelling queued ${id} answered ${r.status} ${r.body.slice(0, 160)}`);
    }

    const statuses = async () =>
      storage.db.selectFrom("jobs").select(["id", "status"]).where("tenant_id", "=", owner.tenant).execute();
    const ended = async () => (await statuses()).filter((j) => TERMINAL_JOB_STATUSES.has(j.status)).length;
    const started = Date.now();
    const points = Array.from({ length: KILLS }, () => random.int(2, Math.max(3, JOBS - 6))).sort((a, b) => a - b);
    const plan = points.map((after, i) => ({
      after,
      target: random.pick(["server", "host", "both"] as const),
      delayMs: random.int(0, 4000),
      cancelRunning: i % 3 === 1,
    }));
    for (const step of plan) {
      while ((await ended()) < step.after) {
        if (Date.now() - started > GIVE_UP_MS) throw new Error("the jobs did not end within an hour");
        await sleep(500);
      }
      // Kill while something runs, at a seeded moment of it.
      let running: string | undefined;
      for (;;) {
        running = (await statuses()).find((j) => j.status === "running")?.id;
        if (running !== undefined || (await ended()) === JOBS) break;
        await sleep(200);
      }
      await sleep(step.delayMs);
      if (step.cancelRunning && running !== undefined) {
        await call("POST", `/api/jobs/${running}/cancel`, undefined, `t6-cancel-${running}`);
      }
      if (step.target !== "host") {
        serverDown = true;
        server.child.kill("SIGKILL");
        kills.server += 1;
      }
      if (step.target !== "server") {
        await host.kill();
        kills.host += 1;
      }
      if (step.target !== "host") {
        await stopServerProcess(server, "SIGKILL");
        server = await startServerProcess(serverEnv);
        serverDown = false;
      }
      if (step.target !== "server") await host.start();
    }
    while ((await ended()) < JOBS) {
      if (Date.now() - started > GIVE_UP_MS) throw new Error("the jobs did not end within an hour");
      await sleep(500);
    }

    // ---- the jobs, read back.
    const rows = await storage.db.selectFrom("jobs").selectAll().where("tenant_id", "=", owner.tenant).execute();
    const attempts = await storage.db
      .selectFrom("attempts")
      .selectAll()
      .where(
        "job_id",
        "in",
        rows.map((r) => r.id),
      )
      .execute();
    const transitions = await storage.db
      .selectFrom("job_transitions")
      .select(["job_id", "to_status"])
      .where(
        "job_id",
        "in",
        rows.map((r) => r.id),
      )
      .execute();
    const events = await storage.db
      .selectFrom("job_events")
      .select(["job_id", "status"])
      .where("tenant_id", "=", owner.tenant)
      .execute();
    const outcomes = { passed: 0, failed: 0, cancelled: 0 };
    for (const job of rows) {
      if (job.status in outcomes) outcomes[job.status as keyof typeof outcomes] += 1;
      const terminalMoves = transitions.filter(
        (t) => t.job_id === job.id && TERMINAL_JOB_STATUSES.has(t.to_status),
      ).length;
      const terminalEvents = events.filter((e) => e.job_id === job.id && TERMINAL_JOB_STATUSES.has(e.status)).length;
      const settlement = job.settlement === null ? null : (JSON.parse(job.settlement) as { status?: string });
      if (terminalMoves !== 1 || terminalEvents !== 1 || settlement?.status !== job.status) {
        fail(
          `${job.id} (${job.status}): ${terminalMoves} terminal transitions, ${terminalEvents} terminal events, ` +
            `settlement ${job.settlement}`,
        );
      }
    }
    for (const a of attempts) {
      if (a.state === "running") fail(`${a.job_id} attempt ${a.number} is still running`);
    }

    // ---- usage.report and every page of usage.export, against the attempts' own times.
    const period = new Date().toISOString().slice(0, 7);
    const report = JSON.parse((await call("GET", `/api/usage?period=${period}`)).body) as { totals: Totals };
    const records: ExportRecord[] = [];
    const adjustments: ExportAdjustment[] = [];
    let exportTotals: Totals | undefined;
    for (let cursor: string | null = null, first = true; first || cursor !== null; first = false) {
      const page = await call(
        "GET",
        `/api/usage/export?${cursor === null ? `period=${period}` : `cursor=${encodeURIComponent(cursor)}`}`,
      );
      if (page.status !== 200) throw new Error(`usage.export: ${page.status} ${page.body}`);
      const doc = JSON.parse(page.body) as {
        records: ExportRecord[];
        adjustments: ExportAdjustment[];
        totals?: Totals | null;
        next_cursor: string | null;
      };
      records.push(...doc.records);
      adjustments.push(...doc.adjustments);
      if (first) exportTotals = doc.totals ?? undefined;
      cursor = doc.next_cursor;
    }
    const recordOf = new Map<string, ExportRecord[]>();
    for (const r of records)
      recordOf.set(`${r.job}#${r.attempt}`, [...(recordOf.get(`${r.job}#${r.attempt}`) ?? []), r]);
    let duplicates = 0;
    let missing = 0;
    let wrongCharges = 0;
    let credited = 0;
    let platformEnded = 0;
    let metered = 0;
    const jobOf = new Map(rows.map((r) => [r.id, r]));
    for (const a of attempts) {
      const key = `${a.job_id}#${a.number}`;
      const mine = recordOf.get(key) ?? [];
      recordOf.delete(key);
      if (mine.length === 0) {
        missing += 1;
        fail(`${key} (${a.state}, ${a.outcome}) has no metering record`);
        continue;
      }
      if (mine.length > 1) {
        duplicates += mine.length - 1;
        fail(`${key} has ${mine.length} metering records`);
      }
      const record = mine[0] as ExportRecord;
      const job = jobOf.get(a.job_id);
      const start = Date.parse(a.started_at);
      let end = Date.parse(a.finished_at ?? a.started_at);
      const cancel = job?.cancel_requested_at == null ? null : Date.parse(job.cancel_requested_at);
      if (cancel !== null && cancel > start && cancel < end) end = cancel;
      const expected = a.vcpus * Math.max(0, Math.ceil((end - start) / 1000));
      metered += record.vcpu_seconds;
      if (record.vcpu_seconds !== expected) {
        wrongCharges += 1;
        fail(`${key}: charged ${record.vcpu_seconds} vCPU-s, metered ${expected} (${a.started_at} → ${a.finished_at})`);
      }
      const failure = job?.failure == null ? null : (JSON.parse(job.failure) as { cause?: string });
      const isLastAttempt = (job?.attempts_started ?? 0) === a.number;
      const byPlatform =
        a.state === "lost" ||
        a.outcome === "lost" ||
        (isLastAttempt && a.outcome === "failed" && failure?.cause === "infrastructure");
      const credits = adjustments.filter(
        (x) => x.kind === "infrastructure" && x.job === a.job_id && x.attempt === a.number,
      );
      if (byPlatform) {
        platformEnded += 1;
        if (credits.length !== 1 || credits[0]?.vcpu_seconds !== -record.vcpu_seconds) {
          fail(`${key} ended by the platform: credits ${JSON.stringify(credits)} for ${record.vcpu_seconds} vCPU-s`);
        } else credited += 1;
      } else if (credits.length > 0) {
        fail(`${key} (${a.outcome}) was credited as infrastructure: ${JSON.stringify(credits)}`);
      }
    }
    for (const [key, extra] of recordOf) {
      duplicates += extra.length;
      fail(`${key}: ${extra.length} metering records for no attempt of the tenant`);
    }
    const beforePlacement = rows.filter((r) => r.status === "cancelled" && r.attempts_started === 0);
    for (const job of beforePlacement) {
      const zero = adjustments.filter((x) => x.kind === "cancelled_before_placement" && x.job === job.id);
      if (zero.length !== 1 || zero[0]?.vcpu_seconds !== 0)
        fail(`${job.id} cancelled before placement: ${JSON.stringify(zero)}`);
    }
    const adjusted = adjustments.reduce((n, x) => n + x.vcpu_seconds, 0);
    if (exportTotals === undefined) fail("the export's first page carried no totals");
    else {
      if (JSON.stringify(exportTotals) !== JSON.stringify(report.totals)) {
        fail(
          `the export's totals ${JSON.stringify(exportTotals)} are not the report's ${JSON.stringify(report.totals)}`,
        );
      }
      if (exportTotals.vcpu_seconds !== metered + adjusted || exportTotals.attempts !== records.length) {
        fail(
          `totals: ${exportTotals.vcpu_seconds} vCPU-s over ${exportTotals.attempts} attempts; the records sum to ` +
            `${metered} over ${records.length}, adjustments ${adjusted}`,
        );
      }
    }
    return {
      figure:
        `seed ${SEED} (postgres): ${JOBS} jobs of a small real crate (${outcomes.passed} passed, ${outcomes.failed} ` +
        `failed, ${outcomes.cancelled} cancelled, ${beforePlacement.length} of them before placement) across ` +
        `${kills.server + kills.host} kill -9s (server ${kills.server}, host ${kills.host}); ${count(attempts.length)} ` +
        `attempts, ${records.length} metering records: ${duplicates} duplicate settlement rows, ${missing} missing, ` +
        `${wrongCharges} charges differing from metered usage (${count(metered)} vCPU-s metered, ` +
        `${count(metered + adjusted)} charged); ${platformEnded} attempts ended by the platform, ${credited} credited ` +
        `as infrastructure; report and export totals ${exportTotals !== undefined && JSON.stringify(exportTotals) === JSON.stringify(report.totals) ? "equal" : "differ"}`,
      broken,
    };
  } finally {
    await host.stop();
    await stopServerProcess(server);
    await storage.close();
    await database.dispose();
    rmSync(serverDir, { recursive: true, force: true });
    rmSync(hostDir, { recursive: true, force: true });
  }
});
