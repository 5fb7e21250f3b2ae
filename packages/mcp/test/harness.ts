import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, type KilnClient } from "@kiln/client";
import { CATALOGUE, type Scope, silentLogger, systemClock } from "@kiln/contract";
import { buildApp, hashToken, mintToken } from "@kiln/server";
import {
  addPersonToTenant,
  createTenant,
  issueCliToken,
  LocalBlobStore,
  onboardRepository,
  type Storage,
} from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (this file runs from packages/mcp/dist/test). */
export const REPO_ROOT = resolve(here, "../../../..");
/** The `kiln` bin as it ships (packages/cli/bundle.mjs; packages/cli's test harness checks it is fresh). */
export const KILN_BIN = join(REPO_ROOT, "packages/cli/dist/bundle/main.js");
/**
 * The node `kiln mcp` runs on: the tests' own, or KILN_TEST_CLI_NODE, the machine's node in
 * scripts/run-tests.mjs's second pass of the CLI's tests (the bundle runs on its users' node from 20 up).
 */
export const CLI_NODE = process.env.KILN_TEST_CLI_NODE ?? process.execPath;
/** The MCP Inspector (2.x), its `mcp-inspector` bin (runInspector). */
const INSPECTOR_CLI = join(REPO_ROOT, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
/** The Inspector's exit code for a tool call that came back `isError: true`; it writes the result on stdout all the same. */
export const INSPECTOR_TOOL_ERROR = 5;

export interface KilnUnderTest {
  readonly endpoint: string;
  readonly storage: Storage;
  readonly tenant: string;
  /** An owner's CLI device token (mints agent credentials through the real API). */
  readonly ownerToken: string;
  readonly owner: KilnClient;
  /** Mints an agent credential with these scopes through POST /api/credentials. */
  mintAgent(scopes: readonly Scope[], name?: string): Promise<string>;
  onboard(repository: string): Promise<void>;
  close(): Promise<void>;
}

let counter = 0;

/**
 * A real kiln server on a real port (SQLite, local blobs, responses checked against the
 * contract), with a tenant whose owner holds a CLI token. With `localHost`, the embedded
 * host runs jobs in its sandbox. `storage` (closed with the server) replaces the fresh SQLite
 * database, e.g. with a PostgreSQL one (DIALECTS).
 */
export async function startKiln(options: { localHost?: boolean; storage?: Storage } = {}): Promise<KilnUnderTest> {
  const storage = options.storage ?? (await openSqliteForTest());
  const blobs = new LocalBlobStore(mkdtempSync(join(tmpdir(), "kiln-mcp-blobs-")));
  let wake = () => {};
  const app = buildApp({
    storage,
    blobs,
    clock: systemClock,
    version: "test",
    publicOrigin: "http://kiln.test",
    checkResponses: true,
    wakeScheduler: () => wake(),
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const endpoint = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  let host: { wake: () => void; stop: () => Promise<void> } | undefined;
  let lineageRoot: string | undefined;
  if (options.localHost === true) {
    // The embedded local host is not part of @kiln/server's public surface: its testing module
    // re-exports it, loaded only by the tests that run one.
    const module = await import("@kiln/server/testing");
    lineageRoot = mkdtempSync(join(tmpdir(), "kiln-mcp-lineages-"));
    host = await module.startLocalHost(
      { storage, blobs, clock: systemClock, log: silentLogger },
      {
        workRoot: mkdtempSync(join(tmpdir(), "kiln-mcp-attempts-")),
        lineageRoot,
        // Several attempts at once on a two-core machine (each attempt's cgroup still caps it).
        vcpus: 16,
      },
    );
    wake = host.wake;
  }
  counter += 1;
  const tenant = `mcp${process.pid}x${counter}`;
  await createTenant(storage, { id: tenant, displayName: "MCP Test" }, new Date());
  const { person } = await addPersonToTenant(
    storage,
    {
      tenantId: tenant,
      email: `owner@${tenant}.example`,
      displayName: "Owner",
      role: "owner",
    },
    new Date(),
  );
  const ownerToken = mintToken("cli");
  await issueCliToken(
    storage,
    {
      tenantId: tenant,
      personId: person.id,
      tokenHash: hashToken(ownerToken),
      requestingHost: "mcp-test",
    },
    new Date(),
  );
  const owner = createClient({ endpoint, token: ownerToken });
  let minted = 0;
  return {
    endpoint,
    storage,
    tenant,
    ownerToken,
    owner,
    async mintAgent(scopes, name) {
      minted += 1;
      const issued = await owner.call("credentials.create", {
        body: { name: name ?? `agent-${minted}`, scopes: [...scopes], expires_in_seconds: 3600 },
        idempotencyKey: `mint-${minted}-${name ?? ""}`,
      });
      return issued.credential;
    },
    async onboard(repository) {
      await onboardRepository(storage, { tenantId: tenant, name: repository, onboardedBy: "mcp-test" }, new Date());
    },
    async close() {
      await host?.stop();
      await app.close();
      await storage.close();
      if (lineageRoot !== undefined) rmSync(lineageRoot, { recursive: true, force: true });
    },
  };
}

/** Every non-empty combination of the given scopes. */
export function combinations<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let mask = 1; mask < 1 << items.length; mask += 1) {
    out.push(items.filter((_, i) => (mask & (1 << i)) !== 0));
  }
  return out;
}

/** The spec's MCP tool table (tool → operation, scope), read from the specification itself. */
export function specMcpTable(): { tool: string; operation: string; scope: string }[] {
  const candidates = [
    process.env.KILN_SPEC_PATH,
    join(REPO_ROOT, "../shared/spec/interface-specification.md"),
    join(REPO_ROOT, "../../shared/spec/interface-specification.md"),
  ].filter((p): p is string => p !== undefined);
  const found = candidates.find((p) => existsSync(p));
  if (found === undefined) throw new Error(`interface specification not found in ${candidates.join(", ")}`);
  return parseMcpTable(readFileSync(found, "utf8"));
}

/**
 * The tools kiln serves: the spec's table, then each kiln extension's (a catalogue operation the
 * spec lacks, marked `extension`; the spec gives every operation a tool).
 */
export function kilnMcpTable(): { tool: string; operation: string; scope: string }[] {
  // Operator operations are served to operators only: the spec gives them no tool, extensions neither.
  const extensions = CATALOGUE.filter((op) => op.extension !== undefined && op.security.kind !== "operator").map(
    (op) => {
      if (op.mcp === undefined) throw new Error(`extension ${op.id} names no MCP tool`);
      return { tool: op.mcp.tool, operation: op.id, scope: op.mcp.scope };
    },
  );
  return [...specMcpTable(), ...extensions];
}

export function parseMcpTable(text: string): { tool: string; operation: string; scope: string }[] {
  const start = text.indexOf("### MCP tool server");
  const end = text.indexOf("Resources:", start);
  if (start < 0 || end < 0) throw new Error("the spec has no MCP tool table");
  const rows = [];
  for (const line of text.slice(start, end).split("\n")) {
    const m = /^\| ([a-z_]+) \| ([a-z_.]+) \| ([a-z]+) \|$/.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined && m[3] !== undefined && m[1] !== "tool") {
      rows.push({ tool: m[1], operation: m[2], scope: m[3] });
    }
  }
  return rows;
}

