import { availableParallelism } from "node:os";
import type { Readable } from "node:stream";
import type { Clock, Operation } from "@kiln/contract";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Refusal } from "../../domain/refusal.js";
import { isPreparedOperation, LARGE_BODY_BYTES, preparationOf } from "./body-preparations.js";
import type { BodyAnswer } from "./body-worker.js";
import { BodyWorkerPool } from "./body-worker-pool.js";
import { readJsonBodyText } from "./json-body-text.js";
import { LargeRequestAdmission } from "./large-request-admission.js";
import { receiveBytes } from "./received-bytes.js";
import { checkedElsewhere } from "./request-validators.js";
import { type TenantIngress, TenantIngressShaper } from "./tenant-ingress-shaper.js";
import { readWholeBody } from "./whole-body.js";

/** How the app reads large bodies: the workers (null: on the event loop) and the per-tenant bound. */
export interface LargeBodies {
  readonly pool: BodyWorkerPool | null;
  readonly admission: LargeRequestAdmission;
  /** Bodies above this many bytes are large (LARGE_BODY_BYTES). */
  readonly thresholdBytes: number;
  /** Each tenant's bodies read at most at a rate (tenant-ingress-shaper.ts); null: as fast as they come. */
  readonly ingress: TenantIngressShaper | null;
}

/** The default number of body workers: the cores the event loop leaves, one or two. */
export const defaultBodyWorkers = () => Math.max(1, Math.min(2, availableParallelism() - 1));

/** The default bound on one tenant's large requests in flight in one process. */
export const DEFAULT_LARGE_REQUESTS_PER_TENANT = 2;

export function largeBodiesOf(options: {
  bodyWorkers?: number;
  largeRequestsPerTenant?: number;
  tenantIngress?: TenantIngress;
  clock: Clock;
}): LargeBodies {
  const workers = options.bodyWorkers ?? defaultBodyWorkers();
  const ingress = options.tenantIngress;
  return {
    ingress:
      ingress === undefined
        ? null
        : new TenantIngressShaper(ingress.bytesPerSecond, ingress.burstBytes, options.clock, ingress.unsharedTenants),
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
 * as a body read here (`large` absent: every body is read here).
 *
 * Raw bytes (application/octet-stream) are capped by the route's bodyLimit. With a
 * `stagingDirectory` (the blob store's), a bytes operation's body (sources.chunk.put) is
 * streamed there and hashed as it arrives, and reaches the route as `ReceivedBytes`
 * (received-bytes.ts), its staging file removed once the response is done; without one, and for
 * any other route, the bytes arrive as a Buffer.
 */
export function installBodyParsers(app: FastifyInstance, large?: LargeBodies, stagingDirectory?: string): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", async (request: FastifyRequest, payload: Readable) => {
    const body = await readWholeBody(payload, bodyLengthsOf(request));
    const operation = operationIdOf(request);
    if (
      large?.pool != null &&
      body.length > large.thresholdBytes &&
      operation !== undefined &&
      isPreparedOperation(operation)
    ) {
      const tenant = request.kiln?.principal?.tenantId ?? "";
      return delivered(request, operation, await large.pool.read(tenant, operation, body));
    }
    const read = readJsonBodyText(body.toString("utf8"));
    if (read.kind === "empty") return undefined;
    if (read.kind === "refused") throw new Refusal("invalid_request", read.detail);
    return read.value;
  });
  if (stagingDirectory === undefined) {
    app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_request, body, done) => {
      done(null, body);
    });
    return;
  }
  app.addContentTypeParser("application/octet-stream", async (request: FastifyRequest, payload: Readable) => {
    const options = bodyLengthsOf(request);
    if (!takesBytes(request)) return readWholeBody(payload, options);
    const received = await receiveBytes(payload, { ...options, directory: stagingDirectory });
    // The staging file goes once the response is done, stored or refused (or the client gone).
    request.kiln.whenClosed(() => {
      received.discard().catch((error: unknown) => {
        request.log.error({ err: error }, "removing a received part's staging file failed");
      });
    });
    return received;
  });
}

/** Fastify's default body limit, for a route that sets none. */
const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** Whether the request's route is a catalogued operation with a bytes body (sources.chunk.put). */
const takesBytes = (request: FastifyRequest): boolean =>
  (request.routeOptions.config as { operation?: Operation } | undefined)?.operation?.request.body?.encoding === "bytes";

/** The route's body limit and the request's declared length (NaN: none), as the body readers take them. */
const bodyLengthsOf = (request: FastifyRequest) => ({
  limit: request.routeOptions.bodyLimit ?? DEFAULT_BODY_LIMIT,
  contentLength: Number(request.headers["content-length"] ?? Number.NaN),
});

/** A body worker's answer as the route's parse step: no body, a refusal, or a body with the worker's verdict. */
function delivered(
  request: FastifyRequest,
  operation: Parameters<typeof preparationOf>[0],
  answer: BodyAnswer,
): unknown {
  switch (answer.kind) {
    case "empty":
      return undefined;
    case "refused":
      throw new Refusal("invalid_request", answer.detail);
    case "invalid":
      // A stand-in body: the route's validator answers the worker's errors for it.
      return checkedElsewhere({}, answer.errors as never);
    case "valid": {
      const body = answer.body as object;
      preparationOf(operation).restore(body, answer.prepared);
      request.preparedBody = { operation, prepared: answer.prepared };
      return checkedElsewhere(body, null);
    }
    case "failed":
      throw new Error(`the body worker failed reading a ${operation} body: ${answer.message}`);
  }
}
