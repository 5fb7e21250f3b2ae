/**
 * T14 fuzzing. For every catalogued operation, requests generated with fast-check from its
 * TypeBox schemas — valid path parameters, queries and bodies, the tenant's real ids, and the
 * same broken (wrong types, extra members, huge strings, deep nesting, invalid UTF-8, duplicate
 * keys, control characters, wrong content types, missing or doubled idempotency keys) — are sent
 * through `app.inject` with the caller each operation admits (a tenant owner's CLI token, a
 * dashboard session, an operator session) on SQLite and PostgreSQL, with checkResponses on.
 *
 * Broken promises: any 5xx other than a designed 501/502 refusal; any answer its operation does
 * not document (answers.ts); any 2xx to a JSON body its schema refuses.
 *
 *   KILN_T14_RUNS (default 200) requests per operation per dialect; KILN_T14_SEED (default 22).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CATALOGUE, type Operation } from "@kiln/contract";
import fc from "fast-check";
import { bearer, type TestApp, testApp } from "../src/testing/harness.js";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../src/web/http/json-body-text.js";
import { type Answer, judge, validatorOf } from "./answers.js";
import { populateTenants, REPOSITORY, type TenantWorld } from "./fixtures.js";
import { answerOf } from "./requests.js";
import {
  DEEP_PLACEHOLDER,
  deepText,
  hugeString,
  INVALID_UTF8,
  type JsonSchema,
  mutated,
  nastyString,
  validOf,
  withDuplicateKey,
  withInvalidUtf8,
} from "./schema-arbitrary.js";
import { count, runTrial, trialDialects } from "./trial.js";

const RUNS = Number(process.env.KILN_T14_RUNS ?? 200);
const SEED = Number(process.env.KILN_T14_SEED ?? 22);

/** One generated request, before authentication and the idempotency key are added. */
interface Case {
  readonly method: Operation["method"];
  readonly url: string;
  readonly contentType?: string;
  readonly payload?: Buffer;
  /** What broke, for the report. */
  readonly label: string;
  /** The JSON body as the server parses it, when it parses (for the accepted-invalid check). */
  readonly parsed?: { readonly value: unknown };
  readonly key: "fresh" | "reused" | "missing" | "doubled" | "long";
}