/** Runs a command to completion, collecting its output. */
export function run(
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${command} ${args.join(" ")} timed out; stderr: ${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

/**
 * The MCP Inspector's CLI against `target` (a URL, or the command of a stdio server) with its
 * `options`, in a home directory of its own (it keeps its catalog and storage there). A stdio
 * server gets no environment but the Inspector's defaults and `serverEnv` (its `-e`).
 */
export async function runInspector(
  target: readonly string[],
  options: readonly string[],
  serverEnv: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), "kiln-inspector-home-"));
  const passed = Object.entries(serverEnv).flatMap(([name, value]) => ["-e", `${name}=${value}`]);
  try {
    // `--cli` first, then the target, then the Inspector's own options.
    return await run(process.execPath, [INSPECTOR_CLI, "--cli", ...target, ...passed, ...options], {
      env: { ...process.env, HOME: home },
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** The environment `kiln mcp` runs with: the agent credential and the API endpoint. */
export function kilnEnv(kiln: KilnUnderTest, token: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, KILN_ENDPOINT: kiln.endpoint, KILN_TOKEN: token, ...extra };
  for (const [name, value] of Object.entries(extra)) if (value === undefined) delete env[name];
  return env;
}

/** Tool names a client is offered, sorted. */
export async function toolNames(client: Client): Promise<string[]> {
  return (await client.listTools()).tools.map((t) => t.name).sort();
}

/** The text of a tool result's first content item, parsed as JSON. */
export function resultJson(result: unknown): unknown {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  const first = content[0];
  if (first?.type !== "text" || first.text === undefined) throw new Error(`no text content: ${JSON.stringify(result)}`);
  return JSON.parse(first.text);
}

/** A running `kiln mcp http …` process and the URL it printed on stderr. */
export interface HttpMcpProcess {
  readonly url: string;
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `kiln mcp http <address>` and waits for the bound address it prints on stderr. */
export function startHttpMcp(address: string, env: NodeJS.ProcessEnv): Promise<HttpMcpProcess> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(CLI_NODE, [KILN_BIN, "mcp", "http", address], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    let stdout = "";
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`kiln mcp http did not start; stderr: ${stderr}`));
    }, 30_000);
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const url = /listening on (http:\/\/\S+\/mcp)/.exec(stderr)?.[1];
      if (url !== undefined) {
        clearTimeout(timer);
        resolvePromise({
          url,
          stderr: () => stderr + stdout,
          stop: async () => {
            child.kill("SIGTERM");
            await exited;
          },
        });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`kiln mcp http exited ${code}; stderr: ${stderr}`));
    });
  });
}

/** One raw HTTP request (node:http, so Host and Origin are exactly what the test says). */
export function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolvePromise, reject) => {
    const target = new URL(url);
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: options.method ?? "POST",
        headers: options.headers ?? {},
      },
      (res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => {
          body += chunk.toString();
        });
        res.on("end", () => resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** A JSON-RPC initialize request body, as a client's first POST. */
export const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw-test", version: "0" } },
});

/** Headers a streamable HTTP client sends with a JSON-RPC POST. */
export const MCP_POST_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };
