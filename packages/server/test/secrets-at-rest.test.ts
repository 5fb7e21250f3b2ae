import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import { addPersonToTenant, createTenant, type Database, type Storage } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { mintSignInLink } from "../src/admin/mint-sign-in-link.js";
import { bearer, testApp } from "../src/testing/harness.js";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";

/**
 * Every secret kiln issues — device codes, CLI tokens, agent credentials, sign-in link tokens,
 * session cookies, the operator credential and operator session cookies — is stored only as
 * its SHA-256 digest, and never reaches the logs or the audit trail. This issues one of each
 * through the real flows, then reads every table, the trace-level log and the audit lists.
 */

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex");

/** The tables the schema declares; the dump must cover each (it may find more). */
const DECLARED_TABLES = [
  "tenants",
  "persons",
  "memberships",
  "repositories",
  "idempotency_keys",
  "audit_entries",
  "operator_audit_entries",
  "cli_tokens",
  "agent_credentials",
  "sessions",
  "sign_in_links",
  "device_authorizations",
  "rate_windows",
  "operator_credentials",
  "registry_credentials",
] as const satisfies readonly (keyof Database)[];

function text(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (Buffer.isBuffer(value)) return `${value.toString("utf8")} ${value.toString("hex")} ${value.toString("base64")}`;
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** Every column value of every table (sqlite_master / information_schema, through Kysely's introspection). */
async function dumpDatabase(storage: Storage): Promise<{ tables: string[]; cells: string[] }> {
  const tables = await storage.db.introspection.getTables({ withInternalKyselyTables: true });
  const cells: string[] = [];
  const names: string[] = [];
  for (const table of tables) {
    const name = table.schema === undefined ? table.name : `${table.schema}.${table.name}`;
    names.push(table.name);
    const rows = (await storage.db
      .selectFrom(name as keyof Database)
      .selectAll()
      .execute()) as Record<string, unknown>[];
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) cells.push(`${table.name}.${column}=${text(value)}`);
    }
  }
  return { tables: names, cells };
}

function cookieValue(res: LightMyRequestResponse, name: string): string {
  const cookie = res.cookies.find((c) => c.name === name);
  assert.ok(cookie !== undefined && cookie.value !== "", `no ${name} cookie in ${JSON.stringify(res.headers)}`);
  return cookie.value;
}

