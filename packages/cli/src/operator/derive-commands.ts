import { CATALOGUE, type Operation } from "@kiln/contract";
import { kebab, type SimpleKind, simpleKindOf, type TSchema } from "./schema-values.js";

/** One request member the command line carries as a typed value: a path parameter or an option. */
export interface DerivedValue {
  /** The member's name in the request (`policy_revision`). */
  readonly member: string;
  /** Its command-line word (`policy-revision`: the option `--policy-revision`). */
  readonly word: string;
  readonly kind: SimpleKind;
  readonly required: boolean;
  readonly description: string;
}

/** The command derived from one operator operation of the catalogue. */
export interface DerivedCommand {
  readonly operation: Operation;
  /** The words after `kiln operator` (`["hosts", "drain"]` for operator.hosts.drain). */
  readonly words: readonly string[];
  /** Path parameters, positional in the order the path names them. */
  readonly positionals: readonly DerivedValue[];
  /** Query parameters as `--name value`. */
  readonly queryOptions: readonly DerivedValue[];
  /** Simple members of a closed JSON body as `--name value` (the rest travel in --body). */
  readonly memberOptions: readonly DerivedValue[];
  /**
   * Body members a command line fills when not given: a member that accepts the literal
   * `command_line` records the surface an invocation was made from (HostRecoveryInvocation.surface).
   */
  readonly bodyDefaults: Readonly<Record<string, unknown>>;
}

/** Options every derived command has; a request member of the same name is left to --body. */
export const COMMON_OPTION_WORDS = new Set(["json", "body", "body-file", "server", "credential-file", "help"]);

/** The operations the operator CLI derives commands from: every entry an operator session performs. */
export const operatorOperations = (catalogue: readonly Operation[] = CATALOGUE): Operation[] =>
  catalogue.filter((op) => op.security.kind === "operator");

/** The command words of an operation id: `operator.hosts.kernel_log` → `hosts kernel-log`. */
export function commandWordsOf(id: string): string[] {
  const [surface, ...rest] = id.split(".");
  if (surface !== "operator" || rest.length === 0) throw new Error(`${id} is not an operator operation id`);
  return rest.map(kebab);
}

const describe = (schema: TSchema, fallback: string) =>
  typeof schema.description === "string" ? schema.description : fallback;

function valuesOf(
  id: string,
  part: string,
  schema: TSchema | undefined,
  order: readonly string[] | undefined,
): DerivedValue[] {
  if (schema === undefined) return [];
  const properties = (schema.properties ?? {}) as Record<string, TSchema>;
  const required = new Set((schema.required ?? []) as string[]);
  return (order ?? Object.keys(properties)).map((member) => {
    const memberSchema = properties[member];
    const kind = memberSchema === undefined ? undefined : simpleKindOf(memberSchema);
    if (memberSchema === undefined || kind === undefined) {
      throw new Error(`${id}: ${part} ${member} has no command-line form`);
    }
    return {
      member,
      word: kebab(member),
      kind,
      required: required.has(member),
      description: describe(memberSchema, member),
    };
  });
}

/** Path parameter names in the order the path names them. */
const pathOrder = (path: string): string[] =>
  [...path.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1] ?? "");

/** A closed JSON body's members that one word carries, except names the command already uses. */
function memberOptionsOf(body: TSchema, taken: ReadonlySet<string>): DerivedValue[] {
  if (body.type !== "object" || body.additionalProperties !== false) return [];
  const properties = (body.properties ?? {}) as Record<string, TSchema>;
  const required = new Set((body.required ?? []) as string[]);
  const options: DerivedValue[] = [];
  for (const [member, schema] of Object.entries(properties)) {
    const kind = simpleKindOf(schema);
    if (kind === undefined || taken.has(kebab(member))) continue;
    options.push({
      member,
      word: kebab(member),
      kind,
      required: required.has(member),
      description: describe(schema, member),
    });
  }
  return options;
}

function bodyDefaultsOf(body: TSchema | undefined): Record<string, unknown> {
  const defaults: Record<string, unknown> = {};
  const properties = (body?.properties ?? {}) as Record<string, TSchema>;
  for (const [member, schema] of Object.entries(properties)) {
    const kind = simpleKindOf(schema);
    if (kind?.kind === "choice" && kind.choices.includes("command_line")) defaults[member] = "command_line";
  }
  return defaults;
}

/**
 * The operator CLI, derived from the catalogue alone: one command per operator operation.
 * Throws when two operations would share command words, or when one operation's words are a
 * prefix of another's (a command cannot also be a group), or a path or query parameter has no
 * one-word form: a catalogue change that breaks the derivation fails loudly, not silently.
 */
export function deriveOperatorCommands(catalogue: readonly Operation[] = CATALOGUE): DerivedCommand[] {
  const commands = operatorOperations(catalogue).map((operation): DerivedCommand => {
    const positionals = valuesOf(operation.id, "path parameter", operation.request.params, pathOrder(operation.path));
    const queryOptions = valuesOf(operation.id, "query parameter", operation.request.query, undefined);
    for (const option of queryOptions) {
      if (COMMON_OPTION_WORDS.has(option.word))
        throw new Error(`${operation.id}: query parameter ${option.member} shadows --${option.word}`);
    }
    const body = operation.request.body?.encoding === "json" ? operation.request.body.schema : undefined;
    const taken = new Set([...COMMON_OPTION_WORDS, ...queryOptions.map((o) => o.word)]);
    return {
      operation,
      words: commandWordsOf(operation.id),
      positionals,
      queryOptions,
      memberOptions: body === undefined ? [] : memberOptionsOf(body, taken),
      bodyDefaults: bodyDefaultsOf(body),
    };
  });
  const byPath = new Map<string, string>();
  for (const command of commands) {
    const key = command.words.join(" ");
    const other = byPath.get(key);
    if (other !== undefined) throw new Error(`${other} and ${command.operation.id} both derive \`${key}\``);
    byPath.set(key, command.operation.id);
  }
  for (const command of commands) {
    const key = command.words.join(" ");
    for (const [path, id] of byPath) {
      if (path.startsWith(`${key} `)) throw new Error(`${command.operation.id} (\`${key}\`) is a group of ${id}`);
    }
  }
  return commands;
}
