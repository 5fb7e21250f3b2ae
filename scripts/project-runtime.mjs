// The Node.js that runs kiln-server, kiln-host, kiln-host-operator and the tests (issue 40), and
// the machine's own node, which runs the `kiln` CLI's second test pass. Plain Node, no
// dependencies: scripts/ensure-setup.mjs imports it before anything is installed.
//
// The services need Node.js 22 or later (libraries such as better-sqlite3 13 do; Node.js 20 gets
// no security fixes). A machine whose node is OWN_NODE_MINIMUM or later runs them on its own node.
// On an older one, ensure-setup installs Node.js RUNTIME_VERSION into the project from the npm registry: the
// platform package `node-<platform>-<arch>` (what the `node` package installs), which ships
// `bin/node` and its headers under `include/node`, so native addons build against it. It lives in
// node_modules/.kiln-runtime/ and node_modules/.bin/node links to it, so `npm start`, `npm test`,
// every other npm script and `npx kiln-server` run on it; the machine's node is left as it is.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Node.js 24 LTS ('Krypton'); a new patch release is taken by changing this line. */
export const RUNTIME_VERSION = "24.22.3";
/**
 * A machine's own node from this version up runs the services and tests itself: better-sqlite3 13
 * loads through Node-API 10, which Node.js has from 22.14 (no 20.x has it: there it crashes), and
 * the MCP Inspector the tests drive needs 22.19.
 */
export const OWN_NODE_MINIMUM = "22.19.0";

/** Whether `version` (`v22.20.0` or `22.20.0`) is `minimum` or later. */
export function isAtLeast(version, minimum) {
  const parts = (v) => v.replace(/^v/, "").split(".").map(Number);
  const [a, b] = [parts(version), parts(minimum)];
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
}

/** Where the installed runtimes and the record of the chosen one live. */
export const runtimeDirectory = (root) => join(root, "node_modules", ".kiln-runtime");
export const runtimeRecordFile = (root) => join(runtimeDirectory(root), "runtime.json");

/**
 * What ensure-setup chose, as it recorded it: `{ node, version, modules, machine: { node, version } }`
 * (`node` the runtime's executable, `modules` its native-module ABI, `machine` the node the project
 * was set up from). Exits naming the fix when setup has not run.
 */
export function projectRuntime(root) {
  const file = runtimeRecordFile(root);
  const record = existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : null;
  if (record === null || !existsSync(record.node)) {
    process.stderr.write(
      "kiln: the project's Node.js runtime is not set up: run `node scripts/ensure-setup.mjs --for test` (npm test and npm start run it)\n",
    );
    process.exit(2);
  }
  return record;
}
