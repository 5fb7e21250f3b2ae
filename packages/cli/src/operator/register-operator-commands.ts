import { serverSentEvents } from "@kiln/client";
import type { OperationId } from "@kiln/contract";
import { type Command, Option } from "commander";
import { err, out, printJson, printJsonLine, runCommand } from "../output.js";
import { buildOperatorInput } from "./build-input.js";
import { type DerivedCommand, type DerivedValue, deriveOperatorCommands } from "./derive-commands.js";
import { connectOperator, OPERATOR_CONFIGURATION_HELP } from "./operator-connection.js";
import { renderDocument } from "./render-document.js";
import { placeholderOf } from "./schema-values.js";

interface CommonFlags {
  json?: boolean;
  server?: string;
  credentialFile?: string;
  body?: string;
  bodyFile?: string;
}

/** A derived command's usage line after `kiln operator`: its words and positional parameters. */
export const usageOf = (command: DerivedCommand): string =>
  [...command.words, ...command.positionals.map((p) => `<${p.member}>`)].join(" ");

/** The list `kiln operator --help` prints: every derived command with its operation's summary. */
export function derivedCommandsHelp(commands: readonly DerivedCommand[]): string {
  const width = Math.max(...commands.map((c) => usageOf(c).length));
  const sorted = [...commands].sort((a, b) => (usageOf(a) < usageOf(b) ? -1 : 1));
  return [
    "Commands (one per operator operation of the catalogue; `kiln operator <command> --help` for its options):",
    ...sorted.map((c) => `  ${usageOf(c).padEnd(width)}  ${c.operation.summary}`),
  ].join("\n");
}

const valueOption = (value: DerivedValue, what: string, fallback?: unknown) =>
  new Option(
    `--${value.word} <${placeholderOf(value.kind)}>`,
    `${value.description} (${what}${value.required ? "; required" : ""}${fallback === undefined ? "" : `; the CLI sends ${String(fallback)} unless given`})`,
  );

/** Sends the derived command's request in an operator session and prints the answer. */
async function perform(
  command: DerivedCommand,
  positionals: string[],
  options: Map<string, string>,
  flags: CommonFlags,
): Promise<void> {
  const input = buildOperatorInput(command, {
    positionals,
    options,
    ...(flags.body === undefined ? {} : { body: flags.body }),
    ...(flags.bodyFile === undefined ? {} : { bodyFile: flags.bodyFile }),
  });
  const { operation } = command;
  const session = await connectOperator({
    ...(flags.server === undefined ? {} : { server: flags.server }),
    ...(flags.credentialFile === undefined ? {} : { credentialFile: flags.credentialFile }),
  });
  let answer: unknown;
  try {
    answer = await session.client.call(operation.id as OperationId, input as never);
  } finally {
    // operator.session.delete has just ended the session itself.
    if (operation.id !== "operator.session.delete") {
      await session.close().catch((error: Error) => err(`kiln: the operator session was not ended: ${error.message}`));
    }
  }
  switch (operation.response.encoding) {
    case "bytes":
      // Journal, kernel log, evidence: the bytes as served, for a pipe or a file.
      process.stdout.write(answer as Uint8Array);
      return;
    case "json":
      if (flags.json) printJson(answer);
      else out(renderDocument(answer));
      return;
    case "sse":
      for await (const event of serverSentEvents(answer as Response)) {
        if (flags.json) printJsonLine(event);
        else out(`${event.event}: ${JSON.stringify(event.data)}`);
      }
      return;
    case "none":
      if (!flags.json) out(`${operation.id}: done`);
      return;
  }
}

/**
 * `kiln operator …`: one command per operator operation, derived from the catalogue (see
 * derive-commands.ts), so a new operator operation gets its command without an edit here.
 */
export function registerOperatorCommands(program: Command): void {
  const commands = deriveOperatorCommands();
  const operator = program
    .command("operator")
    .description("operate a kiln deployment over the operator API (one command per operator operation)")
    .addHelpText("after", `\n${derivedCommandsHelp(commands)}\n\n${OPERATOR_CONFIGURATION_HELP}`);
  const groups = new Map<string, Command>();
  for (const command of commands) {
    let parent = operator;
    for (let i = 1; i < command.words.length; i++) {
      const key = command.words.slice(0, i).join(" ");
      let group = groups.get(key);
      if (group === undefined) {
        group = parent.command(command.words[i - 1] ?? "").description(`kiln operator ${key} …`);
        groups.set(key, group);
      }
      parent = group;
    }
    const leaf = parent.command(command.words.at(-1) ?? "").description(command.operation.summary);
    for (const positional of command.positionals) leaf.argument(`<${positional.member}>`, positional.description);
    const valueOptions = [
      ...command.queryOptions.map((value) => ({ value, option: valueOption(value, "query") })),
      ...command.memberOptions.map((value) => ({
        value,
        option: valueOption(value, "body member", command.bodyDefaults[value.member]),
      })),
    ];
    for (const { option } of valueOptions) leaf.addOption(option);
    const body = command.operation.request.body;
    if (body?.encoding === "json") {
      leaf.option("--body <json>", "the request body as JSON (member options are merged over it)");
      leaf.option("--body-file <file>", "read the JSON request body from a file (- for standard input)");
    } else if (body?.encoding === "bytes") {
      leaf.option("--body-file <file>", "the request body's bytes (- for standard input)");
    }
    leaf
      .option("--json", "print the response document as JSON (a refusal as the Refusal document)")
      .option("--server <url>", "the kiln server (default KILN_ENDPOINT, the config file, http://127.0.0.1:7860)")
      .option("--credential-file <file>", "a file holding the operator credential (default KILN_OPERATOR_CREDENTIAL)")
      .action((...args: unknown[]) => {
        const positionals = args.slice(0, command.positionals.length) as string[];
        const flags = leaf.opts<CommonFlags & Record<string, string>>();
        const options = new Map<string, string>();
        for (const { value, option } of valueOptions) {
          const given = flags[option.attributeName()];
          if (given !== undefined) options.set(value.word, given);
        }
        return runCommand(flags.json === true, () => perform(command, positionals, options, flags));
      });
  }
}
