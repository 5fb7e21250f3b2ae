import { type Operation, possibleRefusals, Refusal as RefusalSchema } from "@kiln/contract";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyInstance } from "fastify";

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * Test-only hook: every JSON response is validated against the schema its operation
 * declares (refusals against Refusal, with a code the operation lists). A drift
 * becomes a 500 naming the violation, which fails whichever test caused it.
 */
export function installResponseContractCheck(app: FastifyInstance): void {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  const compiled = new Map<object, ValidateFunction>();
  const validatorOf = (schema: object) => {
    let v = compiled.get(schema);
    if (v === undefined) {
      v = ajv.compile(schema);
      compiled.set(schema, v);
    }
    return v;
  };

  app.addHook("onSend", async (request, reply, payload) => {
    const op = (request.routeOptions.config as { operation?: Operation }).operation;
    const type = String(reply.getHeader("content-type") ?? "");
    if (!type.startsWith("application/json") || typeof payload !== "string") return payload;
    const problems: string[] = [];
    const document: unknown = JSON.parse(payload);
    if (reply.statusCode >= 400) {
      const check = validatorOf(RefusalSchema);
      if (!check(document)) problems.push(`refusal: ${ajv.errorsText(check.errors)}`);
      const code = (document as { code?: string }).code ?? "";
      const status = (document as { status?: number }).status;
      if (status !== reply.statusCode) problems.push(`refusal status ${status} differs from HTTP ${reply.statusCode}`);
      if (op !== undefined && !possibleRefusals(op).includes(code as never)) {
        problems.push(`${op.id} answered ${code}, which its catalogue entry does not list`);
      }
    } else if (op !== undefined && op.response.encoding === "json") {
      const check = validatorOf(op.response.schema);
      if (!check(document)) problems.push(`${op.id} response: ${ajv.errorsText(check.errors)}`);
    }
    if (problems.length === 0) return payload;
    request.log.error({ problems }, "response drifted from the contract");
    reply.code(500);
    return JSON.stringify({ contract_violation: problems, original: document });
  });
}
