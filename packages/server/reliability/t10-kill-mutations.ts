/**
 * T10 kill -9 of the server during 1,000 acknowledged mutations, on SQLite and PostgreSQL.
 *
 * A real `kiln-server serve` process (no local host) on a file database; eight clients send
 * keyed mutations whose effect is a row the trial reads back — jobs.submit (a durable-owner
 * key: the job row carries it) and credentials.create (a receipt key: the credential row is
 * named after it) — and record every acknowledged (2xx) answer. At seeded points the process
 * is killed with SIGKILL and started again on the same database; a request the kill cut off is
 * sent again with the same key and body to the new process, until every key has a final answer.
 *
 * Broken: an acknowledged mutation whose row is missing (lost) or present twice (duplicated);
 * a row no key's final answer names; a repeat of an acknowledged key that does not replay the
 * acknowledged answer (the same job id; the same credential, with its secret replaced by the
 * notice); any answer but 2xx or — for a receipt key whose first request the kill cut after it
 * reserved the key — the documented `idempotency_key_in_flight` (spec, Errors: the five-minute
 * reservation), whose key must then have no effect at all; a connection failure no kill explains.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onboardRepository, openStorage, type Storage } from "@kiln/storage";
import type { DialectUnderTest } from "@kiln/storage/testing";
import { personWithToken } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { SHOWN_ONCE_NOTICE } from "../src/web/http/perform-keyed.js";
import { type ServerProcess, startServerProcess, stopServerProcess } from "../test/server-process.js";
import { REPOSITORY } from "./fixtures.js";
import { SeededRandom, trialSeed } from "./seeded-random.js";
import { count, runTrial, trialDialects } from "./trial.js";

const TARGET = Number(process.env.KILN_T10_MUTATIONS ?? 1000);
const KILLS = Number(process.env.KILN_T10_KILLS ?? 3);
const CLIENTS = Number(process.env.KILN_T10_CLIENTS ?? 8);
const SEED = trialSeed("T10", 10);

type Kind = "job" | "credential";

interface Mutation {
  readonly key: string;
  readonly kind: Kind;
  /** Requests of this key the kill cut off (no answer received). */
  cut: number;
}

interface Acknowledged {
  readonly mutation: Mutation;
  /** The job id, or the credential's name. */
  readonly id: string;
  readonly body: string;
}

interface Figures {
  acknowledged: number;
  jobs: number;
  credentials: number;
  kills: number;
  cut: number;
  /** Keys with a request cut (a key can be cut again when a kill follows closely). */
  cutKeys: number;
  /** Cut keys whose repeat was answered 2xx. */
  retriedAnswered: number;
  /** Receipt keys left reserved by a killed process: answered idempotency_key_in_flight. */
  stranded: number;
  lost: number;
  duplicated: number;
  badReplays: number;
}

/**
 * The server process under trial: `kill()` SIGKILLs it at once (so the requests in flight are
 * cut mid-way) and starts another on the same database; `generation` counts the processes.
 */
class KilledServer {
  generation = 0;
  kills = 0;
  private current: ServerProcess | undefined;
  private restarting: Promise<void> | undefined;

  constructor(private readonly env: Record<string, string | undefined>) {}

  get url(): string {
    if (this.current === undefined) throw new Error("the server is not running");
    return this.current.url;
  }

  get down(): boolean {
    return this.restarting !== undefined;
  }

  async start(): Promise<void> {
    this.current = await startServerProcess(this.env);
    this.generation += 1;
  }

  kill(): Promise<void> {
    if (this.restarting !== undefined) return this.restarting;
    const victim = this.current;
    this.kills += 1;
    // Synchronously: the signal is sent before any other client's answer is read.
    victim?.child.kill("SIGKILL");
    this.restarting = (async () => {
      await stopServerProcess(victim, "SIGKILL");
      await this.start();
      this.restarting = undefined;
    })();
    return this.restarting;
  }

  /** Resolves once a process newer than `generation` serves. */
  async after(generation: number): Promise<void> {
    while (this.generation <= generation) {
      if (this.restarting === undefined) return;
      await this.restarting;
    }
  }

  async stop(): Promise<void> {
    await this.restarting;
    await stopServerProcess(this.current, "SIGTERM");
  }
}

