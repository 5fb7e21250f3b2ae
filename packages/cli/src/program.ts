import { Command } from "commander";
import { registerAuthCommands } from "./commands/auth.js";
import { registerCargoCommand } from "./commands/cargo.js";
import { registerJobsCommands } from "./commands/jobs.js";
import { registerMcpCommand } from "./commands/mcp-command.js";
import { registerSettingsCommand } from "./commands/settings.js";
import { registerUsageCommand } from "./commands/usage.js";
import { CONFIGURATION_HELP } from "./config.js";
import { registerOperatorCommands } from "./operator/register-operator-commands.js";

export const KILN_CLI_VERSION = "0.1.0";

/** The `kiln` command line: each command registers itself beside the others. */
export function buildProgram(): Command {
  const program = new Command("kiln")
    .description("kiln: remote Cargo builds, checks and tests")
    .version(KILN_CLI_VERSION)
    // Options after a subcommand belong to it (`kiln cargo test -V` passes -V to cargo).
    .enablePositionalOptions()
    .addHelpText("after", `\n${CONFIGURATION_HELP}`);
  registerAuthCommands(program);
  registerCargoCommand(program);
  registerJobsCommands(program);
  registerMcpCommand(program);
  registerOperatorCommands(program);
  registerSettingsCommand(program);
  registerUsageCommand(program);
  return program;
}
