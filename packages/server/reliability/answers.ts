/**
 * Whether an answer is one its operation documents — the same reading of the catalogue the
 * OpenAPI document is generated from, applied independently of the server's own
 * response-contract hook: a success is 200 with the declared encoding (204 for `none`) and a
 * body that validates; a refusal is the Refusal document with a code the operation can give
 * (possibleRefusals) at that code's status.
 */
import { type Operation, possibleRefusals, REFUSAL_CODES, Refusal as RefusalSchema } from "@kiln/contract";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = addFormats(new Ajv({ strict: false, allErrors: false }));
const compiled = new Map<object, ValidateFunction>();

export function validatorOf(schema: object): ValidateFunction {
  let v = compiled.get(schema);
  if (v === undefined) {
    v = ajv.compile(schema);
    compiled.set(schema, v);
  }
  return v;
}

export interface Answer {
  readonly status: number;
  readonly contentType: string;
  /** The body as text (empty for a stream that was not read). */
  readonly body: string;
}

/** 5xx answers an operation gives by design, not by failure: a feature not served yet, a provider missing. */
const DESIGNED_5XX = new Set(["not_implemented", "legacy_unsupported", "upstream_failed"]);

export type Verdict =
  | { readonly kind: "documented"; readonly code: string | null }
  | { readonly kind: "designed-5xx"; readonly code: string }
  | { readonly kind: "server-error"; readonly why: string }
  | { readonly kind: "off-contract"; readonly why: string };

function parse(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** Reads one answer of `op` against its catalogue entry. */
export function judge(op: Operation, answer: Answer): Verdict {
  const { status, contentType } = answer;
  const json = contentType.startsWith("application/json");
  if (status >= 400) {
    const document = json ? parse(answer.body) : undefined;
    if (document === undefined) {
      const why = `${status} ${contentType || "(no content-type)"} is not the Refusal document: ${answer.body.slice(0, 120)}`;
      return status >= 500 ? { kind: "server-error", why } : { kind: "off-contract", why };
    }
    const violation = (document as { contract_violation?: unknown }).contract_violation;
    if (violation !== undefined) return { kind: "off-contract", why: `contract check: ${JSON.stringify(violation)}` };
    const check = validatorOf(RefusalSchema);
    if (!check(document)) return { kind: "off-contract", why: `refusal: ${ajv.errorsText(check.errors)}` };
    const code = (document as { code: string }).code;
    const known = REFUSAL_CODES[code as keyof typeof REFUSAL_CODES];
    if (status >= 500 && !DESIGNED_5XX.has(code)) {
      return { kind: "server-error", why: `${status} ${code}: ${(document as { detail?: string }).detail}` };
    }
    if (known === undefined || known.status !== status) {
      return { kind: "off-contract", why: `${code} answered with HTTP ${status}` };
    }
    if (!possibleRefusals(op).includes(code as never)) {
      return { kind: "off-contract", why: `${code} is not a refusal ${op.id} documents` };
    }
    return status >= 500 ? { kind: "designed-5xx", code } : { kind: "documented", code };
  }
  const response = op.response;
  if (response.encoding === "none") {
    return status === 204 ? { kind: "documented", code: null } : { kind: "off-contract", why: `${status}, not 204` };
  }
  if (status !== 200) return { kind: "off-contract", why: `success answered ${status}, not 200` };
  switch (response.encoding) {
    case "json": {
      if (!json) return { kind: "off-contract", why: `200 as ${contentType}, not JSON` };
      const document = parse(answer.body);
      const check = validatorOf(response.schema);
      if (document === undefined || !check(document)) {
        return { kind: "off-contract", why: `200 body: ${ajv.errorsText(check.errors)}` };
      }
      return { kind: "documented", code: null };
    }
    case "bytes":
      return contentType.startsWith(response.contentType)
        ? { kind: "documented", code: null }
        : { kind: "off-contract", why: `200 as ${contentType}, not ${response.contentType}` };
    case "sse":
      return contentType.startsWith("text/event-stream")
        ? { kind: "documented", code: null }
        : { kind: "off-contract", why: `200 as ${contentType}, not text/event-stream` };
  }
}
