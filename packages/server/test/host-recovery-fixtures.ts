import { silentLogger } from "@kiln/contract";
import { HostOperator, type HostOperatorEvent, httpHostOperatorClient, type RecoveryProvider } from "@kiln/host";
import { mintHostEnrollmentToken, redeemHostEnrollment } from "../src/hosts/host-identities.js";
import { ImpairmentDetector, type ImpairmentEvent } from "../src/hosts/impairment/impairment-detector.js";
import type { TestApp } from "./harness.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/** An operator session on a test app: GET and POST as the operator, and the audit's entries. */
export function operatorSession(t: TestApp): Promise<OperatorClient> {
  return operatorClient(t.app, t.storage, t.clock.now());
}

/** Enrolls a host id: its credential, as a kiln-host and its host operator present it. */
export async function enrolledHost(t: TestApp, hostId: string): Promise<string> {
  const { token } = await mintHostEnrollmentToken(t.storage, { hostId, createdBy: "operator", now: t.clock.now() });
  return (await redeemHostEnrollment(t.storage, token, t.clock.now())).credential;
}

/** The listening app's origin (the host operator speaks HTTP to it, as on a real host). */
export async function listeningOrigin(t: TestApp): Promise<string> {
  const address = await t.app.listen({ host: "127.0.0.1", port: 0 });
  return address;
}

/** A host operator for `hostId` with `provider`, speaking HTTP to `origin`; its events are collected. */
export function hostOperatorFor(
  t: TestApp,
  input: { origin: string; credential: string; hostId: string; provider: RecoveryProvider; boot?: string },
) {
  const events: HostOperatorEvent[] = [];
  const operator = new HostOperator({
    client: httpHostOperatorClient({ endpoint: input.origin, credential: input.credential }),
    hostId: input.hostId,
    instance: `operator-of-${input.hostId}`,
    environment: "test",
    provisioningBundle: Buffer.from(`bundle of ${input.hostId}`),
    provider: input.provider,
    boot: input.boot ?? `boot-${input.hostId}-1`,
    clock: t.clock,
    log: silentLogger,
    onEvent: (e) => events.push(e),
  });
  return { operator, events };
}

/** The impairment detector on the app's storage and clock; its events are collected. */
export function detectorFor(t: TestApp) {
  const events: ImpairmentEvent[] = [];
  const detector = new ImpairmentDetector({
    storage: t.storage,
    clock: t.clock,
    log: silentLogger,
    onEvent: (e) => events.push(e),
  });
  return { detector, events };
}

export const confirmationFor = (serviceName: string) => `recover-boot:${serviceName}:preserve-root-and-srv`;

/** A real process standing for a supervised service: says it is ready, then runs until stopped. */
export const READY_SERVICE_ARGS = [
  "-e",
  "process.stderr.write('health reported to the control plane\\n'); setInterval(() => {}, 1 << 30);",
];
