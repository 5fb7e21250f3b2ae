import {
  type AttemptClaim,
  type AttemptRef,
  type AttemptResult,
  HOST_PROTOCOL_PATHS,
  HOST_PROTOCOL_ROUTES,
  type HostCertificateIssued,
  HostCertificateRequest,
  type Logger,
  MAX_HOST_BLOB_BYTES,
  MAX_HOST_MESSAGE_BYTES,
  Sha256Hex,
} from "@kiln/contract";
import { findAttemptHost } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { enrollHost, type IssuedHostCertificate, renewHost } from "../../domain/hosts/host-identities.js";
import { HostService, type HostServiceEvent } from "../../domain/hosts/host-service.js";
import { CertificateRequestError } from "../../domain/pki/certificate-authority.js";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import { bearerOf, type HostPki, hostAuthenticator, refusalOf } from "./authenticate-host.js";
import { registerHostOperatorRoutes } from "./http-host-operator-routes.js";

const JSON_TYPE = "application/json; charset=utf-8";

type Routes = typeof HOST_PROTOCOL_ROUTES;
/** Every message but the claim, which is answered through its exchange (below). */
type Forwarded = Exclude<keyof Routes, "claim">;
type Perform = {
  [K in Forwarded]: (hostId: string, body: Static<Routes[K]["body"]>) => Promise<unknown>;
};

/**
 * The host protocol over HTTP (contract/src/host-protocol-http.ts), for remote `kiln-host`s.
 * Like the in-process binding it only moves messages to the host service, which holds all of
 * the logic; what it adds is the transport's own checks: each body against its contract schema
 * (Fastify's ajv, as for the public API), and who is speaking. Registered on the host listener
 * (host-listener.ts), whose connections are mutual TLS: every request but the enrollment and
 * the CA certificate is authenticated by the host's client certificate, before the body is
 * parsed; a message naming a host names the certificate's own, and a report on an attempt is
 * taken only from the host the attempt was placed on (an attempt's host never changes; the
 * lease token still fences the report itself). Not tenant operations: not in the catalogue or
 * the OpenAPI document.
 */
