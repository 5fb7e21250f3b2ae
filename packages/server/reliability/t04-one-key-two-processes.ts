/**
 * T4 200 concurrent submissions with one idempotency key across two server processes on
 * PostgreSQL, one of them killed -9 in the middle: exactly one job.
 *
 * Two real `kiln-server serve` processes (no local host) on one PostgreSQL database. 200
 * concurrent `POST /api/v4/jobs` with the same idempotency key and body, alternately to each;
 * once a seeded number of the second process's answers has arrived, it is killed with SIGKILL
 * while the rest of its requests are in flight. Every request the kill cut off (no answer) is
 * sent again to the survivor until it has a final answer.
 *
 * The jobs.submit race runs twice: then again for a tenant whose bandwidth allowance fits one
 * submission's bytes, so every racer that misses the key's job at its first look-up meets the
 * allowance the winner used up — and must still answer the winner's job, not `conflict` (the
 * race issue 13's proof loop found on PostgreSQL, fixed in `d2eb9e1`).
 *
 * The same race is then run with credentials.create, whose key is a receipt key (spec, Errors:
 * a five-minute reservation, then the answer kept 24 hours) rather than the job's durable
 * submission identity: there a request the killed process had reserved leaves the key in
 * flight, and `idempotency_key_in_flight` is the documented answer to the repeats.
 *
 * Broken: more or fewer than one job under the key; for the credential, more than one, or none
 * while some answer was 2xx; a 2xx answer naming another job or credential than the one
 * stored; any final answer but 2xx or the documented `idempotency_key_in_flight`; a connection
 * failure no kill explains (before the kill, or to the survivor).
 */
import { rmSync } from "node:fs";
import { onboardRepository, openStorage, readTenantControls, writeTenantControls } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { personWithToken } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { type ServerProcess, startSharedDatabaseServer, stopServerProcess } from "../test/server-process.js";
import { REPOSITORY } from "./fixtures.js";
import { SeededRandom, trialSeed } from "./seeded-random.js";
import { count, runTrial } from "./trial.js";

const REQUESTS = Number(process.env.KILN_T4_REQUESTS ?? 200);
const SEED = trialSeed("T4", 4);

interface Answer {
  readonly status: number;
  readonly body: string;
}

interface Race {
  /** The operation, and what set this race apart. */
  readonly label: string;
  readonly killAfter: number;
  readonly cut: number;
  /** Rows under the key: job ids, or credential names. */
  readonly rows: readonly string[];
  readonly accepted: number;
  readonly ids: ReadonlySet<string>;
  readonly refusals: ReadonlyMap<string, number>;
  /** 2xx answers carrying a credential's value (shown once: at most one may). */
  readonly secretsShown: number;
}

/**
 * REQUESTS concurrent requests of `operation` under one key, alternately to the survivor and
 * the victim; the victim is killed -9 after `killAfter` of its answers and its cut requests
 * are repeated to the survivor until answered.
 */