/** Percent-encodes every byte outside RFC 3986's unreserved set (lone surrogates become U+FFFD). */
function percentEncode(value: string | Buffer): string {
  const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : value;
  let out = "";
  for (const byte of bytes) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Raw (already encoded) path segments no router or schema should trip over. */
const HOSTILE_SEGMENTS: readonly string[] = [
  "abc",
  "-1",
  "0",
  "1.5",
  "1e999",
  "NaN",
  "true",
  "null",
  "%5B%5D",
  "%7B%7D",
  "%FF",
  "%C3%28",
  "%ED%A0%80",
  "%00",
  "%",
  "%ZZ",
  "%2F..%2F",
  "a%2Fb",
  "%20",
  "9".repeat(400),
  "x".repeat(1025),
  "y".repeat(5000),
];

function scalarText(value: unknown): string {
  return typeof value === "string" ? value : (JSON.stringify(value) ?? "");
}

/**
 * Whether a raw segment is a dot-segment, which URL resolution removes before any server sees
 * the path (RFC 3986 5.2.4; light-my-request resolves it too): it addresses another operation.
 */
function isDotSegment(raw: string): boolean {
  return /^(?:\.|%2e){1,2}$/i.test(raw);
}

/** A path segment for one parameter. */
function segmentOf(schema: JsonSchema, pool: readonly string[]): fc.Arbitrary<string> {
  const options: fc.WeightedArbitrary<string>[] = [
    {
      weight: 3,
      arbitrary: validOf(schema)
        .map(scalarText)
        .filter((s) => s.length > 0)
        .map(percentEncode),
    },
    { weight: 2, arbitrary: fc.constantFrom(...HOSTILE_SEGMENTS) },
    { weight: 1, arbitrary: nastyString.filter((s) => s.length > 0).map(percentEncode) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(...INVALID_UTF8).map((b) => percentEncode(Buffer.concat([Buffer.from("id"), b]))),
    },
  ];
  if (pool.length > 0) options.push({ weight: 4, arbitrary: fc.constantFrom(...pool).map(percentEncode) });
  return fc.oneof(...options).filter((raw) => !isDotSegment(raw));
}

/** `name=value` pairs serialized as a query string (arrays repeat their name). */
function queryText(members: readonly (readonly [string, unknown])[]): string {
  const pairs: string[] = [];
  for (const [name, value] of members) {
    const values = Array.isArray(value) ? value : [value];
    for (const v of values) pairs.push(`${percentEncode(name)}=${percentEncode(scalarText(v))}`);
  }
  return pairs.join("&");
}

function queryOf(op: Operation): fc.Arbitrary<{ text: string; label: string }> {
  const schema = op.request.query as JsonSchema | undefined;
  if (schema === undefined) {
    return fc.oneof(
      { weight: 4, arbitrary: fc.constant({ text: "", label: "" }) },
      {
        weight: 1,
        arbitrary: fc
          .tuple(fc.string({ maxLength: 8 }), nastyString)
          .map(([k, v]) => ({ text: queryText([[k, v]]), label: "query: unexpected member" })),
      },
    );
  }
  const properties = schema.properties ?? {};
  // Real values where a member names a record (repository, upload, cursor-free members).
  const realish: fc.Arbitrary<Record<string, unknown>> = validOf(schema).map((value) => {
    const record = { ...(value as Record<string, unknown>) };
    if ("repository" in properties && record.repository !== undefined) record.repository = REPOSITORY;
    return record;
  });
  const valid = fc.oneof(validOf(schema) as fc.Arbitrary<Record<string, unknown>>, realish);
  return fc.oneof(
    { weight: 4, arbitrary: valid.map((v) => ({ text: queryText(Object.entries(v)), label: "" })) },
    {
      weight: 3,
      arbitrary: valid.chain((v) =>
        mutated(v).map((m) => {
          const members = Object.entries((m.value ?? {}) as Record<string, unknown>).map(
            ([k, x]) => [k, x === DEEP_PLACEHOLDER ? deepText(m.deep?.levels ?? 2, false) : x] as const,
          );
          return { text: queryText(members), label: `query: ${m.mutation}` };
        }),
      ),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(valid, fc.constantFrom(...Object.keys(properties), "x")).map(([v, name]) => ({
        text: `${queryText(Object.entries(v))}&${percentEncode(name)}=a&${percentEncode(name)}=b`,
        label: "query: duplicate member",
      })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...Object.keys(properties), "x"), fc.constantFrom(...INVALID_UTF8))
        .map(([v, name, bytes]) => ({
          text: `${queryText(Object.entries(v))}&${percentEncode(name)}=${percentEncode(bytes)}`,
          label: "query: invalid UTF-8",
        })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(valid, fc.constantFrom(...Object.keys(properties), "x"), hugeString).map(([v, name, s]) => ({
        text: `${queryText(Object.entries(v))}&${percentEncode(name)}=${percentEncode(s.slice(0, 20_000))}`,
        label: "query: huge value",
      })),
    },
  );
}

interface Body {
  readonly contentType?: string;
  readonly payload?: Buffer;
  readonly label: string;
  readonly parsed?: { readonly value: unknown };
}

/** The value the server's JSON parser would hand to validation, if it would hand any. */
function parsedOf(payload: Buffer): { value: unknown } | undefined {
  const text = payload.toString("utf8");
  if (text.trim().length === 0 || nestsDeeperThan(text, MAX_JSON_DEPTH)) return undefined;
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

const json = (text: string | Buffer, label: string): Body => {
  const payload = typeof text === "string" ? Buffer.from(text, "utf8") : text;
  const parsed = parsedOf(payload);
  return { contentType: "application/json", payload, label, ...(parsed === undefined ? {} : { parsed }) };
};

function bodyOf(op: Operation): fc.Arbitrary<Body> {
  const body = op.request.body;
  if (body === undefined) {
    return fc.oneof(
      { weight: 6, arbitrary: fc.constant<Body>({ label: "" }) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map((v) => json(JSON.stringify(v), "body: unexpected")) },
    );
  }
  if (body.encoding === "bytes") {
    return fc.oneof(
      {
        weight: 6,
        arbitrary: fc
          .uint8Array({ maxLength: 4096 })
          .map((b) => ({ contentType: "application/octet-stream", payload: Buffer.from(b), label: "bytes" })),
      },
      {
        weight: 1,
        arbitrary: fc.constant<Body>({
          contentType: "application/octet-stream",
          payload: Buffer.alloc(body.maxBytes + 1, 7),
          label: "bytes: one past maxBytes",
        }),
      },
      { weight: 1, arbitrary: fc.constant<Body>({ label: "bytes: none" }) },
      { weight: 1, arbitrary: fc.constant(json("{}", "bytes: sent as JSON")) },
    );
  }
  const schema = body.schema as JsonSchema;
  const valid = validOf(schema);
  const mutatedText = valid.chain((v) =>
    mutated(v).map((m) => {
      let text = JSON.stringify(m.value);
      if (m.deep !== undefined) text = text.replace(`"${DEEP_PLACEHOLDER}"`, deepText(m.deep.levels, m.deep.asObject));
      return json(text, `body: ${m.mutation}`);
    }),
  );
  return fc.oneof(
    { weight: 4, arbitrary: valid.map((v) => json(JSON.stringify(v), "")) },
    { weight: 6, arbitrary: mutatedText },
    {
      weight: 1,
      arbitrary: fc.tuple(valid, fc.jsonValue({ maxDepth: 1 })).map(([v, shadow]) => {
        const text = withDuplicateKey(v, shadow);
        return text === null ? json(JSON.stringify(v), "") : json(text, "body: duplicate key");
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...INVALID_UTF8))
        .map(([v, bytes]) => json(withInvalidUtf8(JSON.stringify(v), bytes), "body: invalid UTF-8")),
    },
    {
      weight: 1,
      arbitrary: fc.oneof(
        valid.map((v) => json(JSON.stringify(v).slice(0, -1), "body: truncated JSON")),
        fc
          .constantFrom("[]", "null", "1", '"s"', "true", "{", "not json", "  ")
          .map((t) => json(t, "body: not a record")),
        valid.map((v) => ({
          contentType: "text/plain",
          payload: Buffer.from(JSON.stringify(v)),
          label: "body: text/plain",
        })),
        valid.map((v) => ({
          contentType: "application/x-www-form-urlencoded",
          payload: Buffer.from(`a=${encodeURIComponent(JSON.stringify(v))}`),
          label: "body: form-encoded",
        })),
        fc.constant<Body>({ label: "body: none" }),
      ),
    },
  );
}

type Pools = ReadonlyMap<string, readonly string[]>;

/** The real ids of the fuzzed tenant (and the operator's view of it), by path parameter name. */
function poolsOf(world: TenantWorld): Pools {
  const [owner, name] = REPOSITORY.split("/") as [string, string];
  return new Map<string, readonly string[]>([
    ["id", [...world.finishedJobs, ...world.queuedJobs, world.spareCliToken.id]],
    ["attempt", ["1", "2"]],
    ["index", ["0", "1"]],
    ["upload", world.uploads],
    ["part", ["1", "2"]],
    ["owner", [owner]],
    ["name", [name, ...world.agents.keys()]],
    ["advisory", world.advisories],
    ["tenant", [world.tenant]],
    ["job_id", [...world.finishedJobs]],
    ["sequence", ["1", "2"]],
  ]);
}

function caseOf(op: Operation, pools: Pools): fc.Arbitrary<Case> {
  const paramSchemas = (op.request.params?.properties ?? {}) as Record<string, JsonSchema>;
  const names = [...op.path.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1] ?? "");
  const segments = fc.tuple(...names.map((n) => segmentOf(paramSchemas[n] ?? { type: "string" }, pools.get(n) ?? [])));
  const key = op.keyed
    ? fc.constantFrom<Case["key"]>("fresh", "fresh", "fresh", "fresh", "fresh", "reused", "missing", "doubled", "long")
    : fc.constant<Case["key"]>("fresh");
  return fc.tuple(segments, queryOf(op), bodyOf(op), key).map(([values, query, body, k]) => {
    let i = 0;
    const path = op.path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, () => values[i++] ?? "x");
    const labels = [query.label, body.label].filter((l) => l !== "");
    return {
      method: op.method,
      url: query.text === "" ? path : `${path}?${query.text}`,
      ...(body.contentType === undefined ? {} : { contentType: body.contentType }),
      ...(body.payload === undefined ? {} : { payload: body.payload }),
      ...(body.parsed === undefined ? {} : { parsed: body.parsed }),
      label: labels.length === 0 ? "valid" : labels.join(", "),
      key: k,
    };
  });
}

