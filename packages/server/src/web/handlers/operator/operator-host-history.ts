import { listHostTransitions } from "@kiln/storage";
import type { Handler } from "../../http/handler.js";

/** The most transitions one read answers; the newest are the ones an operator looks for. */
const HISTORY_LIMIT = 500;

/**
 * operator.hosts.history: every recorded host transition, newest first — enrollment, drain and
 * undrain, deployment registered, initialization started and finished — each with who, when,
 * the action and the host revision it moved the host to. Reading mutates nothing.
 */
export const hostHistory: Handler<"operator.hosts.history"> = async (ctx) =>
  (await listHostTransitions(ctx.db, { limit: HISTORY_LIMIT })).map((t) => ({
    host: t.host,
    from: t.from,
    to: t.to,
    at: t.at,
    actor: t.actor,
    action: t.action,
    revision: t.revision,
    ...(t.reason === null ? {} : { reason: t.reason }),
  }));