export function registerHostProtocolRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  pki: HostPki,
  options: {
    /** Where the host service logs (a listener's Fastify logs nothing: it is made with logger off). */
    readonly log?: Logger;
    readonly onEvent?: (event: HostServiceEvent) => void;
  } = {},
): HostService {
  const { authenticate, identityOf } = hostAuthenticator(deps.storage, pki);
  registerHostOperatorRoutes(app, deps, { authenticate, identityOf });
  const service = new HostService({
    storage: deps.storage,
    blobs: deps.blobs,
    clock: deps.clock,
    log: options.log ?? app.log,
    ...(deps.notifications === undefined ? {} : { notifications: deps.notifications }),
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
    ...(deps.storageQuotaBytes === undefined ? {} : { storageQuotaBytes: deps.storageQuotaBytes }),
    ...(deps.lineageAffinitySeconds === undefined ? {} : { lineageAffinitySeconds: deps.lineageAffinitySeconds }),
    ...(deps.secrets === undefined ? {} : { secrets: deps.secrets }),
  });
  const hostOf = (request: FastifyRequest): string => identityOf(request).hostId;
  const sameHost = (host: string, named: string, field: string) => {
    if (named !== host)
      throw new Refusal("invalid_request", `${field} names host ${named}; this certificate is ${host}'s`);
  };
  const issuedAnswer = (issued: IssuedHostCertificate): HostCertificateIssued => ({
    hostId: issued.hostId,
    certificate: issued.certificatePem,
    caCertificate: pki.ca.certificatePem,
    notAfter: issued.notAfter,
  });
  // A signing request the CA will not sign is the caller's mistake, named; the rest as identities.
  const asRefusal = (error: unknown) =>
    error instanceof CertificateRequestError ? new Refusal("invalid_request", error.message) : refusalOf(error);
  const holds = async (host: string, ref: AttemptRef) => {
    const placedOn = await findAttemptHost(deps.storage, ref);
    if (placedOn !== undefined && placedOn !== host) {
      throw new Refusal("not_found", `host ${host} holds no attempt ${ref.attempt} of job ${ref.jobId}`);
    }
  };

  const perform: Perform = {
    enroll: async (host, body) => {
      sameHost(host, body.id, "body.id");
      await service.enroll(body);
    },
    heartbeat: async (host, ref) => {
      await holds(host, ref);
      return { answer: await service.heartbeat(ref) };
    },
    appendLogs: async (host, body) => {
      await holds(host, body.ref);
      return { answer: await service.appendLogs(body.ref, body.lines) };
    },
    finish: async (host, body) => {
      await holds(host, body.ref);
      // The service checks the result against AttemptResult itself (a mismatch fails the job).
      return { answer: await service.finish(body.ref, body.result as AttemptResult) };
    },
    registryCredentials: async (host, ref) => {
      await holds(host, ref);
      return { grants: await service.registryCredentials(ref) };
    },
    acknowledgeCredentials: async (host, body) => {
      sameHost(host, body.hostId, "body.hostId");
      await service.acknowledgeCredentials(host, body.held);
    },
    fleetPoll: async (host, body) => {
      sameHost(host, body.hostId, "body.hostId");
      return service.fleet.poll(body);
    },
    reportInitialization: async (host, body) => {
      sameHost(host, body.hostId, "body.hostId");
      return { answer: await service.fleet.reportInitialization(body) };
    },
    answerRead: async (host, body) => {
      sameHost(host, body.hostId, "body.hostId");
      return { answer: await service.fleet.answerRead(body) };
    },
  };

  // The claim, which may wait (the long-poll): the service decides and places; the binding only
  // says when the host has gone (its response closed before it was written: the signal) and
  // writes the answer, telling the service whether it was written whole.
  app.route({
    method: HOST_PROTOCOL_ROUTES.claim.method,
    url: HOST_PROTOCOL_ROUTES.claim.path,
    schema: { body: HOST_PROTOCOL_ROUTES.claim.body },
    bodyLimit: MAX_HOST_MESSAGE_BYTES,
    onRequest: authenticate,
    handler: async (request, reply) => {
      const host = hostOf(request);
      const body = request.body as AttemptClaim;
      sameHost(host, body.hostId, "body.hostId");
      const gone = new AbortController();
      const onClose = () => {
        if (!reply.raw.writableFinished) gone.abort();
      };
      reply.raw.once("close", onClose);
      if (reply.raw.destroyed) gone.abort();
      try {
        await service.answerClaim(
          { ...body, hostId: host },
          { signal: gone.signal, deliver: (answer) => deliver(reply, answer) },
        );
      } finally {
        reply.raw.off("close", onClose);
      }
      return reply;
    },
  });

  for (const [name, route] of Object.entries(HOST_PROTOCOL_ROUTES).filter(([name]) => name !== "claim") as [
    Forwarded,
    Routes[Forwarded],
  ][]) {
    const run = perform[name] as (hostId: string, body: unknown) => Promise<unknown>;
    app.route({
      method: route.method,
      url: route.path,
      schema: { body: route.body },
      bodyLimit: MAX_HOST_MESSAGE_BYTES,
      onRequest: authenticate,
      handler: async (request, reply) => {
        const answer = await run(hostOf(request), request.body);
        await sendAnswer(reply, answer);
      },
    });
  }

  app.route({
    method: "GET",
    url: HOST_PROTOCOL_PATHS.blob,
    schema: { params: Type.Object({ sha256: Sha256Hex() }, { additionalProperties: false }) },
    onRequest: authenticate,
    handler: async (request, reply) => {
      const { sha256 } = request.params as { sha256: string };
      let bytes: Buffer;
      try {
        bytes = await service.fetchBlob(sha256);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") throw new Refusal("not_found", `no blob ${sha256}`);
        throw error;
      }
      await reply.code(200).type("application/octet-stream").send(bytes);
    },
  });

  app.route({
    method: "PUT",
    url: HOST_PROTOCOL_PATHS.blobs,
    bodyLimit: MAX_HOST_BLOB_BYTES,
    onRequest: authenticate,
    handler: async (request, reply) => {
      if (!Buffer.isBuffer(request.body)) {
        throw new Refusal("invalid_request", "a blob is sent as application/octet-stream bytes");
      }
      await sendAnswer(reply, await service.putBlob(request.body));
    },
  });

  app.route({
    method: "GET",
    url: HOST_PROTOCOL_PATHS.identity,
    onRequest: authenticate,
    handler: async (request, reply) => sendAnswer(reply, { hostId: hostOf(request) }),
  });

  app.route({
    method: "GET",
    url: HOST_PROTOCOL_PATHS.ca,
    handler: async (_request, reply) =>
      sendAnswer(reply, { caCertificate: pki.ca.certificatePem, sha256: pki.ca.certificateSha256 }),
  });

  // The enrollment: the one-time bootstrap credential and the host's signing request, no client
  // certificate (the host has none yet).
  app.route({
    method: "POST",
    url: HOST_PROTOCOL_PATHS.enrollment,
    schema: { body: HostCertificateRequest },
    onRequest: async (request) => {
      bearerOf(request);
    },
    handler: async (request, reply) => {
      const { csr } = request.body as HostCertificateRequest;
      try {
        const issued = await enrollHost(deps.storage, pki.ca, {
          token: bearerOf(request),
          csrPem: csr,
          lifetimeSeconds: pki.certificateLifetimeSeconds,
          now: pki.clock.now(),
        });
        await sendAnswer(reply, issuedAnswer(issued));
      } catch (error) {
        throw asRefusal(error);
      }
    },
  });

  // The renewal, over the host's current (unrevoked, unexpired) certificate.
  app.route({
    method: "POST",
    url: HOST_PROTOCOL_PATHS.certificate,
    schema: { body: HostCertificateRequest },
    onRequest: authenticate,
    handler: async (request, reply) => {
      const { hostId, serial } = identityOf(request);
      const { csr } = request.body as HostCertificateRequest;
      try {
        const issued = await renewHost(deps.storage, pki.ca, {
          hostId,
          serial,
          csrPem: csr,
          lifetimeSeconds: pki.certificateLifetimeSeconds,
          now: pki.clock.now(),
        });
        await sendAnswer(reply, issuedAnswer(issued));
      } catch (error) {
        throw asRefusal(error);
      }
    },
  });
  return service;
}

/**
 * Writes a claim's answer; resolves true once it was handed whole to the connection ('finish'),
 * false when the connection closed first or was already gone (nothing is written then, and the
 * reply is taken from Fastify, which has no one left to answer).
 */
function deliver(reply: FastifyReply, answer: unknown): Promise<boolean> {
  const raw = reply.raw;
  if (raw.destroyed) {
    reply.hijack();
    return Promise.resolve(false);
  }
  return new Promise<boolean>((resolve) => {
    raw.once("finish", () => resolve(true));
    raw.once("close", () => resolve(raw.writableFinished));
    void reply.code(200).type(JSON_TYPE).send(JSON.stringify(answer));
  });
}

async function sendAnswer(reply: FastifyReply, answer: unknown): Promise<void> {
  if (answer === undefined) await reply.code(204).send();
  else await reply.code(200).type(JSON_TYPE).send(JSON.stringify(answer));
}
