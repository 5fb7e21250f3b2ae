/**
 * A dependency-gateway worker: the child process one attempt's fetch phase runs in
 * (worker-gateway.ts starts it). It runs DependencyGateway.provide and asks the agent, over
 * IPC, for what only the agent has: the tenant's registry credentials and a lockfile generated
 * in the sandbox. When the agent goes away (it crashed, or killed the worker's process group at
 * the job's ceiling or cancellation), so does everything the worker started.
 */
import type { RegistryCredentialGrant } from "@kiln/contract";
// Subpaths, not the package: the worker starts for every attempt, and the catalogue it would load costs it half a second.
import { systemClock } from "@kiln/contract/clock";
import { DependencyGateway } from "./dependency-gateway.js";
import { GatewayError } from "./gateway-error.js";
import type { FromWorker, ToWorker } from "./gateway-worker-protocol.js";

const send = (message: FromWorker) =>
  new Promise<void>((resolve) => {
    if (process.send === undefined || !process.connected) resolve();
    else process.send(message, undefined, {}, () => resolve());
  });

let credentials: ((grants: readonly RegistryCredentialGrant[]) => void) | null = null;
const lockfiles = new Map<number, (text: string) => void>();
let nextLockfile = 1;
let started = false;

/** Ends the worker and every process it started (it leads its own process group). */
function endEverything(code: number): never {
  try {
    process.kill(-process.pid, "SIGKILL");
  } catch {
    // Not a group leader (run by hand): only this process ends.
  }
  process.exit(code);
}

process.on("disconnect", () => endEverything(1));

process.on("message", (raw) => {
  const message = raw as ToWorker;
  switch (message.type) {
    case "provide":
      if (started) return;
      started = true;
      // `ps` says whose fetch this worker is.
      process.title = `kiln-gateway-worker ${message.request.attemptId}`;
      void provide(message);
      return;
    case "credentials":
      credentials?.(message.grants);
      credentials = null;
      return;
    case "lockfile":
      lockfiles.get(message.id)?.(message.text);
      lockfiles.delete(message.id);
      return;
  }
});

async function provide(message: Extract<ToWorker, { type: "provide" }>): Promise<void> {
  try {
    const gateway = new DependencyGateway({
      ...message.config,
      // The host agent accounts the shared cache and evicts; a worker only stores.
      cacheMaxBytes: Number.POSITIVE_INFINITY,
      clock: systemClock,
      onCrateStored: (bytes) => void send({ type: "stored", bytes }),
    });
    const result = await gateway.provide({
      ...message.request,
      credentials: () =>
        new Promise((resolve) => {
          credentials = resolve;
          void send({ type: "credentials" });
        }),
      generateLockfile: (config, environment) =>
        new Promise((resolve) => {
          const id = nextLockfile++;
          lockfiles.set(id, resolve);
          void send({ type: "generate-lockfile", id, config, environment });
        }),
      log: (line) => void send({ type: "log", line }),
      // The agent ends the fetch by ending this process; nothing here aborts on its own.
      signal: new AbortController().signal,
    });
    await send({ type: "done", result });
    process.exit(0);
  } catch (error) {
    await send({
      type: "failed",
      kind: error instanceof GatewayError ? error.kind : null,
      message: error instanceof Error ? error.message : String(error),
    });
    process.exit(0);
  }
}
