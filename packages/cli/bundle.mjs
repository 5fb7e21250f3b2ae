#!/usr/bin/env node
// The `kiln` bin as it ships: tsc's output (dist/src, one ES module per source file) bundled by
// esbuild into dist/bundle, split by command so that `kiln cargo` evaluates only its own code.
//
// Why: Node resolves, reads and links every ES module one by one, and the CLI's modules with
// the contract's and TypeBox's (247 files) made most of `kiln cargo`'s start, which a developer
// pays on every run of the inner loop: 150 ms of module loading against 30 ms bundled on this
// machine (docs/benchmarks.md, issue 21). Run by `npm run build` and scripts/ensure-setup.mjs
// after tsc; packages/cli/test/harness.ts refuses a bundle older than tsc's output.
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = join(here, "dist", "bundle");
// esbuild names chunks by their content and never removes the last build's: without this the
// directory keeps every build's chunks (megabytes each), and a stale one could mask a missing one.
rmSync(outdir, { recursive: true, force: true });

await build({
  entryPoints: [join(here, "dist", "src", "main.js")],
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // The CommonJS libraries inside (commander, ajv …) call require() for Node's own modules.
  banner: {
    js: "import { createRequire as __kilnCreateRequire } from 'node:module'; const require = __kilnCreateRequire(import.meta.url);",
  },
  sourcemap: "linked",
  logLevel: "warning",
});
