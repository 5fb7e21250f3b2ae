/**
 * T7 tokens. Every tenant operation is presented with credentials that must not pass — revoked
 * (CLI token and agent credential), expired, under-scoped (an agent lacking the scope, a
 * viewer's CLI token, an agent on a human-only operation), malformed, truncated at every
 * length, and other-prefix (a token's body under the other kind's prefix with a valid
 * checksum, the operator credential, a session cookie, a device code, a token's own digest) —
 * on SQLite and PostgreSQL. Broken promises: any of them accepted, or refused with another
 * code than its own (revoked → credential_revoked, expired → credential_expired, scope →
 * out_of_scope, human → human_principal_required, the rest → unauthenticated); a valid
 * credential refused (the control); any issued secret found at rest in any cell of any table,
 * or its SHA-256 digest not found.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CATALOGUE, type Operation, type Scope } from "@kiln/contract";
import type { Database, Storage } from "@kiln/storage";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";
import { populateTenants } from "./fixtures.js";
import { answerOf, minimalRequest } from "./requests.js";
import { count, runTrial, trialDialects } from "./trial.js";

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex");

const TENANT_OPS = CATALOGUE.filter(
  (op): op is Operation & { security: { kind: "tenant"; scope: Scope; human?: boolean } } =>
    op.security.kind === "tenant",
);

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** token-format.ts's checksum, computed independently: CRC-32 in 6 base62 characters. */
function checksum(body: string): string {
  let crc = 0xffffffff;
  for (const byte of Buffer.from(body, "utf8")) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? 0xedb88320 ^ (crc >>> 1) : crc >>> 1;
  }
  let rest = (crc ^ 0xffffffff) >>> 0;
  let out = "";
  for (let i = 0; i < 6; i++) {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}

/** A token's 32 random characters under `prefix`, with a checksum that holds. */
function underPrefix(token: string, prefix: string): string {
  const random = token.slice(token.length - 38, token.length - 6);
  return `${prefix}${random}${checksum(prefix + random)}`;
}

interface Presentation {
  readonly category: string;
  readonly what: string;
  /** The Authorization header value (undefined: none, a cookie instead). */
  readonly authorization: string;
  /** The operations it is presented to, and the code each must answer. */
  readonly expect: (op: Operation & { security: { kind: "tenant"; scope: Scope; human?: boolean } }) => string | null;
}

const AUTH_CODES = new Set([
  "unauthenticated",
  "credential_revoked",
  "credential_expired",
  "out_of_scope",
  "role_required",
  "human_principal_required",
]);

/** Every cell of every table, as text (Kysely's introspection: sqlite_master / information_schema). */
async function cellsOf(storage: Storage): Promise<{ tables: number; cells: string[] }> {
  const tables = await storage.db.introspection.getTables({ withInternalKyselyTables: true });
  const cells: string[] = [];
  for (const table of tables) {
    const name = table.schema === undefined ? table.name : `${table.schema}.${table.name}`;
    const rows = (await storage.db
      .selectFrom(name as keyof Database)
      .selectAll()
      .execute()) as Record<string, unknown>[];
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        const text =
          value === null || value === undefined
            ? ""
            : Buffer.isBuffer(value)
              ? `${value.toString("utf8")} ${value.toString("hex")} ${value.toString("base64")}`
              : value instanceof Date
                ? value.toISOString()
                : typeof value === "object"
                  ? JSON.stringify(value)
                  : String(value);
        cells.push(`${table.name}.${column}=${text}`);
      }
    }
  }
  return { tables: tables.length, cells };
}

interface DialectFigures {
  presentations: number;
  /** Bad credentials by category (revoked, expired, …). */
  categories: Map<string, number>;
  operations: number;
  accepted: string[];
  misrefused: string[];
  controlRefused: string[];
  secrets: number;
  atRest: string[];
  digestsMissing: string[];
  tables: number;
  cells: number;
}