async function trialOn(dialect: DialectUnderTest, random: SeededRandom, figures: Figures, broken: string[]) {
  const database = await dialect.createDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), "kiln-t10-"));
  const storage: Storage = await openStorage(database.options);
  const fail = (what: string) => broken.push(`${dialect.name}: ${what}`);
  const server = new KilledServer(
    database.options.databaseUrl === undefined
      ? { KILN_DATA_DIR: database.options.dataDir, KILN_DATABASE_URL: undefined, KILN_LOCAL_HOST: "off" }
      : { KILN_DATA_DIR: dataDir, KILN_DATABASE_URL: database.options.databaseUrl, KILN_LOCAL_HOST: "off" },
  );
  try {
    const owner = await personWithToken(storage, { role: "owner", now: new Date() });
    await onboardRepository(storage, { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "t10" }, new Date());
    await server.start();

    const submission = JSON.stringify(inlineSubmission(REPOSITORY));
    const send = async (base: string, m: Mutation) => {
      const job = m.kind === "job";
      const res = await fetch(`${base}${job ? "/api/v4/jobs" : "/api/credentials"}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${owner.token}`,
          "content-type": "application/json",
          "idempotency-key": m.key,
        },
        body: job ? submission : JSON.stringify({ name: m.key, scopes: ["read"], expires_in_seconds: 86_400 }),
      });
      return {
        status: res.status,
        replayed: res.headers.get("idempotent-replayed") === "true",
        body: await res.text(),
      };
    };

    // Kill points: distinct acknowledgement counts spread over the run, drawn from the seed.
    const killAt = new Set<number>();
    while (killAt.size < KILLS) killAt.add(random.int(Math.floor(TARGET / 10), Math.floor((TARGET * 9) / 10)));
    const acknowledged: Acknowledged[] = [];
    const stranded: Mutation[] = [];
    const retries: Mutation[] = [];
    let issued = 0;
    let unacknowledged = 0;
    const next = (): Mutation => {
      issued += 1;
      const kind: Kind = random.next() < 0.75 ? "job" : "credential";
      return { key: `t10-${dialect.name}-${kind === "job" ? "j" : "c"}${issued}`, kind, cut: 0 };
    };

    const perform = async (m: Mutation): Promise<"answered" | "cut"> => {
      if (server.down) await server.after(server.generation);
      const generation = server.generation;
      const killed = server.kills;
      let answer: Awaited<ReturnType<typeof send>>;
      try {
        answer = await send(server.url, m);
      } catch (error) {
        if (server.kills === killed && !server.down) {
          fail(`${m.key}: the connection failed with no kill to explain it (${String(error)})`);
        }
        if (m.cut === 0) figures.cutKeys += 1;
        m.cut += 1;
        figures.cut += 1;
        await server.after(generation);
        return "cut";
      }
      if (answer.status === 200) {
        const id = m.kind === "job" ? String(JSON.parse(answer.body)) : (JSON.parse(answer.body).view?.name as string);
        acknowledged.push({ mutation: m, id, body: answer.body });
        if (m.cut > 0) figures.retriedAnswered += 1;
        if (killAt.has(acknowledged.length)) void server.kill();
        return "answered";
      }
      const code = (JSON.parse(answer.body) as { code?: string }).code;
      if (answer.status === 409 && code === "idempotency_key_in_flight" && m.kind === "credential" && m.cut > 0) {
        stranded.push(m);
        unacknowledged += 1;
      } else {
        unacknowledged += 1;
        fail(`${m.key} (${m.kind}, cut ${m.cut} times): answered ${answer.status} ${answer.body.slice(0, 200)}`);
      }
      return "answered";
    };

    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        // A new key while the keys issued, less those finally answered otherwise than 2xx, are
        // fewer than the target: so exactly TARGET are acknowledged when every repeat succeeds.
        for (;;) {
          const m = retries.shift() ?? (issued - unacknowledged < TARGET ? next() : undefined);
          if (m === undefined) break;
          if ((await perform(m)) === "cut") retries.push(m);
        }
      }),
    );
    // Every key sent gets a final answer: the cut ones left over are repeated until answered.
    for (let m = retries.shift(); m !== undefined; m = retries.shift()) {
      if ((await perform(m)) === "cut") retries.push(m);
    }
    figures.kills += server.kills;
    figures.stranded += stranded.length;
    figures.acknowledged += acknowledged.length;

    // ---- read back every row.
    const jobRows = await storage.db
      .selectFrom("jobs")
      .select(["id", "submission_key"])
      .where("tenant_id", "=", owner.tenant)
      .execute();
    const credentialRows = await storage.db
      .selectFrom("agent_credentials")
      .select("name")
      .where("tenant_id", "=", owner.tenant)
      .execute();
    const rowsOf = new Map<string, string[]>();
    for (const row of jobRows)
      rowsOf.set(`job:${row.submission_key}`, [...(rowsOf.get(`job:${row.submission_key}`) ?? []), row.id]);
    for (const row of credentialRows)
      rowsOf.set(`credential:${row.name}`, [...(rowsOf.get(`credential:${row.name}`) ?? []), row.name]);
    const named = new Set<string>();
    for (const ack of acknowledged) {
      const slot = `${ack.mutation.kind}:${ack.mutation.key}`;
      named.add(slot);
      const rows = rowsOf.get(slot) ?? [];
      if (ack.mutation.kind === "job") figures.jobs += 1;
      else figures.credentials += 1;
      if (rows.length === 0) {
        figures.lost += 1;
        fail(`${ack.mutation.key}: acknowledged (${ack.id}) but no row holds it`);
      } else if (rows.length > 1) {
        figures.duplicated += 1;
        fail(`${ack.mutation.key}: acknowledged once, ${rows.length} rows (${rows.join(", ")})`);
      } else if (rows[0] !== ack.id) fail(`${ack.mutation.key}: acknowledged ${ack.id}, its row is ${rows[0]}`);
    }
    for (const m of stranded) {
      const rows = rowsOf.get(`credential:${m.key}`) ?? [];
      if (rows.length > 0) fail(`${m.key}: answered in flight after the kill, yet it has ${rows.length} rows`);
    }
    for (const [slot, rows] of rowsOf) {
      if (!named.has(slot)) {
        figures.duplicated += rows.length;
        fail(`${slot}: ${rows.length} rows no acknowledged answer names`);
      }
    }

    // ---- every acknowledged key, repeated to the last process, replays its answer.
    const queue = [...acknowledged];
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (let ack = queue.shift(); ack !== undefined; ack = queue.shift()) {
          const again = await send(server.url, ack.mutation);
          const expected =
            ack.mutation.kind === "job"
              ? ack.body
              : JSON.stringify({ ...(JSON.parse(ack.body) as object), credential: SHOWN_ONCE_NOTICE });
          const replays =
            again.status === 200 &&
            again.body === expected &&
            (ack.mutation.kind === "job" || (again.replayed && !again.body.includes("kiln_agent_")));
          if (!replays) {
            figures.badReplays += 1;
            fail(
              `${ack.mutation.key}: the repeat answered ${again.status} ${again.body.slice(0, 200)}, not the replay`,
            );
          }
        }
      }),
    );
    const after = await storage.db
      .selectFrom("jobs")
      .select((e) => e.fn.countAll().as("n"))
      .where("tenant_id", "=", owner.tenant)
      .executeTakeFirstOrThrow();
    if (Number(after.n) !== jobRows.length) fail(`the replays made ${Number(after.n) - jobRows.length} more jobs`);
  } finally {
    await server.stop();
    await storage.close();
    await database.dispose();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await runTrial("T10", "kill -9 during acknowledged mutations", async () => {
  const broken: string[] = [];
  const random = new SeededRandom(SEED);
  const parts: string[] = [];
  for (const dialect of trialDialects()) {
    const figures: Figures = {
      acknowledged: 0,
      jobs: 0,
      credentials: 0,
      kills: 0,
      cut: 0,
      cutKeys: 0,
      retriedAnswered: 0,
      stranded: 0,
      lost: 0,
      duplicated: 0,
      badReplays: 0,
    };
    await trialOn(dialect, random, figures, broken);
    parts.push(
      `${dialect.name} ${count(figures.acknowledged)} acknowledged (${count(figures.jobs)} jobs.submit, ` +
        `${count(figures.credentials)} credentials.create) across ${figures.kills} kills: ${figures.lost} lost, ` +
        `${figures.duplicated} duplicated, ${figures.badReplays} repeats not replayed; the kills cut ` +
        `${figures.cut} requests of ${figures.cutKeys} keys (${figures.retriedAnswered} answered 2xx when repeated, ` +
        `${figures.stranded} receipt ${figures.stranded === 1 ? "key" : "keys"} left in flight, with no effect)`,
    );
  }
  return { figure: `seed ${SEED}, ${CLIENTS} clients: ${parts.join("; ")}`, broken };
});
