import { HOST_OPERATOR_ROUTES } from "@kiln/contract";
import type { Static } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppDeps } from "../deps.js";
import { hostOfCredential } from "../hosts/host-identities.js";
import { HostRecoveryProtocolService } from "../hosts/recovery/host-recovery-protocol-service.js";
import { Refusal } from "../http/refusal.js";
import { bearerOf, refusalOf } from "./http-host-routes.js";

type Routes = typeof HOST_OPERATOR_ROUTES;
type Perform = {
  [K in keyof Routes]: (hostId: string, body: Static<Routes[K]["body"]>) => Promise<unknown>;
};

/**
 * The host's health and recovery messages over HTTP (contract/src/host-operator-protocol.ts):
 * a kiln-host's health report and the host operator's messages. As for the rest of the host
 * protocol, each body is checked against its schema, each request presents the host's
 * credential, and a message naming a host must name the credential's own; the service records.
 */
export function registerHostOperatorRoutes(app: FastifyInstance, deps: AppDeps): void {
  const service = new HostRecoveryProtocolService({ storage: deps.storage, clock: deps.clock, log: app.log });
  const hosts = new WeakMap<FastifyRequest, string>();
  const authenticate = async (request: FastifyRequest) => {
    try {
      hosts.set(request, await hostOfCredential(deps.storage, bearerOf(request)));
    } catch (error) {
      throw refusalOf(error);
    }
  };
  const sameHost = (host: string, named: string) => {
    if (named !== host)
      throw new Refusal("invalid_request", `body.hostId names host ${named}; this credential is ${host}'s`);
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
      onRequest: authenticate,
      handler: async (request, reply) => {
        const host = hosts.get(request);
        if (host === undefined) throw new Error("a host operator route ran without its host authenticated");
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
