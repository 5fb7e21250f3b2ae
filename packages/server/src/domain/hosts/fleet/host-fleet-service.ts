import { randomUUID } from "node:crypto";
import type {
  Clock,
  HostFleetPoll,
  HostFleetWork,
  HostInitializationReport,
  HostInitializationReportAnswer,
  HostReadAnswer,
  HostReadAnswerAck,
  HostReadKind,
  Logger,
} from "@kiln/contract";
import { answerHostRead, recordHostFleetPoll, reportHostInitialization, type Storage } from "@kiln/storage";
import { ledgerOfReport } from "./initialization-ledger.js";

/**
 * The control plane's side of the host protocol's fleet messages: it hands a polling host the
 * initialization an operator started for it and the reads an operator waits on, and records
 * the ledger and the bytes the host answers. No step runs here, and nothing is read from the
 * host but what it answers.
 */
export class HostFleetService {
  constructor(private readonly deps: { readonly storage: Storage; readonly clock: Clock; readonly log: Logger }) {}

  async poll(poll: HostFleetPoll): Promise<HostFleetWork> {
    const work = await recordHostFleetPoll(this.deps.storage.db, { ...poll, now: this.deps.clock.now() });
    // Only operator-host-reads.ts records reads, and only of the kinds HostReadKind names.
    return {
      initialization: work.initialization,
      reads: work.reads.map((r) => ({ ...r, kind: r.kind as HostReadKind })),
    };
  }

  async reportInitialization(report: HostInitializationReport): Promise<HostInitializationReportAnswer["answer"]> {
    const { steps, state, failure } = ledgerOfReport(report.steps);
    const answer = await this.deps.storage.transaction((trx) =>
      reportHostInitialization(trx, {
        hostId: report.hostId,
        operation: report.operation,
        state,
        steps,
        failure,
        receiptId: `receipt-${randomUUID()}`,
        now: this.deps.clock.now(),
      }),
    );
    if (answer === "accepted" && state !== "running") {
      const log = state === "failed" ? this.deps.log.warn.bind(this.deps.log) : this.deps.log.info.bind(this.deps.log);
      log(
        { host: report.hostId, operation: report.operation },
        `host ${report.hostId} initialization ${report.operation} ${state}${failure === null ? "" : `: ${failure}`}`,
      );
    }
    return answer;
  }

  answerRead(answer: HostReadAnswer): Promise<HostReadAnswerAck["answer"]> {
    return answerHostRead(this.deps.storage, { ...answer, now: this.deps.clock.now() });
  }
}
