import { Command } from "commander";
import { registerMcpCommand } from "./commands/mcp-command.js";

export const KILN_CLI_VERSION = "0.1.0";

/** The `kiln` command line: each command registers itself beside the others. */
export function buildProgram(): Command {
  const program = new Command("kiln")
    .description("kiln: remote Cargo builds, checks and tests")
    .version(KILN_CLI_VERSION);
  registerMcpCommand(program);
  return program;
}
