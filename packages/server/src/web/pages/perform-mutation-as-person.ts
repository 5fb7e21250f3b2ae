import { type BodyOf, type OperationId, operationById, type ParamsOf, type ResponseDocumentOf } from "@kiln/contract";
import { Refusal, type RefusalDocument } from "../../domain/refusal.js";
import { refuseCrossSite } from "../http/enforce-security.js";
import { performKeyed } from "../http/perform-keyed.js";
import { callAsPerson, type PageContext } from "./perform-as-person.js";

/** A form's idempotency key: what the API accepts in its `idempotency-key` header. */
const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;

/**
 * Performs a keyed tenant mutation (jobs.cancel, credentials.create, …) from a dashboard form, in-process
 * as the signed-in person. Over HTTP a session cookie reaches only the session-only operations,
 * jobs.logs, jobs.logs_stream and usage.export (spec, Authentication), so the dashboard performs
 * every other operation this way — through the same pieces the API route uses, not a copy:
 * the cross-site check every cookie mutation gets (CSRF), the operation's handler behind the
 * same scope check (a viewer is `role_required`), and performKeyed with the form's key, so a
 * double-submitted form performs once and replays the first answer.
 */
export async function performMutationAsPerson<Id extends OperationId>(
  ctx: PageContext,
  id: Id,
  input: { params: ParamsOf<Id>; body?: BodyOf<Id>; idempotencyKey: unknown },
): Promise<ResponseDocumentOf<Id>> {
  const op = operationById(id);
  if (op.method !== "POST" || !op.keyed || op.response.encoding !== "json" || op.security.kind !== "tenant") {
    throw new Error(`${id} is not a keyed tenant mutation a page may perform in-process`);
  }
  refuseCrossSite(ctx.request, ctx.deps.publicOrigin);
  const key = input.idempotencyKey;
  if (typeof key !== "string" || !KEY_SHAPE.test(key)) {
    throw new Refusal("idempotency_key_required", "the form carries no idempotency key; reload the page");
  }
  const params = input.params as Record<string, unknown>;
  const body = input.body as unknown;
  const committed: (() => void)[] = [];
  const outcome = await performKeyed(
    ctx.deps.storage,
    {
      tenantId: ctx.person.tenantId,
      key,
      operation: op.id,
      request: { params, query: {}, body },
      now: ctx.deps.clock.now(),
      shownOnce: op.shownOnce ?? [],
    },
    async (db) => {
      const result = await callAsPerson(ctx, op, { params, body }, db, key, (effect) => committed.push(effect));
      return { status: 200, body: JSON.stringify(result) };
    },
  );
  for (const effect of committed) {
    // As the API route: the mutation committed; a failing after-commit effect is logged, not answered.
    try {
      effect();
    } catch (error) {
      ctx.request.log.error({ err: error, operation: op.id }, "an effect after commit failed");
    }
  }
  const document = JSON.parse(outcome.body) as unknown;
  if (outcome.status >= 400) {
    // The key's kept answer was a refusal (now or on the first submission): it is refused again.
    const refused = document as RefusalDocument;
    const { code, status: _status, detail, ...extras } = refused;
    throw new Refusal(code, detail, extras);
  }
  return document as ResponseDocumentOf<Id>;
}
