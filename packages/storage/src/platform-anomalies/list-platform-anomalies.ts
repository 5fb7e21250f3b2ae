import { executorOf, type StorageOrTransaction } from "../executor.js";

export interface PlatformAnomalyRecord {
  id: string;
  hostId: string;
  kind: string;
  evidence: { kind: string; detail: string; reference?: string; observed_at?: string }[];
  raisedAt: string;
  incidentId: string;
  disposition: { disposition: string; note: string | null; disposedBy: string; disposedAt: string } | null;
}

/** Platform anomalies, undisposed first, then newest first (or one, by id). Mutates nothing. */
export async function listPlatformAnomalies(
  target: StorageOrTransaction,
  input: { id?: string } = {},
): Promise<PlatformAnomalyRecord[]> {
  let query = executorOf(target).selectFrom("platform_anomalies").selectAll();
  if (input.id !== undefined) query = query.where("id", "=", input.id);
  const rows = await query.orderBy("raised_at", "desc").orderBy("id", "desc").execute();
  const records = rows.map((r) => ({
    id: r.id,
    hostId: r.host_id,
    kind: r.kind,
    evidence: JSON.parse(r.evidence) as PlatformAnomalyRecord["evidence"],
    raisedAt: r.raised_at,
    incidentId: r.incident_id,
    disposition:
      r.disposition === null || r.disposed_by === null || r.disposed_at === null
        ? null
        : {
            disposition: r.disposition,
            note: r.disposition_note,
            disposedBy: r.disposed_by,
            disposedAt: r.disposed_at,
          },
  }));
  return [...records.filter((r) => r.disposition === null), ...records.filter((r) => r.disposition !== null)];
}
