import { silentLogger, systemClock } from "@kiln/contract";
import {
  HostOperator,
  type HostOperatorEvent,
  type HostTlsIdentity,
  httpHostOperatorClient,
  type RecoveryProvider,
} from "@kiln/host";
import { ImpairmentDetector, type ImpairmentEvent } from "../src/domain/hosts/impairment/impairment-detector.js";
import type { TestApp } from "../src/testing/harness.js";
import { listenForHosts, type TestHostListener } from "./host-listener-fixture.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/** An operator session on a test app: GET and POST as the operator, and the audit's entries. */
export function operatorSession(t: TestApp): Promise<OperatorClient> {
  return operatorClient(t.app, t.storage, t.clock.now());
}

const listeners = new WeakMap<TestApp, TestHostListener>();

/** Enrolls a host id over the app's host listener: its TLS identity, as a kiln-host and its host operator present it. */
export async function enrolledHost(t: TestApp, hostId: string): Promise<HostTlsIdentity> {
  const listener = listeners.get(t) ?? (await hostListenerOf(t));
  return listener.enroll(hostId);
}

async function hostListenerOf(t: TestApp): Promise<TestHostListener> {
  // Real kiln-host processes judge their certificates' renewal and expiry by the machine's time.
  const listener = await listenForHosts(t, { clock: systemClock });
  listeners.set(t, listener);
  return listener;
}

/** The app's host listener's origin (the host operator speaks HTTPS with mutual TLS to it, as on a real host). */
export async function listeningOrigin(t: TestApp): Promise<string> {
  return (listeners.get(t) ?? (await hostListenerOf(t))).origin;
}

/** A host operator for `hostId` with `provider`, speaking HTTP to `origin`; its events are collected. */
export function hostOperatorFor(
  t: TestApp,
  input: { origin: string; identity: HostTlsIdentity; hostId: string; provider: RecoveryProvider; boot?: string },
) {
  const events: HostOperatorEvent[] = [];
  const operator = new HostOperator({
    client: httpHostOperatorClient({ endpoint: input.origin, identity: input.identity }),
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
