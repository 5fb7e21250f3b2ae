#!/usr/bin/env node
// `npm run reliability`: the reliability and security trials (docs/reliability.md), one after
// another, each a built file `packages/<pkg>/dist/reliability/t<NN>-<name>.js` that prints one
// line `T<n> <name>: <figure>` and exits non-zero when a promise is broken. PostgreSQL is a
// throwaway cluster started here (scripts/postgres-cluster.mjs) unless KILN_TEST_POSTGRES_URL
// names one already.
//
//   npm run reliability                 # every trial
//   npm run reliability -- t02 t07      # only these
//   npm run reliability -- --gate       # the fast, load-independent set `npm test` runs
//
// Build first (`npm run build`): the trials are compiled with their packages.
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startThrowawayCluster } from "./postgres-cluster.mjs";
import { projectRuntime } from "./project-runtime.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** The trials run on the project's Node.js runtime, as the services and tests do (scripts/project-runtime.mjs). */
const runtime = projectRuntime(root);

/** Trials that take seconds, spawn nothing and time nothing: `npm test` runs them (docs/reliability.md). */
const GATE = ["t02", "t05", "t07", "t09"];

function trials() {
  const found = [];
  for (const pkg of readdirSync(join(root, "packages")).sort()) {
    const sources = join(root, "packages", pkg, "reliability");
    if (!existsSync(sources)) continue;
    const built = join(root, "packages", pkg, "dist", "reliability");
    for (const file of readdirSync(sources).filter((f) => /^t\d+-.*\.ts$/.test(f))) {
      const js = join(built, file.replace(/\.ts$/, ".js"));
      if (!existsSync(js)) {
        process.stderr.write(`reliability: packages/${pkg}/reliability/${file} is not built (run \`npm run build\`)\n`);
        process.exit(2);
      }
      found.push({ id: file.slice(0, file.indexOf("-")), file: js });
    }
  }
  return found.sort((a, b) => Number(a.id.slice(1)) - Number(b.id.slice(1)));
}

function runTrial(file, env) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(runtime.node, [file], { cwd: root, env, stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      process.stdout.write(chunk);
    });
    child.on("close", (code, signal) =>
      resolve({ code: code ?? (signal ? 128 : 1), stdout, ms: Date.now() - started }),
    );
  });
}

const args = process.argv.slice(2);
const gate = args.includes("--gate");
const wanted = args.filter((a) => !a.startsWith("--")).map((a) => a.toLowerCase().replace(/^t0*(\d)/, "t$1"));
const normal = (id) => id.replace(/^t0*(\d)/, "t$1");
const selected = trials().filter((t) =>
  gate ? GATE.map(normal).includes(normal(t.id)) : wanted.length === 0 || wanted.includes(normal(t.id)),
);
if (selected.length === 0) {
  process.stderr.write(`reliability: no trial matches ${args.join(" ")}\n`);
  process.exit(2);
}

const given = process.env.KILN_TEST_POSTGRES_URL;
const cluster = given === undefined ? await startThrowawayCluster() : { url: given, stop: async () => {} };
const stop = async (code) => {
  await cluster.stop();
  process.exit(code);
};
process.on("SIGINT", () => void stop(130));
process.on("SIGTERM", () => void stop(143));

const results = [];
try {
  for (const trial of selected) {
    const result = await runTrial(trial.file, { ...process.env, KILN_TEST_POSTGRES_URL: cluster.url });
    results.push({ ...trial, ...result });
  }
} finally {
  await cluster.stop();
}
const failed = results.filter((r) => r.code !== 0);
const timing = results.map((r) => `${r.id.toUpperCase()} ${Math.round(r.ms / 1000)} s`).join(", ");
process.stderr.write(
  `reliability: ${results.length - failed.length} of ${results.length} trials kept their promises (${timing})` +
    (failed.length === 0 ? "\n" : `; broken: ${failed.map((r) => r.id.toUpperCase()).join(", ")}\n`),
);
process.exit(failed.length === 0 ? 0 : 1);
