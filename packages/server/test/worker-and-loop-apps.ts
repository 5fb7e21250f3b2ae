import { systemClock } from "@kiln/contract";
import { onboardRepository, type Storage } from "@kiln/storage";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/build-app.js";
import { personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { type LargeBodies, largeBodiesOf } from "../src/web/http/body-parsers.js";

/**
 * One service twice over the same storage: `t.app` with a body worker (`large`, inspected by the
 * tests: what it read, what it parsed) and `onLoop` doing everything on its event loop, and a
 * member of a tenant with `repository` onboarded — for tests that what a worker does is what the
 * loop would have done.
 */
export interface WorkerAndLoopApps {
  readonly t: TestApp;
  readonly large: LargeBodies;
  readonly onLoop: FastifyInstance;
  readonly member: { readonly tenant: string; readonly token: string };
  close(): Promise<void>;
}

export async function workerAndLoopApps(storage: Storage, repository: string): Promise<WorkerAndLoopApps> {
  const large = largeBodiesOf({ bodyWorkers: 1, clock: systemClock });
  const t = await testApp(storage, { largeBodies: large });
  // Without the workers' pool (given, it would be used whatever bodyWorkers says).
  const { largeBodies: _workers, ...deps } = t.deps;
  const onLoop = buildApp({ ...deps, bodyWorkers: 0 });
  await onLoop.ready();
  const member = await personWithToken(t.storage, { role: "member" });
  await onboardRepository(t.storage, { tenantId: member.tenant, name: repository, onboardedBy: "test" }, t.clock.now());
  return {
    t,
    large,
    onLoop,
    member,
    close: async () => {
      await onLoop.close();
      await t.close();
      await large.pool?.close();
    },
  };
}
