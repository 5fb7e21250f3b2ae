import { HOST_OPERATOR_ROUTES } from "@kiln/contract";
import type { Static } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { HostRecoveryProtocolService } from "../../domain/hosts/recovery/host-recovery-protocol-service.js";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { hostAuthenticator } from "./authenticate-host.js";

type Routes = typeof HOST_OPERATOR_ROUTES;
type Perform = {
  [K in keyof Routes]: (hostId: string, body: Static<Routes[K]["body"]>) => Promise<unknown>;
};

/**
 * The host's health and recovery messages over HTTP (contract/src/host-operator-protocol.ts):
 * a kiln-host's health report and the host operator's messages. As for the rest of the host
 * protocol, each body is checked against its schema, each request is authenticated by the
 * host's client certificate, and a message naming a host must name the certificate's own; the
 * service records.
 */
export function registerHostOperatorRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  auth: Pick<ReturnType<typeof hostAuthenticator>, "authenticate" | "identityOf">,
): void {
  const service = new HostRecoveryProtocolService({ storage: deps.storage, clock: deps.clock, log: app.log });
  const sameHost = (host: string, named: string) => {
    if (named !== host)
      throw new Refusal("invalid_request", `body.hostId names host ${named}; this certificate is ${host}'s`);
  };
  // Every host-operator message names its host; the check is made once, below, for all of them.
  const perform: Perform = {
    health: (host, body) => service.health(host, body),
    readiness: (host, body) => service.readiness(host, body),
    claimRecovery: (host, body) => service.claim(host, body.instance),
    planRecovery: (host, body) => service.plan(host, body),
    beginStep: (host, body) => service.beginStep(host, body),
    endStep: (host, body) => service.endStep(host, body),
    finishRecovery: (host, body) => service.finish(host, body),
  };
  for (const [name, route] of Object.entries(HOST_OPERATOR_ROUTES) as [keyof Routes, Routes[keyof Routes]][]) {
    const run = perform[name] as (hostId: string, body: unknown) => Promise<unknown>;
    app.route({
      method: route.method,
      url: route.path,
      schema: { body: route.body },
      onRequest: auth.authenticate,
      handler: async (request: FastifyRequest, reply) => {
        const host = auth.identityOf(request).hostId;
        sameHost(host, (request.body as { hostId: string }).hostId);
        await send(reply, await run(host, request.body));
      },
    });
  }
}

async function send(reply: FastifyReply, answer: unknown): Promise<void> {
  if (answer === undefined) await reply.code(204).send();
  else await reply.code(200).type("application/json; charset=utf-8").send(JSON.stringify(answer));
}
