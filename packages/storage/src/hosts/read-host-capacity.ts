import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** One host's capacity as measured now: what it offers, what runs on it, when it was last seen. */
export interface HostCapacityObservation {
  readonly id: string;
  readonly state: "serving" | "draining";
  readonly vcpus: number;
  readonly memoryBytes: number;
  readonly lastHeartbeatAt: string | null;
  /** Why the platform closed the host's admission on an impairment (apart from drain); null while open. */
  readonly admissionClosure: string | null;
  readonly runningAttempts: number;
  /** vCPUs its running attempts were placed with. */
  readonly vcpusInUse: number;
  /** Whether one of its running attempts holds an unexpired lease (the host renewed it lately). */
  readonly liveLease: boolean;
}

/**
 * Every host with what runs on it, in two statements over indexed columns (attempts_running
 * serves the running attempts), for execution capacity: no lock, a snapshot read.
 */
export async function readHostCapacity(
  target: StorageOrTransaction,
  input: { now: Date },
): Promise<HostCapacityObservation[]> {
  const db = executorOf(target);
  const now = formatTimestamp(input.now);
  const [hosts, running] = await Promise.all([
    db
      .selectFrom("hosts")
      .select([
        "id",
        "state",
        "vcpus",
        "memory_bytes",
        "last_heartbeat_at",
        "admission_closed_at",
        "admission_closure_reason",
      ])
      .orderBy("id")
      .execute(),
    db
      .selectFrom("attempts")
      .select([
        "host_id",
        (eb) => eb.fn.countAll<number | string | bigint>().as("n"),
        (eb) => eb.fn.sum<number | string | bigint>("vcpus").as("vcpus"),
        (eb) => eb.fn.max("lease_expires_at").as("newest_lease"),
      ])
      .where("state", "=", "running")
      .groupBy("host_id")
      .execute(),
  ]);
  const byHost = new Map(running.map((r) => [r.host_id, r]));
  return hosts.map((h) => {
    const r = byHost.get(h.id);
    return {
      id: h.id,
      state: h.state,
      vcpus: Number(h.vcpus),
      memoryBytes: Number(h.memory_bytes),
      lastHeartbeatAt: h.last_heartbeat_at,
      admissionClosure:
        h.admission_closed_at === null ? null : (h.admission_closure_reason ?? `closed at ${h.admission_closed_at}`),
      runningAttempts: Number(r?.n ?? 0),
      vcpusInUse: Number(r?.vcpus ?? 0),
      liveLease: r?.newest_lease !== undefined && r.newest_lease !== null && r.newest_lease > now,
    };
  });
}
