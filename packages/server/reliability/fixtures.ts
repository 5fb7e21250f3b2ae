/**
 * Populated tenants for the trials: each holds one of every record an operation's path can
 * name — finished jobs with logs, retained cargo output and an artifact, a queued job,
 * streamed uploads (verified and reserved), agent credentials, a spare CLI token, a registry
 * credential, a lineage and an advisory — made through the API and the host protocol as a
 * person and a host would make them.
 */
import assert from "node:assert/strict";
import type { HostProtocol } from "@kiln/host";
import { onboardRepository } from "@kiln/storage";
import { bearer, hostProtocolOf, personWithToken, type TestApp } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";
import { archiveOf, Sources } from "../test/source-archives.js";

export const REPOSITORY = "acme/widget";
export const HOST_ID = "reliability-host";

export interface TenantWorld {
  readonly tenant: string;
  /** The owner's CLI token, user id, e-mail and dashboard session cookie. */
  readonly owner: { readonly token: string; readonly userId: string; readonly email: string; readonly session: string };
  /** Finished jobs, each with attempt 1's cargo output, one artifact (index 0) and log lines. */
  readonly finishedJobs: string[];
  readonly queuedJobs: string[];
  /** Upload ids: one verified, one reserved with its part still missing. */
  readonly uploads: string[];
  /** Agent credential names with their values. */
  readonly agents: Map<string, string>;
  /** A second CLI token of the owner (id and value), for revocation. */
  readonly spareCliToken: { readonly id: string; readonly token: string };
  readonly advisories: string[];
  readonly lineages: string[];
}

let keys = 0;
const key = (what: string) => `rel-${what}-${process.pid}-${++keys}`;

async function api(
  t: TestApp,
  token: string,
  method: "GET" | "POST",
  url: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  return (await call(t, token, method, url, body)) as Record<string, unknown>;
}