interface Tally {
  sent: number;
  serverErrors: string[];
  offContract: string[];
  acceptedInvalid: string[];
  designed5xx: number;
  successes: number;
}

/** The caller each kind of security admits, as headers. */
interface Callers {
  readonly world: TenantWorld;
  operatorSession: string;
  readonly operatorCredential: string;
}

let keys = 0;
let addresses = 0;

async function openOperatorSession(t: TestApp, credential: string): Promise<string> {
  const opened = await t.app.inject({
    method: "POST",
    url: "/operator/auth/session",
    headers: bearer(credential),
  });
  const cookie = opened.cookies.find((c) => c.name === "kiln_operator_session");
  if (opened.statusCode !== 204 || cookie === undefined) throw new Error(`operator session: ${opened.body}`);
  return cookie.value;
}

async function send(t: TestApp, op: Operation, c: Case, callers: Callers): Promise<Answer> {
  const headers: Record<string, string | string[]> = {};
  switch (op.security.kind) {
    case "tenant":
      Object.assign(headers, bearer(callers.world.owner.token));
      break;
    case "session":
      headers.cookie = `kiln_session=${callers.world.owner.session}`;
      headers.origin = "http://kiln.test";
      break;
    case "operator":
      // Ending the session is fuzzed on a session of its own, so the others stay open.
      headers.cookie = `kiln_operator_session=${
        op.id === "operator.session.delete"
          ? await openOperatorSession(t, callers.operatorCredential)
          : callers.operatorSession
      }`;
      headers.origin = "http://kiln.test";
      break;
    case "operator-bootstrap":
      Object.assign(headers, bearer(callers.operatorCredential));
      break;
    case "public":
      break;
  }
  if (op.keyed) {
    keys += 1;
    if (c.key === "fresh") headers["idempotency-key"] = `t14-${keys}`;
    else if (c.key === "reused") headers["idempotency-key"] = `t14-reused-${keys % 3}`;
    else if (c.key === "doubled") headers["idempotency-key"] = [`t14-${keys}-a`, `t14-${keys}-b`];
    else if (c.key === "long") headers["idempotency-key"] = "k".repeat(4096);
  }
  if (c.contentType !== undefined) headers["content-type"] = c.contentType;
  const request = {
    method: c.method,
    url: c.url,
    headers,
    // The public device endpoints limit each client address: one address per request keeps
    // them answering rather than rate_limited (which is documented, and would hide the rest).
    remoteAddress: `10.${(addresses >> 16) & 255}.${(addresses >> 8) & 255}.${addresses++ & 255}`,
    ...(c.payload === undefined ? {} : { payload: c.payload }),
  };
  return answerOf(t, op, request);
}

