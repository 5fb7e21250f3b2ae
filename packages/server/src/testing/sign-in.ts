import assert from "node:assert/strict";
import type { Clock } from "@kiln/contract";
import type { Storage } from "@kiln/storage";
import type { FastifyInstance } from "fastify";
import { mintSignInLink } from "../admin/mint-sign-in-link.js";

/** Opens a real one-time sign-in link and returns the `kiln_session` cookie it set. */
export async function signIn(
  app: FastifyInstance,
  storage: Storage,
  email: string,
  tenant?: string,
  clock?: Pick<Clock, "now">,
): Promise<string> {
  const link = new URL(await mintSignInLink(storage, "http://kiln.test", email, tenant, clock));
  const res = await app.inject({ method: "GET", url: `${link.pathname}${link.search}` });
  assert.equal(res.statusCode, 303, res.body);
  const cookie = res.cookies.find((c) => c.name === "kiln_session");
  assert.ok(cookie, "sign-in set no kiln_session cookie");
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, "Lax");
  return cookie.value;
}