async function mint(t: TestApp, token: string, name: string, scopes: readonly Scope[], seconds: number) {
  const res = await t.app.inject({
    method: "POST",
    url: "/api/credentials",
    headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": `t7-mint-${name}` },
    payload: JSON.stringify({ name, scopes, expires_in_seconds: seconds, requests_per_minute: 100_000 }),
  });
  if (res.statusCode !== 200) throw new Error(`minting ${name}: ${res.body}`);
  return String((res.json() as { credential: string }).credential);
}

/** A CLI token issued through the device flow, as `kiln login` gets one. */
async function deviceFlowToken(t: TestApp, session: string, secrets: Map<string, string>): Promise<string> {
  const started = await t.app.inject({ method: "POST", url: "/api/device/start", remoteAddress: "10.7.0.1" });
  const device = started.json() as { device_code: string; user_code: string; interval_seconds: number };
  secrets.set("device code", device.device_code);
  const approved = await t.app.inject({
    method: "POST",
    url: `/api/device/approve?user_code=${device.user_code}`,
    headers: { cookie: `kiln_session=${session}`, origin: "http://kiln.test", "idempotency-key": "t7-approve" },
  });
  if (approved.statusCode !== 200) throw new Error(`device approval: ${approved.body}`);
  await t.clock.advance(device.interval_seconds * 1000);
  const polled = await t.app.inject({
    method: "GET",
    url: `/api/device/poll?device_code=${encodeURIComponent(device.device_code)}`,
    remoteAddress: "10.7.0.1",
  });
  const token = (polled.json() as { token?: string }).token;
  if (token === undefined) throw new Error(`device poll: ${polled.body}`);
  return token;
}