async function race(
  label: string,
  survivor: ServerProcess,
  victim: ServerProcess,
  request: { readonly path: string; readonly key: string; readonly body: string; readonly token: string },
  killAfter: number,
  broken: string[],
): Promise<Omit<Race, "rows">> {
  const send = async (server: ServerProcess): Promise<Answer> => {
    const res = await fetch(`${server.url}${request.path}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${request.token}`,
        "content-type": "application/json",
        "idempotency-key": request.key,
      },
      body: request.body,
    });
    return { status: res.status, body: await res.text() };
  };
  let victimAnswers = 0;
  let killed = false;
  let cut = 0;
  const finals = await Promise.all(
    Array.from({ length: REQUESTS }, async (_, i): Promise<Answer> => {
      if (i % 2 === 1) {
        try {
          const answer = await send(victim);
          victimAnswers += 1;
          if (!killed && victimAnswers >= killAfter) {
            killed = true;
            victim.child.kill("SIGKILL");
          }
          return answer;
        } catch (error) {
          if (!killed) broken.push(`${label} request ${i}: the connection failed before the kill (${String(error)})`);
          cut += 1;
        }
      }
      // The survivor's own share, and every request the kill cut, repeated until answered.
      for (;;) {
        try {
          return await send(survivor);
        } catch (error) {
          broken.push(`${label} request ${i}: the survivor's connection failed (${String(error)})`);
        }
      }
    }),
  );
  await stopServerProcess(victim, "SIGKILL");
  if (!killed) broken.push(`${label}: the second process answered fewer than ${killAfter} and was never killed`);
  const ids = new Set<string>();
  const refusals = new Map<string, number>();
  let accepted = 0;
  let secretsShown = 0;
  for (const answer of finals) {
    if (answer.status >= 200 && answer.status < 300) {
      accepted += 1;
      if (answer.body.includes("kiln_agent_")) secretsShown += 1;
      const document = JSON.parse(answer.body) as string | { view?: { name?: string } };
      ids.add(typeof document === "string" ? document : String(document.view?.name));
      continue;
    }
    const code = (JSON.parse(answer.body) as { code?: string }).code ?? `HTTP ${answer.status}`;
    refusals.set(code, (refusals.get(code) ?? 0) + 1);
    if (!(answer.status === 409 && code === "idempotency_key_in_flight")) {
      broken.push(`${label}: answered ${answer.status} ${answer.body.slice(0, 200)}`);
    }
  }
  return { label, killAfter, cut, accepted, ids, refusals, secretsShown };
}

function describeRace(r: Race, what: string): string {
  const refused = r.refusals.size === 0 ? "none" : [...r.refusals].map(([c, n]) => `${c} ${count(n)}`).join(", ");
  return (
    `${r.label}: ${count(REQUESTS)} requests, the second process killed -9 after ${r.killAfter} of its ` +
    `answers (${count(r.cut)} cut, repeated to the survivor): ${r.rows.length} ${what}${r.rows.length === 1 ? "" : "s"} created, ${r.ids.size} ` +
    `distinct ${r.ids.size === 1 ? "id" : "ids"} in ${count(r.accepted)} 2xx answers` +
    (r.label === "credentials.create" ? ` (its value shown in ${r.secretsShown})` : "") +
    `; refusals: ${refused}`
  );
}