async function call(t: TestApp, token: string, method: "GET" | "POST", url: string, body?: unknown): Promise<unknown> {
  const res = await t.app.inject({
    method,
    url,
    headers: {
      ...bearer(token),
      ...(method === "POST" ? { "idempotency-key": key("call") } : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  assert.ok(res.statusCode === 200 || res.statusCode === 204, `${method} ${url}: ${res.statusCode} ${res.body}`);
  return res.statusCode === 204 ? {} : res.json();
}

/** Submits one job, places it on the fixture host, ships logs and output, and finishes it cold. */
async function finishedJob(t: TestApp, protocol: HostProtocol, token: string, lineage: string, generation: number) {
  const id = String(await call(t, token, "POST", "/api/v4/jobs", inlineSubmission(REPOSITORY, "build")));
  const placement = await protocol.claim(HOST_ID, 16);
  assert.ok(placement !== null && placement.jobId === id, `the fixture host placed ${placement?.jobId}, not ${id}`);
  const ref = { jobId: placement.jobId, attempt: placement.attempt, leaseToken: placement.leaseToken };
  const at = t.clock.now().toISOString();
  assert.equal(
    await protocol.appendLogs(ref, [
      { stream: "stdout", at, text: `compiling ${id}` },
      { stream: "stderr", at, text: `secret-looking line of ${id}` },
    ]),
    "accepted",
  );
  const cargoOutput = await protocol.putBlob(Buffer.from(`cargo output of ${id}\n`));
  const artifact = await protocol.putBlob(Buffer.from(`artifact bytes of ${id}`));
  await t.clock.advance(30_000);
  const finished = await protocol.finish(ref, {
    outcome: "passed",
    exitCode: 0,
    failure: null,
    report: {
      phases: [],
      crates: [],
      tests: [],
      unit: null,
      caches: [
        {
          lineage,
          class: "build/dev/stable",
          outcome: "cold",
          reason: "evicted",
          restored_bytes: 0,
          saved_bytes: 1000,
          saved_generation: generation,
          root_generation: generation,
        },
      ],
    },
    cargoOutput,
    lineageSave: { lineage, bytes: 1000, generation, rootGeneration: generation },
    artifacts: [{ path: "debug/app", ...artifact }],
  });
  assert.equal(finished, "finished");
  return id;
}

/**
 * `count` tenants, each populated. Jobs are placed tenant by tenant before any job is left
 * queued, so the fixture host always places the job just submitted.
 */
export async function populateTenants(t: TestApp, count: number): Promise<TenantWorld[]> {
  const protocol = hostProtocolOf(t.deps);
  await protocol.enroll({ id: HOST_ID, vcpus: 16, memoryBytes: 2 ** 34, isolation: "sandbox" });
  const worlds: TenantWorld[] = [];
  for (let n = 0; n < count; n++) {
    const person = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
    const row = await t.storage.db
      .selectFrom("persons")
      .select("email")
      .where("id", "=", person.userId)
      .executeTakeFirstOrThrow();
    const session = await signIn(t.app, t.storage, row.email, person.tenant, t.clock);
    await onboardRepository(
      t.storage,
      { tenantId: person.tenant, name: REPOSITORY, onboardedBy: "test" },
      t.clock.now(),
    );
    const lineage = `lin_${person.tenant}`;
    const finishedJobs: string[] = [];
    for (let i = 1; i <= 3; i++) finishedJobs.push(await finishedJob(t, protocol, person.token, lineage, i));

    const sources = new Sources(t.app, person.token, REPOSITORY);
    const verifiedId = `up-${person.tenant}-verified`;
    const verified = await sources.upload(
      archiveOf([
        { path: "Cargo.toml", content: `[package]\nname = "w${n}"\nversion = "0.1.0"\n` },
        { path: "src/lib.rs", content: `pub fn tenant_${n}() {}\n` },
      ]),
      verifiedId,
    );
    assert.equal(verified.status, 200, verified.body);
    const reservedId = `up-${person.tenant}-reserved`;
    const reserved = await sources.reserve(
      archiveOf([{ path: "Cargo.toml", content: `[package]\nname = "r${n}"\n# ${person.tenant}\n` }]).reservation,
      reservedId,
    );
    assert.equal(reserved.status, 200, reserved.body);

    const agents = new Map<string, string>();
    for (const [name, scopes] of [
      [`ci-${n}`, ["read", "submit"]],
      [`admin-${n}`, ["read", "submit", "settings", "credentials", "admin"]],
    ] as const) {
      const minted = await api(t, person.token, "POST", "/api/credentials", {
        name,
        scopes,
        expires_in_seconds: 86_400,
      });
      agents.set(name, String(minted.credential));
    }
    const spare = await personWithToken(t.storage, { tenant: person.tenant, role: "admin", now: t.clock.now() });
    const tokens = (await api(t, spare.token, "GET", "/api/cli/tokens")) as { tokens?: { id: string }[] };
    const spareId = tokens.tokens?.[0]?.id;
    assert.ok(spareId !== undefined, `no CLI token listed: ${JSON.stringify(tokens)}`);
    await api(t, person.token, "POST", "/api/tenant/registry-credentials", {
      registry: `registry-${n}.example`,
      authorization: `Bearer registry-secret-${person.tenant}`,
      confirm: `registry-${n}.example`,
    });
    const repository = (await api(t, person.token, "GET", `/api/repositories/${REPOSITORY}`)) as {
      advisories: { id: string }[];
    };
    const advisories = repository.advisories.map((a) => a.id);
    assert.ok(advisories.length > 0, `no advisory computed for ${person.tenant}`);
    worlds.push({
      tenant: person.tenant,
      owner: { token: person.token, userId: person.userId, email: row.email, session },
      finishedJobs,
      queuedJobs: [],
      uploads: [verifiedId, reservedId],
      agents,
      spareCliToken: { id: spareId, token: spare.token },
      advisories,
      lineages: [lineage],
    });
  }
  for (const world of worlds) {
    world.queuedJobs.push(
      String(await call(t, world.owner.token, "POST", "/api/v4/jobs", inlineSubmission(REPOSITORY))),
    );
  }
  return worlds;
}
