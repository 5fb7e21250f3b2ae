import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Role, silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import {
  addPersonToTenant,
  createTenant,
  issueCliToken,
  LocalBlobStore,
  onboardRepository,
  type Storage,
} from "@kiln/storage";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../build-app.js";
import { HostService } from "../domain/hosts/host-service.js";
import { hashToken, mintToken } from "../domain/identity/token-format.js";
import { SecretBox } from "../domain/secrets/secret-box.js";
import { inProcessHostProtocol } from "../web/host-protocol/in-process-host-protocol.js";
import type { AppDeps } from "../web/http/app-deps.js";
import { defaultBodyWorkers, largeBodiesOf } from "../web/http/body-parsers.js";
import { BodyWorkerPool } from "../web/http/body-worker-pool.js";

/** A blob store in a fresh temporary directory. */
export const testBlobs = () => new LocalBlobStore(mkdtempSync(join(tmpdir(), "kiln-blobs-")));

export interface TestApp {
  app: FastifyInstance;
  deps: AppDeps;
  storage: Storage;
  clock: ManualClock;
  close(): Promise<void>;
}

let sharedBodyWorkers: BodyWorkerPool | undefined;

/**
 * The body workers of the test apps in this process that do not choose their own: one pool, as a
 * server process has one for all its requests, rather than a worker thread started (and its
 * modules loaded) by every app whose first job reads a Cargo.toml. Its workers are unreferenced
 * while idle, so it holds no test process open; a worker that fails is replaced by the next task.
 */
function sharedBodyWorkerPool(): BodyWorkerPool {
  sharedBodyWorkers ??= new BodyWorkerPool(defaultBodyWorkers());
  return sharedBodyWorkers;
}

/** The real app on real storage, with every response checked against the contract. */
export async function testApp(storage: Storage, overrides: Partial<AppDeps> = {}): Promise<TestApp> {
  const clock = ManualClock.withRealTimers();
  const deps: AppDeps = {
    storage,
    clock,
    version: "test",
    publicOrigin: "http://kiln.test",
    blobs: testBlobs(),
    secrets: new SecretBox(randomBytes(32)),
    checkResponses: true,
    ...overrides,
  };
  // An app that chooses nothing about its large bodies gets this process's body workers; one that
  // does (its own pool to inspect, none, a bound, ingress shaping) is built as it asks. `deps`
  // stays as the test gave it, so an app built again from it starts its own as before.
  const choosesLargeBodies = ["largeBodies", "bodyWorkers", "largeRequestsPerTenant", "tenantIngress"].some(
    (option) => option in overrides,
  );
  const app = buildApp(
    choosesLargeBodies
      ? deps
      : { ...deps, largeBodies: { ...largeBodiesOf({ ...deps, bodyWorkers: 0 }), pool: sharedBodyWorkerPool() } },
  );
  await app.ready();
  return {
    app,
    deps,
    storage,
    clock,
    close: async () => {
      await app.close();
      await storage.close();
    },
  };
}

let counter = 0;

/** A tenant with a person of `role` holding a CLI device token; returns the token value. */
export async function personWithToken(
  storage: Storage,
  opts: { tenant?: string; role?: Role; now?: Date } = {},
): Promise<{ tenant: string; userId: string; token: string; email: string }> {
  counter += 1;
  const tenant = opts.tenant ?? `t${process.pid}x${counter}`;
  const now = opts.now ?? new Date("2026-11-22T08:00:00.000Z");
  const clock = { now: () => now };
  if (opts.tenant === undefined) await createTenant(storage, { id: tenant, displayName: tenant }, clock.now());
  const email = `p${counter}@${tenant}.example`;
  const { person } = await addPersonToTenant(
    storage,
    {
      tenantId: tenant,
      email,
      displayName: `Person ${counter}`,
      role: opts.role ?? "owner",
    },
    clock.now(),
  );
  const token = mintToken("cli");
  await issueCliToken(
    storage,
    { tenantId: tenant, personId: person.id, tokenHash: hashToken(token), requestingHost: "test" },
    clock.now(),
  );
  return { tenant, userId: person.id, token, email };
}

/** A person of a test tenant holding a CLI device token (personWithToken's answer). */
export type PersonWithToken = Awaited<ReturnType<typeof personWithToken>>;

/** The repository the test tenants onboard unless a test names another. */
export const TEST_REPOSITORY = "acme/widget";

/**
 * A tenant with a person of `role` (owner unless named) holding a CLI token, and `repository`
 * (acme/widget unless named; null: none) onboarded: what a test of a tenant's API starts from.
 */
export async function tenantWithRepository(
  storage: Storage,
  opts: { tenant?: string; role?: Role; repository?: string | null; now?: Date } = {},
): Promise<PersonWithToken> {
  const person = await personWithToken(storage, opts);
  const repository = opts.repository === undefined ? TEST_REPOSITORY : opts.repository;
  if (repository !== null) {
    await onboardRepository(
      storage,
      { tenantId: person.tenant, name: repository, onboardedBy: "test" },
      opts.now ?? new Date("2026-11-22T08:00:00.000Z"),
    );
  }
  return person;
}

/**
 * The real app on a fresh database of `dialect`, with a tenant (tenantWithRepository): the
 * opening of most server test files. `deps` overrides the app's dependencies as testApp's do.
 */
export async function appWithTenant(
  dialect: { openFresh(): Promise<Storage> },
  opts: { role?: Role; repository?: string | null; deps?: Partial<AppDeps> } = {},
): Promise<{ t: TestApp; person: PersonWithToken }> {
  const t = await testApp(await dialect.openFresh(), opts.deps);
  const person = await tenantWithRepository(t.storage, {
    role: opts.role,
    repository: opts.repository,
    now: t.clock.now(),
  });
  return { t, person };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

let idempotencyKeys = 0;

/**
 * A tenant operation on the app as `token`'s holder: a POST carries a JSON body and an
 * idempotency key of its own. The answer's status and its parsed JSON body.
 */
export async function callAs(t: TestApp, token: string, method: "GET" | "POST", url: string, body?: unknown) {
  const res = await t.app.inject({
    method,
    url,
    headers: {
      ...bearer(token),
      ...(method === "POST"
        ? { "idempotency-key": `call-${process.pid}-${++idempotencyKeys}`, "content-type": "application/json" }
        : {}),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json() };
}

/** The host protocol bound in-process to a host service over the app's dependencies (no host agent). */
export function hostProtocolOf(deps: Pick<AppDeps, "storage" | "blobs" | "clock" | "storageQuotaBytes" | "secrets">) {
  return inProcessHostProtocol(
    new HostService({
      storage: deps.storage,
      blobs: deps.blobs,
      clock: deps.clock,
      log: silentLogger,
      ...(deps.storageQuotaBytes === undefined ? {} : { storageQuotaBytes: deps.storageQuotaBytes }),
      ...(deps.secrets === undefined ? {} : { secrets: deps.secrets }),
    }),
  );
}
