import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Role } from "@kiln/contract";
import {
  addPersonToTenant,
  type Clock,
  createTenant,
  issueCliToken,
  LocalBlobStore,
  type Storage,
} from "@kiln/storage";
import type { FastifyInstance } from "fastify";
import { hashToken, mintToken } from "../src/auth/token-format.js";
import { buildApp } from "../src/build-app.js";
import type { AppDeps } from "../src/deps.js";

/** A blob store in a fresh temporary directory. */
export const testBlobs = () => new LocalBlobStore(mkdtempSync(join(tmpdir(), "kiln-blobs-")));

/** A settable clock so tests move time instead of waiting. */
export class TestClock implements Clock {
  constructor(private current = new Date("2026-11-22T08:00:00.000Z")) {}
  now(): Date {
    return new Date(this.current);
  }
  advance(seconds: number): void {
    this.current = new Date(this.current.getTime() + seconds * 1000);
  }
}

export interface TestApp {
  app: FastifyInstance;
  deps: AppDeps;
  storage: Storage;
  clock: TestClock;
  close(): Promise<void>;
}

/** The real app on real storage, with every response checked against the contract. */
export async function testApp(storage: Storage, overrides: Partial<AppDeps> = {}): Promise<TestApp> {
  const clock = new TestClock();
  const deps: AppDeps = {
    storage,
    clock,
    version: "test",
    publicOrigin: "http://kiln.test",
    blobs: testBlobs(),
    checkResponses: true,
    ...overrides,
  };
  const app = buildApp(deps);
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
): Promise<{ tenant: string; userId: string; token: string }> {
  counter += 1;
  const tenant = opts.tenant ?? `t${process.pid}x${counter}`;
  const now = opts.now ?? new Date("2026-11-22T08:00:00.000Z");
  const clock = { now: () => now };
  if (opts.tenant === undefined) await createTenant(storage, { id: tenant, displayName: tenant }, clock);
  const { person } = await addPersonToTenant(
    storage,
    {
      tenantId: tenant,
      email: `p${counter}@${tenant}.example`,
      displayName: `Person ${counter}`,
      role: opts.role ?? "owner",
    },
    clock,
  );
  const token = mintToken("cli");
  await issueCliToken(
    storage,
    { tenantId: tenant, personId: person.id, tokenHash: hashToken(token), requestingHost: "test" },
    clock,
  );
  return { tenant, userId: person.id, token };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
