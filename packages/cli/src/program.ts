import type { Command } from "commander";
import { registerAuthCommands } from "./commands/auth.js";
import { registerCargoCommand } from "./commands/cargo.js";
import { registerJobsCommands } from "./commands/jobs.js";
import { registerMcpCommand } from "./commands/mcp-command.js";
import { registerReposCommands } from "./commands/repos.js";
import { registerSettingsCommand } from "./commands/settings.js";
import { registerTestsCommand } from "./commands/tests.js";
import { registerUsageCommand } from "./commands/usage.js";
import { registerOperatorCommands } from "./operator/register-operator-commands.js";
import { baseProgram } from "./program-base.js";

export { KILN_CLI_VERSION } from "./program-base.js";

/** The `kiln` command line: each command registers itself beside the others. */
export function buildProgram(): Command {
  const program = baseProgram();
  registerAuthCommands(program);
  registerCargoCommand(program);
  registerJobsCommands(program);
  registerMcpCommand(program);
  registerOperatorCommands(program);
  registerReposCommands(program);
  registerSettingsCommand(program);
  registerTestsCommand(program);
  registerUsageCommand(program);
  return program;
}
