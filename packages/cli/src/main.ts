#!/usr/bin/env node
/**
 * `kiln cargo …` is the inner loop, run after every edit: it loads only its own command. The
 * full program also loads the MCP server, the operator commands derived from the catalogue and
 * their libraries, which took about half of the CLI's start (docs/benchmarks.md, issue 21).
 *
 * Node's on-disk compile cache (Node 22.1 and later; absent on older nodes, which run the bundle
 * without it) keeps V8's compiled code of the bundle between runs, as tsc does for itself: each
 * later run skips compiling the half megabyte `kiln cargo` loads (docs/benchmarks.md, issue 38).
 */
import nodeModule from "node:module";

nodeModule.enableCompileCache?.();
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
