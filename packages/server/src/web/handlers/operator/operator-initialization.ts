import { randomUUID } from "node:crypto";
import {
  appendOperatorAuditEntry,
  createHostEnrollmentToken,
  type HostInitializationRecord,
  readHostInitialization,
  startHostInitialization,
} from "@kiln/storage";
import { pendingLedger } from "../../../domain/hosts/fleet/initialization-ledger.js";
import { EMBEDDED_HOST_ID, ENROLLMENT_TOKEN_SECONDS, HOST_ID_PATTERN } from "../../../domain/hosts/host-identities.js";
import { hashToken, mintToken } from "../../../domain/identity/token-format.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

function initializationView(record: HostInitializationRecord) {
  return {
    host: record.hostId,
    operation: record.operation,
    state: record.state,
    started_by: record.startedBy,
    started_at: record.startedAt,
    finished_at: record.finishedAt,
    steps: record.steps,
    failure: record.failure,
    toolchains: record.toolchains,
    ...(record.note === null ? {} : { note: record.note }),
  };
}

/**
 * operator.hosts.initialization.start: records an initialization of the host — sandbox user,
 * bubblewrap present and usable, cgroup delegation, toolchains — which the host runs itself on
 * its next fleet poll (host/src/agent/fleet-channel.ts), reporting each step's outcome; no step
 * runs on the control plane. For a remote host not enrolled yet it also issues the host's
 * one-time bootstrap credential (an enrollment token, stored as a digest), shown once in this
 * answer: the host enrolls with it and then runs the initialization. A second start while one
 * is open, or a moved-past `expected_revision`, is `conflict`. Audited, refusals included.
 */
export const startInitialization: Handler<"operator.hosts.initialization.start"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const hostId = ctx.params.id;
  if (!HOST_ID_PATTERN.test(hostId)) {
    return refuse("invalid_request", `a host id must match ${HOST_ID_PATTERN.source}, got ${JSON.stringify(hostId)}`);
  }
  const { toolchains = [], expected_revision: expected, note } = ctx.body;
  const operation = `init-${randomUUID()}`;
  const result = await ctx.deps.storage.transaction(async (trx) => {
    const started = await startHostInitialization(trx, {
      operation,
      hostId,
      toolchains,
      steps: pendingLedger(),
      expectedRevision: expected ?? null,
      note: note ?? null,
      actor: operator.principal,
      action: ctx.op.id,
      now: ctx.now,
      rowLocks: ctx.deps.storage.capabilities.rowLocks,
    });
    let bootstrap: { token: string; expires_at: string } | null = null;
    if (started.kind === "started" && !started.enrolled && hostId !== EMBEDDED_HOST_ID) {
      const token = mintToken("enroll");
      const { expiresAt } = await createHostEnrollmentToken(trx, {
        tokenHash: hashToken(token),
        hostId,
        createdBy: operator.principal,
        ttlSeconds: ENROLLMENT_TOKEN_SECONDS,
        now: ctx.now,
      });
      bootstrap = { token, expires_at: expiresAt };
    }
    await appendOperatorAuditEntry(
      trx,
      {
        actor: operator.principal,
        target: `host:${hostId}`,
        value: operatorAuditValue(
          ctx.op.id,
          started.kind === "started" ? "performed" : "conflict",
          started.kind === "started"
            ? `initialization ${operation} recorded${toolchains.length > 0 ? ` (toolchains ${toolchains.join(", ")})` : ""}${bootstrap === null ? "" : `; bootstrap credential issued, expires ${bootstrap.expires_at}`}`
            : started.detail,
        ),
      },
      ctx.now,
    );
    return { started, bootstrap };
  });
  if (result.started.kind === "conflict") return refuse("conflict", result.started.detail);
  return {
    ...initializationView(result.started.initialization),
    bootstrap_credential:
      result.bootstrap === null
        ? null
        : {
            token: result.bootstrap.token,
            expires_at: result.bootstrap.expires_at,
            detail: "shown once: the host enrolls with it (kiln-host enroll) and then runs the initialization",
          },
  };
};

/** operator.hosts.initialization.observe: the host's newest initialization and its step ledger. */
export const observeInitialization: Handler<"operator.hosts.initialization.observe"> = async (ctx) => {
  const record = await readHostInitialization(ctx.db, { hostId: ctx.params.id });
  if (record === undefined)
    return refuse("operator_not_found", `no initialization of host ${ctx.params.id} was started`);
  return initializationView(record);
};
