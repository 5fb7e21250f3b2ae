#!/usr/bin/env node
/**
 * `kiln cargo …` is the inner loop, run after every edit: it loads only its own command. The
 * full program also loads the MCP server, the operator commands derived from the catalogue and
 * their libraries, which took about half of the CLI's start (docs/benchmarks.md, issue 21).
 */
const { quietOnClosedOutput } = await import("./output.js");
quietOnClosedOutput();
if (process.argv[2] === "cargo") {
  const [{ baseProgram }, { registerCargoCommand }] = await Promise.all([
    import("./program-base.js"),
    import("./commands/cargo.js"),
  ]);
  const program = baseProgram();
  registerCargoCommand(program);
  await program.parseAsync(process.argv);
} else {
  const { buildProgram } = await import("./program.js");
  await buildProgram().parseAsync(process.argv);
}