async function trialOn(t: TestApp): Promise<DialectFigures> {
  const keyDir = await mkdtemp(join(tmpdir(), "kiln-t7-key-"));
  try {
    const [world] = await populateTenants(t, 1);
    if (world === undefined) throw new Error("no tenant populated");
    const owner = world.owner.token;
    const secrets = new Map<string, string>([
      ["owner CLI token", owner],
      ["spare CLI token", world.spareCliToken.token],
      ["session cookie", world.owner.session],
    ]);
    for (const [name, value] of world.agents) secrets.set(`agent ${name}`, value);

    const deviceToken = await deviceFlowToken(t, world.owner.session, secrets);
    secrets.set("device-flow CLI token", deviceToken);
    const reader = await mint(t, owner, "t7-reader", ["read"], 86_400);
    const admin = await mint(t, owner, "t7-admin", ["read", "submit", "settings", "credentials", "admin"], 86_400);
    const expiring = await mint(t, owner, "t7-expiring", ["read", "submit", "settings", "credentials", "admin"], 60);
    const revokedAgent = await mint(
      t,
      owner,
      "t7-revoked",
      ["read", "submit", "settings", "credentials", "admin"],
      86_400,
    );
    for (const [name, value] of [
      ["reader agent", reader],
      ["admin agent", admin],
      ["expiring agent", expiring],
      ["revoked agent", revokedAgent],
    ] as const) {
      secrets.set(name, value);
    }
    const viewer = await personWithToken(t.storage, { tenant: world.tenant, role: "viewer", now: t.clock.now() });
    secrets.set("viewer CLI token", viewer.token);
    const operator = await operatorCredential(t.storage, masterKey(keyDir), false, t.clock.now());
    secrets.set("operator credential", operator);
    const opened = await t.app.inject({ method: "POST", url: "/operator/auth/session", headers: bearer(operator) });
    const operatorSession = opened.cookies.find((c) => c.name === "kiln_operator_session")?.value;
    if (operatorSession === undefined) throw new Error(`operator session: ${opened.body}`);
    secrets.set("operator session cookie", operatorSession);

    // Revocations through the API; expiry by moving the clock past it.
    for (const [url, key] of [
      ["/api/credentials/t7-revoked/revocation", "t7-revoke-agent"],
      [`/api/cli/tokens/${world.spareCliToken.id}/revocation`, "t7-revoke-cli"],
    ] as const) {
      const res = await t.app.inject({
        method: "POST",
        url,
        headers: { ...bearer(url.includes("/cli/") ? world.spareCliToken.token : owner), "idempotency-key": key },
      });
      if (res.statusCode !== 200) throw new Error(`${url}: ${res.body}`);
    }
    await t.clock.advance(61_000);

    const unauthenticated = () => "unauthenticated";
    const presentations: Presentation[] = [
      {
        category: "revoked",
        what: "revoked CLI token",
        authorization: `Bearer ${world.spareCliToken.token}`,
        expect: () => "credential_revoked",
      },
      {
        category: "revoked",
        what: "revoked agent credential",
        authorization: `Bearer ${revokedAgent}`,
        expect: () => "credential_revoked",
      },
      {
        category: "expired",
        what: "expired agent credential",
        authorization: `Bearer ${expiring}`,
        expect: () => "credential_expired",
      },
      {
        category: "under-scoped",
        what: "read-only agent",
        authorization: `Bearer ${reader}`,
        expect: (op) => (op.security.scope === "read" ? null : "out_of_scope"),
      },
      {
        category: "under-scoped",
        what: "viewer's CLI token",
        authorization: `Bearer ${viewer.token}`,
        expect: (op) => (op.security.scope === "read" ? null : "out_of_scope"),
      },
      {
        category: "under-scoped",
        what: "agent on a human-only operation",
        authorization: `Bearer ${admin}`,
        expect: (op) => (op.security.human === true ? "human_principal_required" : null),
      },
    ];
    const malformed = [
      "Bearer",
      "Bearer ",
      `Basic ${Buffer.from(`user:${owner}`).toString("base64")}`,
      `Token ${owner}`,
      owner,
      `Bearer ${owner} ${owner}`,
      `Bearer ${owner}x`,
      `Bearer x${owner}`,
      `Bearer ${owner.toUpperCase()}`,
      `Bearer ${owner.replace("kiln_cli_", "KILN_CLI_")}`,
      `Bearer ${owner.slice(0, -1)}${owner.endsWith("A") ? "B" : "A"}`,
      `Bearer ${owner.slice(0, 20)}${owner[20] === "a" ? "b" : "a"}${owner.slice(21)}`,
      `Bearer ${admin.slice(0, -6)}000000`,
      `Bearer ${owner.replace(/[0-9A-Za-z]$/, "\u0430")}`,
      `Bearer ${"kiln_cli_"}${"0".repeat(38)}`,
      `Bearer ${randomBytes(24).toString("base64url")}`,
      `Bearer ${"A".repeat(8000)}`,
      `Bearer ${encodeURIComponent(owner)}%00`,
    ];
    for (const [i, authorization] of malformed.entries()) {
      presentations.push({
        category: "malformed",
        what: `malformed #${i + 1}`,
        authorization,
        expect: unauthenticated,
      });
    }
    for (const [kind, token] of [
      ["CLI", owner],
      ["agent", admin],
    ] as const) {
      for (let length = 0; length < token.length; length++) {
        presentations.push({
          category: "truncated",
          what: `${kind} token truncated to ${length} characters`,
          authorization: `Bearer ${token.slice(0, length)}`,
          expect: unauthenticated,
        });
      }
    }
    const otherPrefix: [string, string][] = [
      ["CLI token's body as an agent credential", underPrefix(owner, "kiln_agent_")],
      ["agent credential's body as a CLI token", underPrefix(admin, "kiln_cli_")],
      ["CLI token's body under kiln_operator_", underPrefix(owner, "kiln_operator_")],
      ["CLI token's body under kiln_", underPrefix(owner, "kiln_")],
      ["operator credential", operator],
      ["operator session cookie", operatorSession],
      ["person session cookie", world.owner.session],
      ["device code", secrets.get("device code") ?? ""],
      ["CLI token's digest", sha256(owner)],
      ["agent credential's digest", sha256(admin)],
    ];
    for (const [what, value] of otherPrefix) {
      presentations.push({ category: "other-prefix", what, authorization: `Bearer ${value}`, expect: unauthenticated });
    }

    const categories = new Map<string, number>();
    for (const p of presentations) categories.set(p.category, (categories.get(p.category) ?? 0) + 1);
    const figures: DialectFigures = {
      presentations: 0,
      categories,
      operations: TENANT_OPS.length,
      accepted: [],
      misrefused: [],
      controlRefused: [],
      secrets: 0,
      atRest: [],
      digestsMissing: [],
      tables: 0,
      cells: 0,
    };
    for (const presentation of presentations) {
      for (const op of TENANT_OPS) {
        const expected = presentation.expect(op);
        if (expected === null) continue;
        figures.presentations += 1;
        const answer = await answerOf(t, op, minimalRequest(op, { authorization: presentation.authorization }));
        const code = answer.contentType.startsWith("application/json")
          ? (JSON.parse(answer.body) as { code?: string }).code
          : undefined;
        const where = `${presentation.category}: ${presentation.what} → ${op.id}: ${answer.status} ${code ?? answer.contentType}`;
        if (code === undefined || !AUTH_CODES.has(code)) figures.accepted.push(where);
        else if (code !== expected) figures.misrefused.push(`${where} (expected ${expected})`);
      }
    }
    // The control: a valid credential holding the scope passes authorization on every operation.
    for (const op of TENANT_OPS) {
      const answer = await answerOf(t, op, minimalRequest(op, bearer(owner)));
      const code = answer.contentType.startsWith("application/json")
        ? (JSON.parse(answer.body) as { code?: string }).code
        : undefined;
      if (code !== undefined && AUTH_CODES.has(code))
        figures.controlRefused.push(`owner's CLI token → ${op.id}: ${code}`);
    }

    const { tables, cells } = await cellsOf(t.storage);
    figures.tables = tables;
    figures.cells = cells.length;
    figures.secrets = secrets.size;
    const everything = cells.join("\n");
    for (const [name, value] of secrets) {
      for (const cell of cells) if (cell.includes(value)) figures.atRest.push(`${name} in ${cell.slice(0, 80)}…`);
      if (!everything.includes(sha256(value))) figures.digestsMissing.push(`${name}: its SHA-256 is in no table`);
    }
    return figures;
  } finally {
    await rm(keyDir, { recursive: true, force: true });
  }
}

