import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { OperatorAuditEntry } from "@kiln/contract";
import type { Storage } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";

/** The operator operations of `app` as a signed-in operator (a session opened with the bootstrap credential). */
export interface OperatorClient {
  get(url: string): Promise<LightMyRequestResponse>;
  post(url: string, body?: object): Promise<LightMyRequestResponse>;
  /** The operator audit's entries, newest first. */
  audit(): Promise<Static<typeof OperatorAuditEntry>[]>;
  /** `tenant`'s controls as the operator reads them (GET /operator/api/tenants/:tenant). */
  tenantControls(tenant: string): Promise<TenantControlsRead>;
  /** Changes `tenant`'s controls at `version`, their current one unless given; the answer as it came. */
  changeTenantControls(
    tenant: string,
    changes: Record<string, unknown>,
    version?: number,
  ): Promise<LightMyRequestResponse>;
}

/** What the tests read of a tenant's controls. */
export interface TenantControlsRead {
  version: number;
  consumption: { bandwidth_bytes_this_month: number };
}

/** A fresh bootstrap operator credential for `storage`, under a master key in a new temporary directory. */
export async function bootstrapOperatorCredential(storage: Storage, now: Date): Promise<string> {
  const key = masterKey(await mkdtemp(join(tmpdir(), "kiln-key-")));
  return operatorCredential(storage, key, false, now);
}

/**
 * Opens an operator session on `app` with `credential` and answers its request headers. Tests
 * whose clock moves past a session's lifetime open one per request with the same credential.
 */
export async function operatorSessionHeaders(
  app: FastifyInstance,
  credential: string,
): Promise<Record<string, string>> {
  const opened = await app.inject({
    method: "POST",
    url: "/operator/auth/session",
    headers: { authorization: `Bearer ${credential}` },
  });
  assert.equal(opened.statusCode, 204, opened.body);
  const cookie = opened.cookies.find((c) => c.name === "kiln_operator_session");
  assert.ok(cookie);
  return { cookie: `kiln_operator_session=${cookie.value}`, "sec-fetch-site": "same-origin" };
}

export async function operatorClient(app: FastifyInstance, storage: Storage, now: Date): Promise<OperatorClient> {
  const headers = await operatorSessionHeaders(app, await bootstrapOperatorCredential(storage, now));
  const get = (url: string) => app.inject({ method: "GET", url, headers });
  const post = (url: string, body?: object) =>
    app.inject({
      method: "POST",
      url,
      headers: body === undefined ? headers : { ...headers, "content-type": "application/json" },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  const tenantControls = async (tenant: string) =>
    (await get(`/operator/api/tenants/${tenant}`)).json() as TenantControlsRead;
  return {
    get,
    post,
    audit: async () => (await get("/operator/api/audit")).json() as Static<typeof OperatorAuditEntry>[],
    tenantControls,
    changeTenantControls: async (tenant, changes, version) =>
      post(`/operator/api/tenants/${tenant}`, {
        expected_version: version ?? (await tenantControls(tenant)).version,
        changes,
      }),
  };
}