for (const dialect of DIALECTS) {
  describe(`secrets at rest (${dialect.name})`, { skip: dialect.skip }, () => {
    let storage: Storage;
    let app: FastifyInstance;
    let keyDir: string;
    let closed = false;
    // The sign-in link's expiry is taken from the wall clock, so the test clock starts there.
    const clock = ManualClock.withRealTimers(new Date());
    const logLines: string[] = [];
    /** name → the secret value as issued. */
    const secrets = new Map<string, string>();
    /** A secret kiln must read again: kept sealed under the master key, not as a digest. */
    const registryAuthorization = `Bearer private-registry-${randomBytes(16).toString("hex")}`;
    const auditOutputs: string[] = [];

    const json = (res: LightMyRequestResponse) => res.json() as Record<string, unknown>;

    before(async () => {
      storage = await dialect.openFresh();
      keyDir = await mkdtemp(join(tmpdir(), "kiln-secrets-"));
      ({ app } = await testApp(storage, {
        clock,
        logger: { level: "trace", stream: { write: (line: string) => void logLines.push(line) } },
      }));
      const setup = { now: () => clock.now() };
      await createTenant(storage, { id: "acme", displayName: "Acme" }, setup.now());
      await addPersonToTenant(
        storage,
        { tenantId: "acme", email: "ada@acme.example", displayName: "Ada", role: "owner" },
        setup.now(),
      );
    });
    after(async () => {
      if (!closed) await app.close();
      await storage.close();
      await rm(keyDir, { recursive: true, force: true });
    });

    it("issues every kind of secret through the real flows and uses each", async () => {
      // Device flow: start, one early poll, sign in through a one-time link, approve, poll.
      const started = await app.inject({ method: "POST", url: "/api/device/start" });
      assert.equal(started.statusCode, 200, started.body);
      const device = json(started) as { device_code: string; user_code: string; interval_seconds: number };
      secrets.set("device_code", device.device_code);
      const poll = async () => {
        await clock.advance(device.interval_seconds * 1000);
        const res = await app.inject({
          method: "GET",
          url: `/api/device/poll?device_code=${encodeURIComponent(device.device_code)}`,
        });
        assert.equal(res.statusCode, 200, res.body);
        return json(res);
      };
      assert.equal((await poll()).state, "pending");

      const link = await mintSignInLink(storage, "http://kiln.test", "ada@acme.example");
      const linkUrl = new URL(link);
      const linkToken = linkUrl.searchParams.get("token");
      assert.ok(linkToken !== null);
      secrets.set("sign-in link token", linkToken);
      const signedIn = await app.inject({ method: "GET", url: `${linkUrl.pathname}${linkUrl.search}` });
      assert.equal(signedIn.statusCode, 303, signedIn.body);
      const session = cookieValue(signedIn, "kiln_session");
      secrets.set("session cookie", session);
      const cookie = { cookie: `kiln_session=${session}` };

      const pending = await app.inject({
        method: "GET",
        url: `/api/device/pending?user_code=${device.user_code}`,
        headers: cookie,
      });
      assert.equal(pending.statusCode, 200, pending.body);
      assert.equal(json(pending).user_code, device.user_code);
      const approved = await app.inject({
        method: "POST",
        url: `/api/device/approve?user_code=${device.user_code}`,
        headers: { ...cookie, "idempotency-key": "approve-1", origin: "http://kiln.test" },
      });
      assert.equal(approved.statusCode, 200, approved.body);

      let polled = await poll();
      for (let i = 0; i < 5 && polled.state !== "approved"; i++) polled = await poll();
      assert.equal(polled.state, "approved", JSON.stringify(polled));
      const cliToken = String(polled.token);
      assert.match(cliToken, /^kiln_cli_/);
      secrets.set("CLI token", cliToken);

      // An agent credential, minted by the person's CLI token; both used; the credential revoked.
      const minted = await app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { "content-type": "application/json", "idempotency-key": "mint-1", ...bearer(cliToken) },
        payload: JSON.stringify({ name: "ci-agent", scopes: ["read", "submit"], expires_in_seconds: 3600 }),
      });
      assert.equal(minted.statusCode, 200, minted.body);
      const agent = String(json(minted).credential);
      assert.match(agent, /^kiln_agent_/);
      secrets.set("agent credential", agent);

      for (const token of [cliToken, agent, cliToken, agent]) {
        const res = await app.inject({ method: "GET", url: "/api/identity", headers: bearer(token) });
        assert.equal(res.statusCode, 200, res.body);
      }
      const revoked = await app.inject({
        method: "POST",
        url: "/api/credentials/ci-agent/revocation",
        headers: { "idempotency-key": "revoke-1", ...bearer(cliToken) },
      });
      assert.equal(revoked.statusCode, 200, revoked.body);
      const refused = await app.inject({ method: "GET", url: "/api/identity", headers: bearer(agent) });
      assert.equal(refused.statusCode, 401);
      assert.equal(json(refused).code, "credential_revoked");

      // A private registry credential, replaced by the person; the receipt names only its version.
      const replaced = await app.inject({
        method: "POST",
        url: "/api/tenant/registry-credentials",
        headers: { "content-type": "application/json", "idempotency-key": "registry-1", ...bearer(cliToken) },
        payload: JSON.stringify({
          registry: "registry.acme.example",
          authorization: registryAuthorization,
          confirm: "registry.acme.example",
        }),
      });
      assert.equal(replaced.statusCode, 200, replaced.body);
      assert.equal(replaced.body.includes(registryAuthorization), false);

      // The operator: the bootstrap credential opens an operator session, which is used.
      const operator = await operatorCredential(storage, masterKey(keyDir, {}), false, new Date());
      secrets.set("operator credential", operator);
      const opened = await app.inject({ method: "POST", url: "/operator/auth/session", headers: bearer(operator) });
      assert.equal(opened.statusCode, 204, opened.body);
      const operatorSession = cookieValue(opened, "kiln_operator_session");
      secrets.set("operator session cookie", operatorSession);

      // What the audit lists show, to a person and to the operator.
      const audit = await app.inject({ method: "GET", url: "/api/audit", headers: bearer(cliToken) });
      assert.equal(audit.statusCode, 200, audit.body);
      assert.match(audit.body, /credential:ci-agent/); // the right trail: it holds the mint and revocation
      assert.match(audit.body, /cli-token:/);
      const operatorAudit = await app.inject({
        method: "GET",
        url: "/operator/api/audit",
        headers: { cookie: `kiln_operator_session=${operatorSession}` },
      });
      assert.equal(operatorAudit.statusCode, 200, operatorAudit.body);
      assert.match(operatorAudit.body, /operator\.session\.create/);
      auditOutputs.push(audit.body, operatorAudit.body);

      assert.equal(secrets.size, 7);
      // Closing flushes last-used times, so the dump below sees every write the requests caused.
      await app.close();
      closed = true;
    });

    /** Every place a secret was found: `<secret> in <table.column | logs | audit list>`. */
    const leaks: string[] = [];

    it("no table, log line or audit list holds a secret; each is stored as its SHA-256", async () => {
      assert.equal(secrets.size, 7, "the issuing test did not complete");
      const { tables, cells } = await dumpDatabase(storage);
      for (const table of DECLARED_TABLES) assert.ok(tables.includes(table), `the dump missed table ${table}`);
      const stored = cells.join("\n");
      const logs = logLines.join("");
      // The places looked at really are the ones that saw the traffic.
      assert.match(logs, /\/api\/device\/poll/);
      assert.match(logs, /\/operator\/auth\/session/);
      assert.ok(
        cells.some((c) => /^agent_credentials\.last_used_at=\d{4}-/.test(c)),
        "last_used_at was not flushed before the dump",
      );

      for (const [name, value] of secrets) {
        // The value, and for prefixed tokens the random part alone.
        for (const form of new Set([value, value.replace(/^kiln_(cli|agent|operator)_/, "")])) {
          for (const cell of cells) if (cell.includes(form)) leaks.push(`${name} in ${cell.split("=")[0]}`);
          if (logs.includes(form)) leaks.push(`${name} in logs: ${logLines.find((l) => l.includes(form))}`);
          if (auditOutputs.some((o) => o.includes(form))) leaks.push(`${name} in an audit list`);
        }
        assert.ok(
          stored.includes(sha256(value)),
          `${name}: its SHA-256 is not stored, so this test looked in the wrong place`,
        );
      }
      // The registry credential is sealed: present only as ciphertext, never its value or a part of it.
      const sealedCell = cells.find((c) => c.startsWith("registry_credentials.ciphertext="));
      assert.ok(sealedCell !== undefined && sealedCell.length > 60, "the sealed registry credential is stored");
      const secretPart = registryAuthorization.replace(/^Bearer /, "");
      for (const cell of cells)
        if (cell.includes(secretPart)) leaks.push(`registry credential in ${cell.split("=")[0]}`);
      if (logs.includes(secretPart)) leaks.push("registry credential in logs");
      if (auditOutputs.some((o) => o.includes(secretPart))) leaks.push("registry credential in an audit list");
      assert.deepEqual([...new Set(leaks)], []);
      process.stdout.write(
        `# secrets at rest (${dialect.name}): ${secrets.size} secrets, ${tables.length} tables, ` +
          `${cells.length} cells, ${logLines.length} log lines checked\n`,
      );
    });
  });
}
