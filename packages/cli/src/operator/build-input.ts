import { readFileSync } from "node:fs";
import { type InputProblem, inputProblems } from "@kiln/client";
import { CliExit, EXIT } from "../output.js";
import type { DerivedCommand, DerivedValue } from "./derive-commands.js";
import { kebab, parseWord } from "./schema-values.js";

/** A derived command's typed request: what the client's `call(id, input)` takes. */
export interface OperatorInput {
  params?: Record<string, unknown>;
  query?: Record<string, unknown>;
  body?: unknown;
}

/** Command-line values as commander hands them over: by option word, not attribute name. */
export interface GivenValues {
  readonly positionals: readonly string[];
  /** Option word (`policy-revision`) → the word given. */
  readonly options: ReadonlyMap<string, string>;
  readonly body?: string;
  readonly bodyFile?: string;
}

const usage = (message: string): never => {
  throw new CliExit(EXIT.error, message);
};

function typed(value: DerivedValue, word: string, where: string): unknown {
  try {
    return parseWord(value.kind, word);
  } catch (error) {
    return usage(`${where}: ${(error as Error).message}`);
  }
}

/** A schema problem named as the command line names it: `<id>`, `--page`, `body/policy_revision`. */
function describeProblem(problem: InputProblem): string {
  const member = problem.path.slice(1);
  const where =
    problem.part === "params"
      ? `<${member}>`
      : problem.part === "query"
        ? member === ""
          ? "query"
          : `--${kebab(member.split("/")[0] ?? "")}`
        : member === ""
          ? "body"
          : `body/${member}`;
  return `${where}: ${problem.message}`;
}

function readBodyText(given: GivenValues): string | undefined {
  if (given.body !== undefined && given.bodyFile !== undefined) usage("give --body or --body-file, not both");
  if (given.body !== undefined) return given.body;
  if (given.bodyFile === undefined) return undefined;
  try {
    return readFileSync(given.bodyFile === "-" ? 0 : given.bodyFile, "utf8");
  } catch (error) {
    return usage(`--body-file ${given.bodyFile} cannot be read (${(error as { code?: string }).code ?? "unreadable"})`);
  }
}

function jsonBody(command: DerivedCommand, given: GivenValues): unknown {
  const text = readBodyText(given);
  let body: unknown = {};
  if (text !== undefined) {
    try {
      body = JSON.parse(text);
    } catch {
      usage(`the body is not JSON (${given.body !== undefined ? "--body" : "--body-file"})`);
    }
  }
  const members = command.memberOptions.filter((o) => given.options.has(o.word));
  if (members.length > 0 || Object.keys(command.bodyDefaults).length > 0) {
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return usage("the body must be a JSON object to combine it with member options");
    }
    const object = { ...command.bodyDefaults, ...(body as Record<string, unknown>) };
    for (const option of members) {
      object[option.member] = typed(option, given.options.get(option.word) ?? "", `--${option.word}`);
    }
    body = object;
  }
  return body;
}

function bytesBody(given: GivenValues): Uint8Array {
  if (given.body !== undefined) usage("this operation takes raw bytes: give them with --body-file");
  if (given.bodyFile === undefined) return usage("this operation takes raw bytes: give them with --body-file");
  try {
    return readFileSync(given.bodyFile === "-" ? 0 : given.bodyFile);
  } catch (error) {
    return usage(`--body-file ${given.bodyFile} cannot be read (${(error as { code?: string }).code ?? "unreadable"})`);
  }
}

/**
 * The request a derived command sends, checked against the operation's own schemas before
 * anything is sent: a value the service would refuse `invalid_request` is reported here, with
 * the schema's words, and no request (nor operator session) is made.
 */
export function buildOperatorInput(command: DerivedCommand, given: GivenValues): OperatorInput {
  const { request } = command.operation;
  const input: OperatorInput = {};
  if (command.positionals.length > 0) {
    input.params = Object.fromEntries(
      command.positionals.map((p, i) => [p.member, typed(p, given.positionals[i] ?? "", `<${p.member}>`)]),
    );
  }
  if (command.queryOptions.length > 0) {
    const query: Record<string, unknown> = {};
    for (const option of command.queryOptions) {
      const word = given.options.get(option.word);
      if (word !== undefined) query[option.member] = typed(option, word, `--${option.word}`);
    }
    input.query = query;
  }
  if (request.body?.encoding === "json") input.body = jsonBody(command, given);
  else if (request.body?.encoding === "bytes") input.body = bytesBody(given);
  else if (given.body !== undefined || given.bodyFile !== undefined) usage(`${command.operation.id} takes no body`);
  // At most five lines: the first problems are the ones to fix first.
  const problems = inputProblems(command.operation.id, input).slice(0, 5).map(describeProblem);
  if (problems.length > 0) usage(`the request does not match ${command.operation.id}:\n  ${problems.join("\n  ")}`);
  return input;
}
