import { availableParallelism } from "node:os";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { isPreparedOperation, LARGE_BODY_BYTES, preparationOf } from "./body-preparations.js";
import type { BodyAnswer } from "./body-worker.js";
import { BodyWorkerPool } from "./body-worker-pool.js";
import { readJsonBodyText } from "./json-body-text.js";
import { LargeRequestAdmission } from "./large-request-admission.js";
import { Refusal } from "./refusal.js";
import { checkedElsewhere } from "./request-validators.js";

/** How the app reads large bodies: the workers (null: on the event loop) and the per-tenant bound. */
export interface LargeBodies {
  readonly pool: BodyWorkerPool | null;
  readonly admission: LargeRequestAdmission;
  /** Bodies above this many bytes are large (LARGE_BODY_BYTES). */
  readonly thresholdBytes: number;
}

/** The default number of body workers: the cores the event loop leaves, one or two. */
export const defaultBodyWorkers = () => Math.max(1, Math.min(2, availableParallelism() - 1));

/** The default bound on one tenant's large requests in flight in one process. */
export const DEFAULT_LARGE_REQUESTS_PER_TENANT = 2;

export function largeBodiesOf(options: { bodyWorkers?: number; largeRequestsPerTenant?: number }): LargeBodies {
  const workers = options.bodyWorkers ?? defaultBodyWorkers();
  return {
    pool: workers > 0 ? new BodyWorkerPool(workers) : null,
    admission: new LargeRequestAdmission(options.largeRequestsPerTenant ?? DEFAULT_LARGE_REQUESTS_PER_TENANT),
    thresholdBytes: LARGE_BODY_BYTES,
  };
}

/** The catalogued operation a request's route serves (bind-catalogue-routes.ts puts it in the route's config). */
const operationIdOf = (request: FastifyRequest): string | undefined =>
  (request.routeOptions.config as { operation?: { id: string } } | undefined)?.operation?.id;

/**
 * JSON bodies, read by readJsonBodyText: an empty body is no body; a body nested too deep or
 * not JSON is invalid_request. A body above the large-body threshold of an operation with a
 * body preparation (jobs.submit, sources.reserve) is read by a body worker instead — parsed,
 * checked against its schema and prepared there — and reaches the route as the worker's verdict
 * (request-validators.ts checkedElsewhere), so its refusals are the same, made at the same step,
 * as a body read here (`large` absent: every body is read here). Raw bytes for source chunks
 * arrive as a Buffer, capped by the route's bodyLimit.
 */
export function installBodyParsers(app: FastifyInstance, large?: LargeBodies): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, bytes, done) => {
    const body = bytes as Buffer;
    const operation = operationIdOf(request);
    if (
      large?.pool != null &&
      body.length > large.thresholdBytes &&
      operation !== undefined &&
      isPreparedOperation(operation)
    ) {
      const tenant = request.kiln?.principal?.tenantId ?? "";
      large.pool.read(tenant, operation, body).then(
        (answer) => deliver(request, operation, answer, done),
        (error: unknown) => done(error instanceof Error ? error : new Error(String(error)), undefined),
      );
      return;
    }
    const read = readJsonBodyText(body.toString("utf8"));
    if (read.kind === "empty") done(null, undefined);
    else if (read.kind === "refused") done(new Refusal("invalid_request", read.detail), undefined);
    else done(null, read.value);
  });
  app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_request, body, done) => {
    done(null, body);
  });
}

/** A body worker's answer as the route's parse step: no body, a refusal, or a body with the worker's verdict. */
function deliver(
  request: FastifyRequest,
  operation: Parameters<typeof preparationOf>[0],
  answer: BodyAnswer,
  done: (error: Error | null, body?: unknown) => void,
): void {
  switch (answer.kind) {
    case "empty":
      done(null, undefined);
      return;
    case "refused":
      done(new Refusal("invalid_request", answer.detail), undefined);
      return;
    case "invalid":
      // A stand-in body: the route's validator answers the worker's errors for it.
      done(null, checkedElsewhere({}, answer.errors as never));
      return;
    case "valid": {
      const body = answer.body as object;
      preparationOf(operation).restore(body, answer.prepared);
      request.preparedBody = { operation, prepared: answer.prepared };
      done(null, checkedElsewhere(body, null));
      return;
    }
    case "failed":
      done(new Error(`the body worker failed reading a ${operation} body: ${answer.message}`), undefined);
      return;
  }
}
