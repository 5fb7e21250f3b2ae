/**
 * Sending one request to a catalogued operation over `app.inject` and reading its answer,
 * event streams included (a stream that opens never ends by itself: its status and type are
 * the answer, and the client goes away).
 */
import type { Operation } from "@kiln/contract";
import type { InjectOptions } from "fastify";
import type { TestApp } from "../src/testing/harness.js";
import type { Answer } from "./answers.js";

export async function answerOf(t: TestApp, op: Operation, request: InjectOptions): Promise<Answer> {
  if (op.response.encoding !== "sse") {
    const res = await t.app.inject(request);
    return { status: res.statusCode, contentType: String(res.headers["content-type"] ?? ""), body: res.body };
  }
  const abort = new AbortController();
  const res = await t.app.inject({ ...request, payloadAsStream: true, signal: abort.signal });
  const contentType = String(res.headers["content-type"] ?? "");
  if (contentType.startsWith("text/event-stream")) {
    abort.abort();
    return { status: res.statusCode, contentType, body: "" };
  }
  let body = "";
  for await (const chunk of res.stream()) body += String(chunk);
  return { status: res.statusCode, contentType, body };
}

const PARAM = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The names of an operation's path parameters, in path order. */
export function paramNames(op: Operation): string[] {
  return [...op.path.matchAll(PARAM)].map((m) => m[1] ?? "");
}

/** `op.path` with each parameter replaced by its value in `values` (percent-encoded). */
export function urlOf(op: Operation, values: Readonly<Record<string, string>>): string {
  return op.path.replace(PARAM, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`${op.id}: no value for path parameter ${name}`);
    return encodeURIComponent(value);
  });
}

/** A value for each path parameter that its schema accepts (names no record of anyone's). */
export function placeholderParams(op: Operation): Record<string, string> {
  const properties = (op.request.params?.properties ?? {}) as Record<string, { type?: string; pattern?: string }>;
  const values: Record<string, string> = {};
  for (const name of paramNames(op)) {
    const schema = properties[name] ?? {};
    if (schema.type === "integer" || schema.type === "number") values[name] = "1";
    else {
      const candidate = name === "owner" ? "acme" : name === "name" ? "widget" : "x1";
      if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(candidate)) {
        throw new Error(`${op.id}: ${candidate} does not fit path parameter ${name} (${schema.pattern})`);
      }
      values[name] = candidate;
    }
  }
  return values;
}

let keys = 0;

/** The smallest request of `op` with `headers`: placeholder path, `{}` for a JSON body, a fresh key. */
export function minimalRequest(
  op: Operation,
  headers: Readonly<Record<string, string>>,
  params: Readonly<Record<string, string>> = placeholderParams(op),
): InjectOptions {
  const all: Record<string, string> = { ...headers };
  if (op.keyed) all["idempotency-key"] = `rel-min-${process.pid}-${++keys}`;
  let payload: string | Buffer | undefined;
  if (op.request.body?.encoding === "json") {
    all["content-type"] = "application/json";
    payload = "{}";
  } else if (op.request.body?.encoding === "bytes") {
    all["content-type"] = "application/octet-stream";
    payload = Buffer.from("x");
  }
  return { method: op.method, url: urlOf(op, params), headers: all, ...(payload === undefined ? {} : { payload }) };
}
