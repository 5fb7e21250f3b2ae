import { appendOperatorAuditEntry, createSession, endSession } from "@kiln/storage";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import {
  clearSessionCookie,
  cookieOf,
  OPERATOR_SESSION_COOKIE,
  OPERATOR_SESSION_SECONDS,
  setSessionCookie,
} from "../../auth/session-cookies.js";
import { hashSecret, mintSecret } from "../../auth/session-secret.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/** operator.session.create: the bootstrap credential (checked by security) opens a session. */
export const createOperatorSession: Handler<"operator.session.create"> = async (ctx) => {
  const value = mintSecret();
  const { id } = await createSession(
    ctx.db,
    {
      kind: "operator",
      tokenHash: hashSecret(value),
      tenantId: null,
      personId: null,
      expiresAt: new Date(ctx.now.getTime() + OPERATOR_SESSION_SECONDS * 1000),
    },
    ctx.clock.now(),
  );
  await appendOperatorAuditEntry(
    ctx.db,
    {
      actor: `operator:${id}`,
      target: `session:${id}`,
      value: operatorAuditValue(ctx.op.id, "performed", `from ${ctx.request.ip}`),
    },
    ctx.clock.now(),
  );
  setSessionCookie(ctx.request, ctx.reply, OPERATOR_SESSION_COOKIE, value, OPERATOR_SESSION_SECONDS);
  return undefined;
};

/** operator.session.delete: ends the operator session presented. */
export const deleteOperatorSession: Handler<"operator.session.delete"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const cookie = cookieOf(ctx.request, OPERATOR_SESSION_COOKIE);
  if (cookie !== null) await endSession(ctx.db, hashSecret(cookie), ctx.clock.now());
  await appendOperatorAuditEntry(
    ctx.db,
    {
      actor: operator.principal,
      target: `session:${operator.sessionId}`,
      value: operatorAuditValue(ctx.op.id, "performed"),
    },
    ctx.clock.now(),
  );
  clearSessionCookie(ctx.reply, OPERATOR_SESSION_COOKIE);
  return undefined;
};
