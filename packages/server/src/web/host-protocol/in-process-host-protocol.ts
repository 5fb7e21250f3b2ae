import type { HostProtocol } from "@kiln/host";
import type { HostService } from "../../domain/hosts/host-service.js";

/**
 * The host protocol bound in-process, for the embedded local host: each message goes straight
 * to the control plane's host service (domain/hosts/host-service.ts), which holds all of the logic.
 * A binding only moves messages; an HTTP binding for remote `kiln-host`s does the same over
 * the wire with the same contract schemas.
 */
export function inProcessHostProtocol(service: HostService): HostProtocol {
  return {
    enroll: (host) => service.enroll(host),
    claim: (hostId, freeVcpus, freeDiskBytes) => service.claim(hostId, freeVcpus, freeDiskBytes),
    heartbeat: (ref) => service.heartbeat(ref),
    appendLogs: (ref, lines) => service.appendLogs(ref, lines),
    fetchBlob: (sha256) => service.fetchBlob(sha256),
    putBlob: (bytes) => service.putBlob(bytes),
    finish: (ref, result) => service.finish(ref, result),
    registryCredentials: (ref) => service.registryCredentials(ref),
    acknowledgeCredentials: (hostId, held) => service.acknowledgeCredentials(hostId, held),
    fleetPoll: (poll) => service.fleet.poll(poll),
    reportInitialization: (report) => service.fleet.reportInitialization(report),
    answerRead: (answer) => service.fleet.answerRead(answer),
  };
}
