import type { TLSSocket } from "node:tls";
import type { Clock } from "@kiln/contract";
import type { Storage } from "@kiln/storage";
import type { FastifyRequest } from "fastify";
import { HostIdentityError } from "../../domain/hosts/host-identities.js";
import type { CertificateAuthority } from "../../domain/pki/certificate-authority.js";
import { Refusal } from "../../domain/refusal.js";
import { authenticateHostCertificate } from "./authenticate-host-certificate.js";

/** What the host listener authenticates hosts with: the CA, the clock and the client certificates' lifetime. */
export interface HostPki {
  readonly ca: CertificateAuthority;
  readonly clock: Clock;
  /** How long a host's client certificate is valid (KILN_HOST_CERTIFICATE_SECONDS). */
  readonly certificateLifetimeSeconds: number;
}

/** The bearer value of `Authorization` (the enrollment's one-time token), or a refusal naming what is missing. */
export function bearerOf(request: FastifyRequest): string {
  const header = request.headers.authorization;
  const match = typeof header === "string" ? /^Bearer ([^\s]+)$/.exec(header) : null;
  if (match?.[1] === undefined)
    throw new Refusal("unauthenticated", "the enrollment needs the one-time bootstrap credential");
  return match[1];
}

/** A HostIdentityError as the refusal the host hears (revoked and expired name when). */
export function refusalOf(error: unknown): unknown {
  if (!(error instanceof HostIdentityError)) return error;
  if (error.reason === "revoked" && error.at !== undefined) {
    return new Refusal("credential_revoked", error.message, { revoked_at: error.at });
  }
  if (error.reason === "expired" && error.at !== undefined) {
    return new Refusal("credential_expired", error.message, { expired_at: error.at });
  }
  return new Refusal("unauthenticated", error.message);
}

/**
 * Authenticates each request of the host protocol by its connection's client certificate
 * (web/host-protocol/authenticate-host-certificate.ts), before the body is parsed, checking revocation at
 * every request (a keep-alive connection authenticated once is not trusted after a revocation).
 */
export function hostAuthenticator(storage: Storage, pki: HostPki) {
  const hosts = new WeakMap<FastifyRequest, { hostId: string; serial: string }>();
  return {
    authenticate: async (request: FastifyRequest) => {
      const socket = request.raw.socket as TLSSocket;
      if (typeof socket.getPeerX509Certificate !== "function") {
        throw new Refusal("unauthenticated", "the host protocol is served over mutual TLS only");
      }
      try {
        hosts.set(request, await authenticateHostCertificate(storage, pki.ca, socket, pki.clock.now()));
      } catch (error) {
        throw refusalOf(error);
      }
    },
    /** The authenticated host and its certificate's serial (only after `authenticate` ran). */
    identityOf: (request: FastifyRequest): { hostId: string; serial: string } => {
      const identity = hosts.get(request);
      if (identity === undefined) throw new Error("a host protocol route ran without its host authenticated");
      return identity;
    },
  };
}
