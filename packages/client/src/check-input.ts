import { CATALOGUE, type Operation } from "@kiln/contract";
import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";

/** One way a request fails its operation's schema: the part, the member's JSON pointer and why. */
export interface InputProblem {
  readonly part: "params" | "query" | "body";
  /** A JSON pointer below the part (`/policy_revision`); empty for the part as a whole. */
  readonly path: string;
  readonly message: string;
}

const BY_ID = new Map<string, Operation>(CATALOGUE.map((op) => [op.id, op]));

function problemsOf(part: InputProblem["part"], schema: TSchema | undefined, value: unknown): InputProblem[] {
  if (schema === undefined || Value.Check(schema, value)) return [];
  return [...Value.Errors(schema, value)].map((e) => ({ part, path: e.path, message: e.message }));
}

/**
 * What the service would refuse `invalid_request` in a request, found before it is sent: its
 * path parameters, query and JSON body checked against the catalogue entry's own schemas
 * (byte bodies and bounds the service alone knows are not checked). Empty when it conforms.
 */
export function inputProblems(
  id: string,
  input: { params?: unknown; query?: unknown; body?: unknown },
): InputProblem[] {
  const op = BY_ID.get(id);
  if (op === undefined) throw new Error(`${id} is not in the catalogue`);
  const { params, query, body } = op.request;
  return [
    ...problemsOf("params", params, input.params ?? {}),
    ...problemsOf("query", query, input.query ?? {}),
    ...(body?.encoding === "json" ? problemsOf("body", body.schema, input.body) : []),
  ];
}
