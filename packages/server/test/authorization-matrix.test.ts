import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CATALOGUE, type Operation, SCOPES, type Scope } from "@kiln/contract";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";

/**
 * The authorization matrix, generated from the catalogue: every tenant operation refuses a
 * credential lacking its scope and admits one holding it; every human-only operation refuses
 * an agent; every operator operation hides from tenant callers; every session-only operation
 * refuses bearer credentials. A new catalogue entry is covered without touching this file.
 */

const TENANT_OPS = CATALOGUE.filter(
  (op): op is Operation & { security: { kind: "tenant"; scope: Scope; human?: boolean } } =>
    op.security.kind === "tenant",
);
const OPERATOR_OPS = CATALOGUE.filter(
  (op) => op.security.kind === "operator" || op.security.kind === "operator-bootstrap",
);
const SESSION_OPS = CATALOGUE.filter((op) => op.security.kind === "session");

/** Codes that mean "authorization did not pass". */
const AUTHORIZATION_REFUSALS = new Set([
  "unauthenticated",
  "credential_revoked",
  "credential_expired",
  "out_of_scope",
  "role_required",
  "human_principal_required",
  "session_required",
  "operator_not_found",
]);

interface ParamSchema {
  type?: string;
  pattern?: string;
  minimum?: number;
}

/** A value for one path parameter that its schema accepts. */
function paramValue(op: Operation, name: string, schema: ParamSchema): string {
  if (schema.type === "integer" || schema.type === "number") return String(Math.max(1, schema.minimum ?? 1));
  const candidates = name === "owner" ? ["acme"] : name === "name" ? ["widget"] : ["x1"];
  for (const value of candidates) {
    if (schema.pattern === undefined || new RegExp(schema.pattern).test(value)) return value;
  }
  throw new Error(`${op.id}: no test value satisfies path parameter ${name} (${JSON.stringify(schema)})`);
}

/** The operation's path with every `{param}` replaced by a value its params schema accepts. */
function urlOf(op: Operation): string {
  const properties = (op.request.params?.properties ?? {}) as Record<string, ParamSchema>;
  return op.path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
    const schema = properties[name];
    if (schema === undefined) throw new Error(`${op.id}: path parameter ${name} has no schema`);
    return encodeURIComponent(paramValue(op, name, schema));
  });
}

let keys = 0;
let requests = 0;

interface Answer {
  status: number;
  code: string | undefined;
  body: Record<string, unknown> | undefined;
  raw: string;
}

/**
 * One request to `op` as `headers` describe. Server-sent event streams may never end, so
 * their answers are read as streams: the status and headers are enough, and a JSON refusal
 * is read in full.
 */
async function call(t: TestApp, op: Operation, headers: Record<string, string>): Promise<Answer> {
  requests += 1;
  const all: Record<string, string> = { ...headers };
  if (op.keyed) all["idempotency-key"] = `matrix-${process.pid}-${++keys}`;
  let payload: string | Buffer | undefined;
  if (op.request.body?.encoding === "json") {
    all["content-type"] = "application/json";
    payload = "{}";
  } else if (op.request.body?.encoding === "bytes") {
    all["content-type"] = "application/octet-stream";
    payload = Buffer.from("x");
  }
  const request = { method: op.method, url: urlOf(op), headers: all, ...(payload === undefined ? {} : { payload }) };
  if (op.response.encoding !== "sse") {
    const res = await t.app.inject(request);
    return answerOf(res.statusCode, String(res.headers["content-type"] ?? ""), res.body);
  }
  const abort = new AbortController();
  const res = await t.app.inject({ ...request, payloadAsStream: true, signal: abort.signal });
  const type = String(res.headers["content-type"] ?? "");
  if (!type.startsWith("application/json")) {
    abort.abort();
    return answerOf(res.statusCode, type, "");
  }
  let text = "";
  for await (const chunk of res.stream()) text += String(chunk);
  return answerOf(res.statusCode, type, text);
}

function answerOf(status: number, type: string, raw: string): Answer {
  const body =
    type.startsWith("application/json") && raw !== "" ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
  const code = typeof body?.code === "string" ? body.code : undefined;
  return { status, code, body, raw };
}

