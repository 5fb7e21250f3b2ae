/**
 * The body worker: a worker thread that reads a large JSON body of an operation with a body
 * preparation (body-preparations.ts) — decodes its text, parses it, checks it against the
 * operation's catalogue schema and the unrepresentable-value rule, prepares it — and answers with
 * the verdict and, for a valid body, the body without its bulk and the preparation. Everything
 * here is what the event loop would otherwise spend seconds of on a 15 MB inline source or a
 * 40,000-entry manifest, while every other tenant's request waited (reliability trial T15).
 * It also parses the TOML files jobs.submit's admission reads (jobs/admission-source.ts): a
 * 50 MB Cargo.toml held the loop 13.4 s (issue 33), and a bounded one still costs up to a second.
 *
 * It imports only pure modules (no storage, no Fastify at run time): the same parse
 * (json-body-text.ts), the same validators compiled from the same catalogue schemas
 * (request-validators.ts) and the same preparations the event loop uses for small bodies, and
 * the TOML parse admission uses without workers (jobs/toml-document.ts).
 */
import { getPriority, setPriority } from "node:os";
import { isMainThread, parentPort } from "node:worker_threads";
import { CATALOGUE } from "@kiln/contract";
import { parseTomlDocument, type TomlDocument } from "../../domain/jobs/toml-document.js";
import { isPreparedOperation, preparationOf } from "./body-preparations.js";
import { readJsonBodyText } from "./json-body-text.js";
import { type CheckedValidator, checkedValidatorOf, jsonBodyAjv } from "./request-validators.js";

/** One body to read: the operation whose body it is, and its bytes (handed over, not copied). */
export interface BodyTask {
  readonly id: number;
  readonly kind: "body";
  readonly operation: string;
  readonly bytes: Uint8Array;
}

/** One TOML file of a submitted source to parse (handed over, not copied). */
export interface TomlTask {
  readonly id: number;
  readonly kind: "toml";
  readonly bytes: Uint8Array;
}

export type WorkerTask = BodyTask | TomlTask;

/**
 * A schema error as the error boundary reads it (validationDetail), without what cannot or
 * should not cross threads: the refused value is kept only when it is text (a pattern's refusal
 * names it, cut to what the detail shows), the schema only for its description.
 */
export interface PortableSchemaError {
  readonly instancePath: string;
  readonly schemaPath: string;
  readonly keyword: string;
  readonly message?: string;
  readonly params: Record<string, unknown>;
  readonly data?: string;
  readonly parentSchema?: { readonly description?: string };
}

export type BodyAnswer = { readonly id: number } & (
  | { readonly kind: "empty" }
  | { readonly kind: "refused"; readonly detail: string }
  | { readonly kind: "invalid"; readonly errors: PortableSchemaError[] }
  | { readonly kind: "valid"; readonly body: unknown; readonly prepared: unknown }
  | { readonly kind: "failed"; readonly message: string }
);

/** A TOML file parsed (or why it does not parse); a worker that failed otherwise answers `failed`. */
export type TomlAnswer = { readonly id: number } & (
  | { readonly kind: "toml"; readonly document: TomlDocument }
  | { readonly kind: "failed"; readonly message: string }
);

export type WorkerAnswer = BodyAnswer | TomlAnswer;

/** The longest refused text an error carries: validationDetail shows 200 characters and an ellipsis past them. */
const SHOWN_TEXT = 201;

function portable(errors: readonly Record<string, unknown>[]): PortableSchemaError[] {
  return errors.map((error) => {
    const parentSchema = error.parentSchema as { description?: unknown } | undefined;
    const description = typeof parentSchema?.description === "string" ? parentSchema.description : undefined;
    return {
      instancePath: String(error.instancePath ?? ""),
      schemaPath: String(error.schemaPath ?? ""),
      keyword: String(error.keyword ?? ""),
      ...(typeof error.message === "string" ? { message: error.message } : {}),
      params: JSON.parse(JSON.stringify(error.params ?? {})) as Record<string, unknown>,
      ...(typeof error.data === "string" ? { data: error.data.slice(0, SHOWN_TEXT) } : {}),
      ...(description === undefined ? {} : { parentSchema: { description } }),
    };
  });
}

const validators = new Map<string, CheckedValidator>();
let ajv: ReturnType<typeof jsonBodyAjv> | undefined;

/** The operation's body validator, compiled from its catalogue schema on first use. */
function validatorOf(operation: string): CheckedValidator {
  let validate = validators.get(operation);
  if (validate === undefined) {
    const body = CATALOGUE.find((op) => op.id === operation)?.request.body;
    if (body?.encoding !== "json") throw new Error(`${operation} has no JSON body`);
    ajv ??= jsonBodyAjv();
    validate = checkedValidatorOf(ajv, body.schema as object);
    validators.set(operation, validate);
  }
  return validate;
}

/** Reads one body; the answer and what to hand over with it. */
export function readBody(task: BodyTask): { answer: BodyAnswer; transfer: ArrayBuffer[] } {
  const { id, operation } = task;
  if (!isPreparedOperation(operation)) {
    return { answer: { id, kind: "failed", message: `${operation} has no body preparation` }, transfer: [] };
  }
  const text = Buffer.from(task.bytes.buffer, task.bytes.byteOffset, task.bytes.byteLength).toString("utf8");
  const read = readJsonBodyText(text);
  if (read.kind === "empty") return { answer: { id, kind: "empty" }, transfer: [] };
  if (read.kind === "refused") return { answer: { id, kind: "refused", detail: read.detail }, transfer: [] };
  const body = read.value;
  const validate = validatorOf(operation);
  if (!validate(body)) {
    const errors = portable((validate.errors ?? []) as unknown as Record<string, unknown>[]);
    return { answer: { id, kind: "invalid", errors }, transfer: [] };
  }
  const preparation = preparationOf(operation);
  const prepared = preparation.prepare(body);
  preparation.strip(body, prepared);
  return { answer: { id, kind: "valid", body, prepared }, transfer: preparation.transfer(prepared) };
}

/**
 * How much lower a body worker's scheduling priority is than the event loop's. On Linux a nice
 * value is per thread, so lowering this thread's leaves the event loop's alone: when the cores
 * are busy, the loop serving every tenant runs first and a large body waits, rather than every
 * small request waiting behind a tenant's large one.
 */
const BELOW_THE_EVENT_LOOP = 10;

if (!isMainThread && parentPort !== null) {
  if (process.platform === "linux") {
    try {
      // 0: the calling thread (Linux keeps nice values per thread).
      setPriority(0, Math.min(19, getPriority(0) + BELOW_THE_EVENT_LOOP));
    } catch {
      // A priority that cannot be lowered leaves the worker as fast as the loop; it still runs.
    }
  }
  const port = parentPort;
  port.on("message", (task: WorkerTask) => {
    let reply: { answer: WorkerAnswer; transfer: ArrayBuffer[] };
    try {
      reply =
        task.kind === "toml"
          ? { answer: { id: task.id, kind: "toml", document: parseTomlDocument(task.bytes) }, transfer: [] }
          : readBody(task);
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      reply = { answer: { id: task.id, kind: "failed", message }, transfer: [] };
    }
    port.postMessage(reply.answer, reply.transfer);
  });
}