await runTrial("T7", "tokens", async () => {
  const broken: string[] = [];
  const engines: string[] = [];
  let last: DialectFigures | undefined;
  const sum = { presentations: 0, accepted: 0, misrefused: 0, secrets: 0, atRest: 0, digests: 0, cells: 0 };
  for (const dialect of trialDialects()) {
    const t = await testApp(await dialect.openFresh());
    try {
      const f = await trialOn(t);
      last = f;
      engines.push(dialect.name);
      sum.presentations += f.presentations;
      sum.accepted += f.accepted.length;
      sum.misrefused += f.misrefused.length;
      sum.secrets += f.secrets;
      sum.atRest += f.atRest.length;
      sum.digests += f.secrets - f.digestsMissing.length;
      sum.cells += f.cells;
      for (const [what, list] of [
        ["accepted", f.accepted],
        ["wrong code", f.misrefused],
        ["control refused", f.controlRefused],
        ["at rest", f.atRest],
        ["no digest", f.digestsMissing],
      ] as const) {
        for (const line of list) broken.push(`${dialect.name} ${what}: ${line}`);
      }
    } finally {
      await t.close();
    }
  }
  const categories = [...(last?.categories ?? new Map<string, number>())].map(([c, n]) => `${n} ${c}`).join(", ");
  return {
    figure:
      `${count(sum.presentations)} presentations of bad credentials (${categories}) to ${last?.operations ?? 0} ` +
      `tenant operations on ${engines.join(" and ")}: ${sum.accepted} accepted, ${sum.misrefused} wrong refusal codes; ` +
      `${sum.secrets} issued secrets: ${sum.atRest} at rest in ${count(sum.cells)} cells, ${sum.digests} stored as SHA-256 digests`,
    broken,
  };
});
