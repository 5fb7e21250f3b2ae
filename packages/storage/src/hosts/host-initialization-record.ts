import type { ResponseDocumentOf } from "@kiln/contract";
import type { Selectable } from "kysely";
import type { HostInitializationsTable } from "../schema.js";

/** One step of an initialization's ledger, as the operator record shows it. */
export type InitializationLedgerStep = ResponseDocumentOf<"operator.hosts.initialization.observe">["steps"][number];

/** A recorded host initialization. */
export interface HostInitializationRecord {
  operation: string;
  hostId: string;
  state: HostInitializationsTable["state"];
  toolchains: string[];
  startedBy: string;
  startedAt: string;
  finishedAt: string | null;
  failure: string | null;
  steps: InitializationLedgerStep[];
  note: string | null;
}

export function hostInitializationOf(row: Selectable<HostInitializationsTable>): HostInitializationRecord {
  return {
    operation: row.operation,
    hostId: row.host_id,
    state: row.state,
    toolchains: JSON.parse(row.toolchains) as string[],
    startedBy: row.started_by,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    failure: row.failure,
    steps: JSON.parse(row.steps) as InitializationLedgerStep[],
    note: row.note,
  };
}
