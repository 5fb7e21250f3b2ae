/**
 * T5 idempotency key reuse, on SQLite and PostgreSQL, for a receipt-keyed operation
 * (credentials.create, whose answer holds a secret shown once) and the durable-owner ones
 * (jobs.submit, sources.reserve): a repeat replays without a second effect and without the
 * secret; a changed body under the key is idempotency_key_reused (receipt) or conflict
 * (durable-owner); the key on another operation is idempotency_key_reused; another tenant
 * using the same key gets its own effect and nothing of the first tenant's; past the 24-hour
 * retention (the injected clock moved) a receipt key performs anew while a durable-owner key
 * still answers its original; no receipt at rest holds a secret.
 */
import type { Database } from "@kiln/storage";
import { onboardRepository } from "@kiln/storage";
import type { LightMyRequestResponse } from "fastify";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { SHOWN_ONCE_NOTICE } from "../src/web/http/perform-keyed.js";
import { archiveOf } from "../test/source-archives.js";
import { REPOSITORY } from "./fixtures.js";
import { count, runTrial, trialDialects } from "./trial.js";

interface Tally {
  checks: number;
  broken: string[];
}

async function rows(t: TestApp, table: keyof Database, tenant: string): Promise<number> {
  const row = await t.storage.db
    .selectFrom(table)
    .select((e) => e.fn.countAll().as("n"))
    .where("tenant_id" as never, "=", tenant as never)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function trialOn(t: TestApp, dialect: string, tally: Tally): Promise<void> {
  const check = (ok: boolean, what: string, res?: LightMyRequestResponse) => {
    tally.checks += 1;
    if (!ok)
      tally.broken.push(
        `${dialect}: ${what}${res === undefined ? "" : ` (got ${res.statusCode} ${res.body.slice(0, 200)})`}`,
      );
  };
  const a = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
  const b = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
  for (const p of [a, b])
    await onboardRepository(t.storage, { tenantId: p.tenant, name: REPOSITORY, onboardedBy: "t5" }, t.clock.now());
  const post = (token: string, url: string, key: string, body: unknown) =>
    t.app.inject({
      method: "POST",
      url,
      headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
      payload: JSON.stringify(body),
    });
  const code = (res: LightMyRequestResponse) => (res.json() as { code?: string }).code;
  const replayed = (res: LightMyRequestResponse) => res.headers["idempotent-replayed"] === "true";

  // ---- credentials.create: a receipt key whose answer holds a secret shown once.
  const K1 = "t5-credential-key";
  const cred1 = { name: "t5-cred", scopes: ["read"], expires_in_seconds: 3600 };
  const cred2 = { name: "t5-other", scopes: ["read"], expires_in_seconds: 3600 };
  const first = await post(a.token, "/api/credentials", K1, cred1);
  check(first.statusCode === 200, "credentials.create performs", first);
  const secretA = String((first.json() as { credential?: string }).credential);
  const credentialsA = await rows(t, "agent_credentials", a.tenant);

  const again = await post(a.token, "/api/credentials", K1, cred1);
  check(again.statusCode === 200 && replayed(again), "an equal repeat is a replay", again);
  const expected = JSON.stringify({ ...(first.json() as object), credential: SHOWN_ONCE_NOTICE });
  check(again.body === expected, "the replay is the original answer with the secret replaced by the notice", again);
  check(!again.body.includes(secretA), "the replay does not repeat the secret", again);
  check((await rows(t, "agent_credentials", a.tenant)) === credentialsA, "a replay has no second effect");

  const changed = await post(a.token, "/api/credentials", K1, cred2);
  check(changed.statusCode === 409 && code(changed) === "idempotency_key_reused", "a changed body is reused", changed);
  const otherOp = await post(a.token, "/api/tenant/settings", K1, {
    version: 0,
    changes: { agents_may_submit: false },
  });
  check(
    otherOp.statusCode === 409 && code(otherOp) === "idempotency_key_reused",
    "the key on another operation is reused",
    otherOp,
  );
  check((await rows(t, "agent_credentials", a.tenant)) === credentialsA, "refused repeats have no effect");

  const theirs = await post(b.token, "/api/credentials", K1, cred1);
  const secretB = String((theirs.json() as { credential?: string }).credential);
  check(
    theirs.statusCode === 200 && !replayed(theirs),
    "another tenant's equal request under the key performs",
    theirs,
  );
  check(secretB.startsWith("kiln_agent_") && secretB !== secretA, "another tenant gets its own secret", theirs);
  check(
    !theirs.body.includes(a.tenant) && !theirs.body.includes(secretA),
    "another tenant sees nothing of the first",
    theirs,
  );

  // ---- jobs.submit: durable-owner; the key is the submission's identity.
  const K2 = "t5-submission-key";
  const s1 = inlineSubmission(REPOSITORY);
  const s2 = inlineSubmission(REPOSITORY, "build");
  const jobsA = await rows(t, "jobs", a.tenant);
  const submitted = await post(a.token, "/api/v4/jobs", K2, s1);
  const jobA = String(submitted.json());
  check(submitted.statusCode === 200, "jobs.submit performs", submitted);
  const resubmitted = await post(a.token, "/api/v4/jobs", K2, s1);
  check(
    resubmitted.statusCode === 200 && resubmitted.body === submitted.body,
    "an equal resubmission answers the original job",
    resubmitted,
  );
  const changedJob = await post(a.token, "/api/v4/jobs", K2, s2);
  check(
    changedJob.statusCode === 409 && code(changedJob) === "conflict",
    "a changed submission is conflict",
    changedJob,
  );
  check((await rows(t, "jobs", a.tenant)) === jobsA + 1, "one job for the key");
  const theirJob = await post(b.token, "/api/v4/jobs", K2, s1);
  const jobB = String(theirJob.json());
  check(
    theirJob.statusCode === 200 && jobB !== jobA,
    "another tenant's submission under the key is its own job",
    theirJob,
  );
  const crossA = await t.app.inject({ method: "GET", url: `/api/jobs/${jobB}`, headers: bearer(a.token) });
  const crossB = await t.app.inject({ method: "GET", url: `/api/jobs/${jobA}`, headers: bearer(b.token) });
  check(crossA.statusCode === 404 && crossB.statusCode === 404, "neither tenant sees the other's job of the same key");

  // ---- sources.reserve: durable-owner; the key is the upload id.
  const U = "t5-upload";
  const m1 = archiveOf([{ path: "Cargo.toml", content: "[package]\nname = 'one'\n" }]).reservation;
  const m2 = archiveOf([{ path: "Cargo.toml", content: "[package]\nname = 'two'\n" }]).reservation;
  const reserved = await post(a.token, "/api/sources", U, m1);
  check(reserved.statusCode === 200, "sources.reserve performs", reserved);
  const rereserved = await post(a.token, "/api/sources", U, m1);
  check(
    rereserved.statusCode === 200 && rereserved.body === reserved.body,
    "an equal reservation answers the original",
    rereserved,
  );
  const changedUpload = await post(a.token, "/api/sources", U, m2);
  check(
    changedUpload.statusCode === 409 && code(changedUpload) === "conflict",
    "a changed reservation is conflict",
    changedUpload,
  );
  const theirUpload = await post(b.token, "/api/sources", U, m2);
  check(
    theirUpload.statusCode === 200 && !theirUpload.body.includes(a.tenant),
    "another tenant reserves its own upload under the id",
    theirUpload,
  );

  // ---- past retention (24 h): a receipt key is free again; a durable-owner key is forever.
  await t.clock.advance((86_400 + 1) * 1000);
  const later = await post(a.token, "/api/credentials", K1, cred2);
  check(later.statusCode === 200 && !replayed(later), "past retention a receipt key performs the new request", later);
  const laterSecret = String((later.json() as { credential?: string }).credential);
  check(
    laterSecret !== secretA && laterSecret.startsWith("kiln_agent_"),
    "and mints a new secret, not the old one",
    later,
  );
  const laterJob = await post(a.token, "/api/v4/jobs", K2, s1);
  check(
    laterJob.statusCode === 200 && laterJob.body === submitted.body,
    "past retention a submission key answers its job",
    laterJob,
  );
  const laterChanged = await post(a.token, "/api/v4/jobs", K2, s2);
  check(
    laterChanged.statusCode === 409 && code(laterChanged) === "conflict",
    "and a changed submission is still conflict",
    laterChanged,
  );
  check((await rows(t, "jobs", a.tenant)) === jobsA + 1, "still one job for the key");

  // ---- no receipt at rest holds a secret.
  const receipts = await t.storage.db.selectFrom("idempotency_keys").selectAll().execute();
  const text = JSON.stringify(receipts);
  for (const secret of [secretA, secretB, laterSecret])
    check(!text.includes(secret), "no receipt holds a shown-once secret");
}

await runTrial("T5", "idempotency key reuse", async () => {
  const tally: Tally = { checks: 0, broken: [] };
  const engines: string[] = [];
  for (const dialect of trialDialects()) {
    const t = await testApp(await dialect.openFresh());
    try {
      await trialOn(t, dialect.name, tally);
      engines.push(dialect.name);
    } finally {
      await t.close();
    }
  }
  return {
    figure:
      `${count(tally.checks)} checks (${engines.join(" and ")}): replays, changed bodies, another operation, another ` +
      `tenant, past the 24 h retention — ${tally.broken.length} wrong answers, second effects or leaks`,
    broken: tally.broken,
  };
});