function describeCase(op: Operation, c: Case): string {
  const body =
    c.payload === undefined ? "" : ` body ${c.payload.length} B ${JSON.stringify(c.payload.toString("utf8", 0, 160))}`;
  return `${op.id} [${c.label}; key ${c.key}] ${c.method} ${c.url.slice(0, 200)}${c.url.length > 200 ? "…" : ""}${body}`;
}

/** The server's error log lines, so a 5xx names its cause. */
const logged: string[] = [];
const errorLog = {
  level: "error",
  stream: {
    write: (line: string) => {
      const entry = JSON.parse(line) as { msg?: string; err?: { message?: string }; problems?: unknown };
      logged.push(`${entry.msg}: ${entry.err?.message ?? JSON.stringify(entry.problems ?? "")}`.slice(0, 300));
    },
  },
};

async function fuzzDialect(dialectName: string, open: () => Promise<TestApp>, tally: Tally): Promise<number> {
  const t = await open();
  const keyDir = await mkdtemp(join(tmpdir(), "kiln-t14-key-"));
  let sent = 0;
  try {
    const [world] = await populateTenants(t, 1);
    if (world === undefined) throw new Error("no tenant populated");
    const credential = await operatorCredential(t.storage, masterKey(keyDir), false, t.clock.now());
    const callers: Callers = {
      world,
      operatorCredential: credential,
      operatorSession: await openOperatorSession(t, credential),
    };
    const pools = poolsOf(world);
    for (const [index, op] of CATALOGUE.entries()) {
      const cases = fc.sample(caseOf(op, pools), { numRuns: RUNS, seed: SEED + index });
      const bodyCheck = op.request.body?.encoding === "json" ? validatorOf(op.request.body.schema) : undefined;
      for (const c of cases) {
        logged.length = 0;
        const answer = await send(t, op, c, callers);
        sent += 1;
        const verdict = judge(op, answer);
        const cause = logged.length === 0 ? "" : ` (logged: ${logged.join("; ")})`;
        const where = `${dialectName}: ${describeCase(op, c)} → ${answer.status}${cause}`;
        if (verdict.kind === "server-error") tally.serverErrors.push(`${where}: ${verdict.why}`);
        else if (verdict.kind === "off-contract") tally.offContract.push(`${where}: ${verdict.why}`);
        else if (verdict.kind === "designed-5xx") tally.designed5xx += 1;
        if (answer.status >= 200 && answer.status < 300) {
          tally.successes += 1;
          if (bodyCheck !== undefined && c.parsed !== undefined && !bodyCheck(structuredClone(c.parsed.value))) {
            tally.acceptedInvalid.push(`${where}: the body fails its schema yet was accepted`);
          }
          if (bodyCheck !== undefined && c.parsed === undefined && c.payload !== undefined) {
            tally.acceptedInvalid.push(`${where}: a body that is not JSON was accepted`);
          }
        }
      }
    }
  } finally {
    await t.close();
    await rm(keyDir, { recursive: true, force: true });
  }
  return sent;
}

