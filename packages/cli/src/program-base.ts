import { Command } from "commander";
import { CONFIGURATION_HELP } from "./config.js";

export const KILN_CLI_VERSION = "0.1.0";

/** The `kiln` command itself, before any subcommand registers: name, description, version, help. */
export function baseProgram(): Command {
  return (
    new Command("kiln")
      .description("kiln: remote Cargo builds, checks and tests")
      .version(KILN_CLI_VERSION)
      // Options after a subcommand belong to it (`kiln cargo test -V` passes -V to cargo).
      .enablePositionalOptions()
      .addHelpText("after", `\n${CONFIGURATION_HELP}`)
  );
}