await runTrial("T4", "one key across two processes, one killed", async () => {
  const postgres = DIALECTS.find((d) => d.name === "postgres");
  if (postgres === undefined || postgres.skip !== false)
    throw new Error("T4 needs PostgreSQL (KILN_TEST_POSTGRES_URL)");
  const random = new SeededRandom(SEED);
  const broken: string[] = [];
  const database = await postgres.createDatabase();
  const storage = await openStorage(database.options);
  const servers: ServerProcess[] = [];
  const start = async () => {
    const server = await startSharedDatabaseServer(database.options.databaseUrl ?? "");
    servers.push(server);
    return server;
  };
  try {
    const owner = await personWithToken(storage, { role: "owner", now: new Date() });
    await onboardRepository(storage, { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "t4" }, new Date());
    const survivor = await start();
    // The victim dies once a seeded number of its own answers has arrived: early in its share,
    // so most of its requests are still in flight.
    const killPoint = () => random.int(1, Math.max(1, Math.floor(REQUESTS / 20)));

    // ---- jobs.submit: the key is the submission's durable identity — exactly one job.
    const jobKey = "t4-one-key";
    const jobs = await race(
      "jobs.submit",
      survivor,
      await start(),
      { path: "/api/v4/jobs", key: jobKey, body: JSON.stringify(inlineSubmission(REPOSITORY)), token: owner.token },
      killPoint(),
      broken,
    );
    const jobRows = await storage.db.selectFrom("jobs").select("id").where("tenant_id", "=", owner.tenant).execute();
    const jobRace: Race = { ...jobs, rows: jobRows.map((r) => r.id) };
    if (jobRows.length !== 1) broken.push(`jobs.submit: ${jobRows.length} jobs under one key, not exactly one`);
    for (const id of jobs.ids)
      if (!jobRace.rows.includes(id)) broken.push(`jobs.submit: an answer named job ${id}, which is not stored`);
    if (jobs.ids.size !== 1) broken.push(`jobs.submit: ${jobs.ids.size} distinct job ids answered, not one`);

    // ---- jobs.submit again, for a tenant whose bandwidth allowance fits one submission's file
    // bytes: the racers that miss the job at their first look-up meet the allowance used up by
    // the winner, and must still answer its job.
    const tight = await personWithToken(storage, { role: "owner", now: new Date() });
    await onboardRepository(storage, { tenantId: tight.tenant, name: REPOSITORY, onboardedBy: "t4" }, new Date());
    const submission = inlineSubmission(REPOSITORY);
    const allowance = submission.workspace.source.files.reduce((bytes, file) => bytes + file.bytes.length, 0);
    const controls = await readTenantControls(storage, { tenantId: tight.tenant });
    if (controls === undefined) throw new Error("the tenant has no controls row");
    const set = await writeTenantControls(storage, {
      tenantId: tight.tenant,
      expectedVersion: controls.version,
      changes: { bandwidthBytesPerMonth: allowance },
      changedBy: "t4",
      now: new Date(),
    });
    if (set.kind !== "written") throw new Error(`setting the allowance: ${set.kind}`);
    const allowanceLabel = `jobs.submit (allowance ${allowance} bytes: one submission)`;
    const tightJobs = await race(
      allowanceLabel,
      survivor,
      await start(),
      { path: "/api/v4/jobs", key: "t4-one-key-one-allowance", body: JSON.stringify(submission), token: tight.token },
      killPoint(),
      broken,
    );
    const tightRows = await storage.db.selectFrom("jobs").select("id").where("tenant_id", "=", tight.tenant).execute();
    const tightRace: Race = { ...tightJobs, rows: tightRows.map((r) => r.id) };
    if (tightRows.length !== 1)
      broken.push(`${allowanceLabel}: ${tightRows.length} jobs under one key, not exactly one`);
    if (tightJobs.ids.size !== 1 || !tightRace.rows.includes([...tightJobs.ids][0] ?? ""))
      broken.push(
        `${allowanceLabel}: the answers named ${[...tightJobs.ids].join(", ") || "no job"}, not the one stored`,
      );

    // ---- credentials.create: a receipt key — at most one credential, and one if any 2xx.
    const name = "t4-one-credential";
    const credentials = await race(
      "credentials.create",
      survivor,
      await start(),
      {
        path: "/api/credentials",
        key: "t4-one-credential-key",
        body: JSON.stringify({ name, scopes: ["read"], expires_in_seconds: 3600 }),
        token: owner.token,
      },
      killPoint(),
      broken,
    );
    const credentialRows = await storage.db
      .selectFrom("agent_credentials")
      .select("name")
      .where("tenant_id", "=", owner.tenant)
      .execute();
    const credentialRace: Race = { ...credentials, rows: credentialRows.map((r) => r.name) };
    if (credentialRows.length > 1)
      broken.push(`credentials.create: ${credentialRows.length} credentials under one key`);
    if (credentials.accepted > 0 && credentialRows.length !== 1)
      broken.push(`credentials.create: ${credentials.accepted} 2xx answers, ${credentialRows.length} credentials`);
    for (const id of credentials.ids)
      if (!credentialRace.rows.includes(id)) broken.push(`credentials.create: an answer named ${id}, not stored`);
    if (credentials.ids.size > 1) broken.push(`credentials.create: ${credentials.ids.size} credentials answered`);
    if (credentials.secretsShown > 1)
      broken.push(`credentials.create: the shown-once value was in ${credentials.secretsShown} answers`);

    return {
      figure:
        `seed ${SEED} (postgres), one key per race over 2 processes: ${describeRace(jobRace, "job")}; ` +
        `${describeRace(tightRace, "job")}; ` +
        describeRace(credentialRace, "credential"),
      broken,
    };
  } finally {
    for (const server of servers) {
      await stopServerProcess(server, "SIGKILL");
      if (server.dataDir !== undefined) rmSync(server.dataDir, { recursive: true, force: true });
    }
    await storage.close();
    await database.dispose();
  }
});