await runTrial("T14", "fuzzing", async () => {
  const tally: Tally = {
    sent: 0,
    serverErrors: [],
    offContract: [],
    acceptedInvalid: [],
    designed5xx: 0,
    successes: 0,
  };
  const perDialect: string[] = [];
  for (const dialect of trialDialects()) {
    const sent = await fuzzDialect(
      dialect.name,
      async () => testApp(await dialect.openFresh(), { logger: errorLog }),
      tally,
    );
    tally.sent += sent;
    perDialect.push(`${dialect.name} ${count(sent)}`);
  }
  return {
    figure:
      `${count(tally.sent)} requests over ${CATALOGUE.length} operations (${perDialect.join(", ")}; seed ${SEED}), ` +
      `${count(tally.successes)} 2xx, ${count(tally.serverErrors.length)} 5xx, ` +
      `${count(tally.offContract.length)} off-contract, ${count(tally.acceptedInvalid.length)} invalid bodies accepted ` +
      `(${count(tally.designed5xx)} designed 501/502 refusals)`,
    broken: [
      ...tally.serverErrors.map((s) => `5xx ${s}`),
      ...tally.offContract.map((s) => `off-contract ${s}`),
      ...tally.acceptedInvalid.map((s) => `accepted ${s}`),
    ],
  };
});
