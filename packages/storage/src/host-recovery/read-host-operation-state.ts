import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { HostIncidentRecord } from "../host-incidents/host-incident-records.js";
import { readOpenHostIncident } from "../host-incidents/read-host-incident.js";

/** The host operator's readiness as last recorded; never the provider identity itself. */
export interface HostOperatorReadinessRecord {
  instance: string;
  startedAt: string;
  environment: string;
  hostReported: string;
  provisioningBundleSha256: string;
  recoveryBindingLoaded: boolean;
  installation: string | null;
  providerIdentityReadable: boolean;
  provider: string;
  providerServiceName: string;
  boot: string;
  bootSince: string;
  recordedAt: string;
}

/** A host's admission, host operation revision, recovery policy, operator readiness and open incident. */
export interface HostOperationState {
  hostId: string;
  admission: { open: boolean; closedBy: string | null; closedAt: string | null; closureReason: string | null };
  operationRevision: number;
  /** null while no policy is set. */
  policy: { automatic: boolean; revision: number; changedBy: string | null; changedAt: string | null } | null;
  readiness: HostOperatorReadinessRecord | null;
  openIncident: HostIncidentRecord | null;
  lastHeartbeatAt: string | null;
}

/** Reads it; undefined for a host kiln has no record of. Mutates nothing. */
export async function readHostOperationState(
  target: StorageOrTransaction,
  hostId: string,
): Promise<HostOperationState | undefined> {
  const db = executorOf(target);
  const host = await db.selectFrom("hosts").selectAll().where("id", "=", hostId).executeTakeFirst();
  if (host === undefined) return undefined;
  const readiness = await db
    .selectFrom("host_operator_readiness")
    .selectAll()
    .where("host_id", "=", hostId)
    .executeTakeFirst();
  return {
    hostId,
    admission: {
      open: host.admission_closed_at === null,
      closedBy: host.admission_closed_by,
      closedAt: host.admission_closed_at,
      closureReason: host.admission_closure_reason,
    },
    operationRevision: Number(host.operation_revision),
    policy:
      host.recovery_policy_automatic === null
        ? null
        : {
            automatic: Number(host.recovery_policy_automatic) === 1,
            revision: Number(host.recovery_policy_revision),
            changedBy: host.recovery_policy_changed_by,
            changedAt: host.recovery_policy_changed_at,
          },
    readiness:
      readiness === undefined
        ? null
        : {
            instance: readiness.instance,
            startedAt: readiness.started_at,
            environment: readiness.environment,
            hostReported: readiness.host_reported,
            provisioningBundleSha256: readiness.provisioning_bundle_sha256,
            recoveryBindingLoaded: Number(readiness.recovery_binding_loaded) === 1,
            installation: readiness.installation,
            providerIdentityReadable: Number(readiness.provider_identity_readable) === 1,
            provider: readiness.provider,
            providerServiceName: readiness.provider_service_name,
            boot: readiness.boot,
            bootSince: readiness.boot_since,
            recordedAt: readiness.recorded_at,
          },
    openIncident: (await readOpenHostIncident(db, hostId)) ?? null,
    lastHeartbeatAt: host.last_heartbeat_at,
  };
}
