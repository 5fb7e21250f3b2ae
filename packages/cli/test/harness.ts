import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, statSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Embedded, startEmbedded } from "@kiln/server/testing";
import { DIALECTS } from "@kiln/storage/testing";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (this file runs from packages/cli/dist/test). */
export const REPO_ROOT = resolve(here, "../../../..");
/** The built `kiln` bin as it ships: tsc's output bundled (packages/cli/bundle.mjs). */
export const KILN_BIN = join(REPO_ROOT, "packages/cli/dist/bundle/main.js");
/**
 * The node the bundle runs on: the tests' own, or KILN_TEST_CLI_NODE, which scripts/run-tests.mjs
 * sets to the machine's node for the CLI's second pass (the CLI runs on its users' node from 20
 * up while kiln's services need 22).
 */
export const CLI_NODE = process.env.KILN_TEST_CLI_NODE ?? process.execPath;
/** Whether the bundle runs on the tests' own node (the first pass), not the machine's (the second). */
export const CLI_ON_THE_RUNTIME = CLI_NODE === process.execPath;
/**
 * The engines the tests of the CLI against a real server run on: both on the runtime; on the
 * machine's node (the second pass) SQLite alone, as what that pass tests is the CLI on that node,
 * and a server's answers to it are the same on either engine, which the runtime's pass shows.
 */
export const CLI_DIALECTS = CLI_ON_THE_RUNTIME ? DIALECTS : DIALECTS.filter((d) => d.name === "sqlite");
assertBundleFresh();

/**
 * The tests run the bundle, not tsc's output it is made from: a bundle older than that output
 * (a build by `tsc -b` alone) would test yesterday's CLI, so it is refused, naming the fix.
 */
function assertBundleFresh(): void {
  const newest = (dir: string): number =>
    Math.max(
      0,
      ...readdirSync(dir, { withFileTypes: true }).map((e) =>
        e.isDirectory() ? newest(join(dir, e.name)) : e.name.endsWith(".js") ? statSync(join(dir, e.name)).mtimeMs : 0,
      ),
    );
  const sources = newest(join(REPO_ROOT, "packages/cli/dist/src"));
  let bundled = 0;
  try {
    bundled = statSync(KILN_BIN).mtimeMs;
  } catch {
    // absent: refused below
  }
  if (bundled < sources) {
    throw new Error(
      `${KILN_BIN} is missing or older than packages/cli/dist/src: run npm run build (it bundles the CLI)`,
    );
  }
}

/**
 * The server's test fixtures (real app, real storage), @kiln/server/testing, loaded when a test
 * first needs a server (the CLI's pure tests share this harness and never load one).
 */
export const serverTesting = () => import("@kiln/server/testing");

/** The embedded setup (real app, SQLite, local host, sandbox executor) listening on loopback. */
export async function startListeningEmbedded(
  options: Parameters<typeof startEmbedded>[0] = {},
): Promise<Embedded & { endpoint: string }> {
  const embedded = await (await serverTesting()).startEmbedded(options);
  await embedded.app.listen({ host: "127.0.0.1", port: 0 });
  const endpoint = `http://127.0.0.1:${(embedded.app.server.address() as AddressInfo).port}`;
  return { ...embedded, endpoint };
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunningCli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  done: Promise<CliRun>;
}

/** A fresh XDG config directory, so no test touches the real ~/.config/kiln. */
export const freshConfigHome = () => mkdtempSync(join(tmpdir(), "kiln-cli-config-"));

/** The layout cache of CLI runs that name none (one per test process): never the real ~/.cache/kiln. */
let sharedCacheHome: string | undefined;

/**
 * Starts the built `kiln` with `args` in `cwd`; env is merged over a clean base (no KILN_* leaks
 * in; XDG_CACHE_HOME a temporary directory unless the test names one).
 */
export function startCli(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): RunningCli {
  sharedCacheHome ??= mkdtempSync(join(tmpdir(), "kiln-cli-cache-"));
  const base: NodeJS.ProcessEnv = { XDG_CACHE_HOME: sharedCacheHome };
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("KILN_") && name !== "XDG_CACHE_HOME") base[name] = value;
  }
  const child = spawn(CLI_NODE, [KILN_BIN, ...args], {
    cwd: options.cwd ?? process.cwd(),
    env: { ...base, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const done = new Promise<CliRun>((resolvePromise, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => resolvePromise({ code, signal, stdout, stderr }));
  });
  return { child, stdout: () => stdout, stderr: () => stderr, done };
}

export function runCli(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<CliRun> {
  return startCli(args, options).done;
}

/** Resolves once `predicate` holds, polling every 50 ms; throws after `timeoutMs` with `describe()`. */
export async function until(predicate: () => boolean | Promise<boolean>, timeoutMs: number, describe: () => string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${describe()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