function assertPassedAuthorization(op: Operation, who: string, answer: Answer): void {
  const what = `${op.id} with ${who}: ${answer.status} ${answer.raw.slice(0, 300)}`;
  assert.ok(answer.code === undefined || !AUTHORIZATION_REFUSALS.has(answer.code), what);
  assert.notEqual(answer.status, 401, what);
  assert.notEqual(answer.status, 500, what); // a contract violation or an unforeseen failure
}

for (const dialect of DIALECTS) {
  describe(`authorization matrix (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; token: string };
    /** scope → an agent credential holding every scope but it. */
    const allBut = new Map<Scope, string>();
    /** scope → an agent credential holding only it. */
    const only = new Map<Scope, string>();

    const mint = async (name: string, scopes: readonly Scope[]): Promise<string> => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { "content-type": "application/json", "idempotency-key": `mint-${name}`, ...bearer(owner.token) },
        payload: JSON.stringify({ name, scopes, expires_in_seconds: 3600 }),
      });
      assert.equal(res.statusCode, 200, res.body);
      const value = (res.json() as { credential: string }).credential;
      assert.match(value, /^kiln_agent_/);
      return value;
    };

    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
      for (const scope of SCOPES) {
        allBut.set(
          scope,
          await mint(
            `all-but-${scope}`,
            SCOPES.filter((s) => s !== scope),
          ),
        );
        only.set(scope, await mint(`only-${scope}`, [scope]));
      }
    });
    after(() => t.close());

    for (const op of TENANT_OPS) {
      const { scope, human } = op.security;

      it(`${op.id}: a credential without ${scope} is out_of_scope naming it`, async () => {
        const answer = await call(t, op, bearer(allBut.get(scope) ?? ""));
        assert.equal(answer.status, 403, answer.raw);
        assert.equal(answer.code, "out_of_scope", answer.raw);
        assert.equal(answer.body?.scope, scope, answer.raw);
      });

      if (human === true) {
        it(`${op.id}: an owner's CLI token passes authorization`, async () => {
          assertPassedAuthorization(op, "an owner's CLI token", await call(t, op, bearer(owner.token)));
        });
        it(`${op.id}: an agent credential holding ${scope} is human_principal_required`, async () => {
          const answer = await call(t, op, bearer(only.get(scope) ?? ""));
          assert.equal(answer.status, 403, answer.raw);
          assert.equal(answer.code, "human_principal_required", answer.raw);
        });
      } else {
        it(`${op.id}: an agent credential holding only ${scope} passes authorization`, async () => {
          assertPassedAuthorization(
            op,
            `an agent with only ${scope}`,
            await call(t, op, bearer(only.get(scope) ?? "")),
          );
        });
      }
    }

    for (const op of OPERATOR_OPS) {
      it(`${op.id}: tenant credentials and no credential get operator_not_found`, async () => {
        const callers: [string, Record<string, string>][] = [
          ["a CLI token", bearer(owner.token)],
          ["an agent credential", bearer(only.get("admin") ?? "")],
          ["no credential", {}],
        ];
        for (const [who, headers] of callers) {
          const answer = await call(t, op, headers);
          assert.equal(answer.status, 404, `${who}: ${answer.raw}`);
          assert.equal(answer.code, "operator_not_found", `${who}: ${answer.raw}`);
        }
      });
    }

    for (const op of SESSION_OPS) {
      it(`${op.id}: a bearer credential is session_required; no credential is unauthenticated`, async () => {
        for (const [who, token] of [
          ["a CLI token", owner.token],
          ["an agent credential", only.get("read") ?? ""],
        ] as const) {
          const answer = await call(t, op, bearer(token));
          assert.equal(answer.status, 403, `${who}: ${answer.raw}`);
          assert.equal(answer.code, "session_required", `${who}: ${answer.raw}`);
        }
        const none = await call(t, op, {});
        assert.equal(none.status, 401, none.raw);
        assert.equal(none.code, "unauthenticated", none.raw);
      });
    }
  });
}

after(() => {
  const human = TENANT_OPS.filter((op) => op.security.human === true).length;
  const dialects = DIALECTS.filter((d) => d.skip === false).length;
  process.stdout.write(
    `# authorization matrix: ${TENANT_OPS.length} tenant operations × (out_of_scope, scope holder passes; ` +
      `${human} human-only also human_principal_required), ${OPERATOR_OPS.length} operator operations × 3 callers, ` +
      `${SESSION_OPS.length} session operations × 3 callers, on ${dialects} dialects: ${requests} requests\n`,
  );
});
