/**
 * T13 MCP, against a real kiln server (SQLite) and the built `kiln` bin:
 *  - Origin rule: `kiln mcp http` on loopback refuses every foreign Origin and every
 *    non-loopback Host (DNS rebinding), with or without a caller token, pages on other loopback
 *    ports included; its own origin passes;
 *  - caller-token length: a configured KILN_MCP_HTTP_TOKEN under 32 characters (after trimming)
 *    refuses to start, on loopback and beyond; beyond loopback none at all refuses too; 32 starts;
 *    with a token configured, no request without exactly it is served;
 *  - stdout carries only JSON-RPC: a stdio session of well-formed, refused, unknown and
 *    malformed requests, `--help`, and refused startups write nothing else on stdout.
 * Prints `T13 MCP: …` and exits non-zero when any of these is broken (same protocol as
 * packages/server/reliability/trial.ts; this package cannot import that one).
 */
import { spawn } from "node:child_process";
import {
  INITIALIZE,
  KILN_BIN,
  kilnEnv,
  MCP_POST_HEADERS,
  rawRequest,
  run,
  startHttpMcp,
  startKiln,
} from "../test/harness.js";

const CALLER_TOKEN = "t13-caller-token-0123456789abcdefghijklmnop";

const FOREIGN_ORIGINS = [
  "http://evil.example",
  "https://evil.example",
  "http://127.0.0.1.evil.example",
  "http://localhost.evil.example:7861",
  "http://evil.example:7861",
  "null",
  "file://",
  "ftp://127.0.0.1",
  "chrome-extension://abcdefghijklmnop",
  "http://[::ffff:7f00:1].evil",
  "not a url",
  "http://user@evil.example",
  // Another local port is another site: a dev server's page must not act with the credential.
  "http://localhost:6274",
  "http://127.0.0.1:3000",
  "http://[::1]:8080",
];
/** The listener's own origin under each loopback name. */
const ownOrigins = (url: string) =>
  ["127.0.0.1", "localhost", "[::1]"].map((host) => `http://${host}:${new URL(url).port}`);
const FOREIGN_HOSTS = ["evil.example", "evil.example:7861", "127.0.0.1.nip.io", "localhost.evil.example", "10.0.0.1"];

interface Tally {
  figures: string[];
  broken: string[];
}

/**
 * A `kiln mcp` stdio session: each line written once the server serves, stdin closed once every
 * id in `awaited` is answered (or after 30 s, leaving the missing ones unanswered); its stdout.
 */
function stdioSession(
  env: NodeJS.ProcessEnv,
  lines: readonly string[],
  awaited: readonly number[],
): Promise<{ stdout: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [KILN_BIN, "mcp"], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let written = false;
    const answered = new Set<unknown>();
    const finish = () => {
      if (!child.stdin.writableEnded) child.stdin.end();
    };
    const patience = setTimeout(finish, 30_000);
    const hung = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`kiln mcp stdio session did not exit; stderr: ${stderr}`));
    }, 60_000);
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      for (const line of stdout.split("\n")) {
        try {
          answered.add((JSON.parse(line) as { id?: unknown }).id);
        } catch {
          // a partial line, or not JSON (counted by the caller)
        }
      }
      if (awaited.every((id) => answered.has(id))) finish();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      // Requests go once the server says it serves (it reads the credential's scopes first).
      if (!written && stderr.includes("serving on stdio")) {
        written = true;
        for (const line of lines) child.stdin.write(`${line}\n`);
      }
    });
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(patience);
      clearTimeout(hung);
      resolve({ stdout, code });
    });
  });
}

/** stdout lines that are not JSON-RPC 2.0 messages. */
function notJsonRpc(stdout: string): string[] {
  return stdout
    .split("\n")
    .filter((l) => l.length > 0)
    .filter((line) => {
      try {
        return (JSON.parse(line) as { jsonrpc?: string }).jsonrpc !== "2.0";
      } catch {
        return true;
      }
    });
}

const rpc = (id: number | null, method: string, params: unknown = {}) =>
  JSON.stringify({ jsonrpc: "2.0", ...(id === null ? {} : { id }), method, params });

async function main(tally: Tally): Promise<void> {
  const kiln = await startKiln();
  try {
    const token = await kiln.mintAgent(["read", "submit"], "t13-agent");
    await kiln.onboard("acme/widget");

    // ---- Origin rule.
    let originProbes = 0;
    let admitted = 0;
    const open = await startHttpMcp("127.0.0.1:0", kilnEnv(kiln, token));
    const guarded = await startHttpMcp("127.0.0.1:0", kilnEnv(kiln, token, { KILN_MCP_HTTP_TOKEN: CALLER_TOKEN }));
    try {
      for (const [server, auth] of [
        [open, {}],
        [guarded, { authorization: `Bearer ${CALLER_TOKEN}` }],
      ] as const) {
        for (const origin of FOREIGN_ORIGINS) {
          const res = await rawRequest(server.url, {
            headers: { ...MCP_POST_HEADERS, ...auth, origin },
            body: INITIALIZE,
          });
          originProbes += 1;
          if (res.status !== 403) {
            admitted += 1;
            tally.broken.push(`foreign Origin ${origin} answered ${res.status}`);
          }
        }
        for (const host of FOREIGN_HOSTS) {
          const res = await rawRequest(server.url, {
            headers: { ...MCP_POST_HEADERS, ...auth, host },
            body: INITIALIZE,
          });
          originProbes += 1;
          if (res.status !== 403) {
            admitted += 1;
            tally.broken.push(`Host ${host} answered ${res.status}`);
          }
        }
        for (const origin of ownOrigins(server.url)) {
          const res = await rawRequest(server.url, {
            headers: { ...MCP_POST_HEADERS, ...auth, origin },
            body: INITIALIZE,
          });
          if (res.status !== 200) tally.broken.push(`own Origin ${origin} refused: ${res.status} ${res.body}`);
        }
      }
      tally.figures.push(`${originProbes} foreign Origins/Hosts, ${admitted} admitted`);

      // ---- Caller tokens presented to a server that requires one.
      const wrong = [
        undefined,
        "",
        `Bearer ${CALLER_TOKEN}x`,
        `Bearer x${CALLER_TOKEN}`,
        `Basic ${CALLER_TOKEN}`,
        `Bearer ${token}`,
        `Bearer ${CALLER_TOKEN.toUpperCase()}`,
        ...Array.from({ length: CALLER_TOKEN.length }, (_, n) => `Bearer ${CALLER_TOKEN.slice(0, n)}`),
      ];
      let wrongAdmitted = 0;
      for (const authorization of wrong) {
        const headers: Record<string, string> = { ...MCP_POST_HEADERS };
        if (authorization !== undefined) headers.authorization = authorization;
        const res = await rawRequest(guarded.url, { headers, body: INITIALIZE });
        if (res.status !== 401) {
          wrongAdmitted += 1;
          tally.broken.push(`caller token ${JSON.stringify(authorization?.slice(0, 20))}… answered ${res.status}`);
        }
      }
      const right = await rawRequest(guarded.url, {
        headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${CALLER_TOKEN}` },
        body: INITIALIZE,
      });
      if (right.status !== 200) tally.broken.push(`the caller token itself was refused: ${right.status}`);
      tally.figures.push(`${wrong.length} wrong caller tokens, ${wrongAdmitted} admitted`);
      for (const server of [open, guarded]) {
        for (const secret of [token, CALLER_TOKEN]) {
          if (server.stderr().includes(secret)) tally.broken.push("a secret appeared in kiln mcp http's output");
        }
      }
    } finally {
      await open.stop();
      await guarded.stop();
    }

    // ---- Caller-token length at startup.
    let startsRefused = 0;
    const tooShort: [string, string][] = [];
    for (let length = 1; length < 32; length++) tooShort.push(["0.0.0.0:0", "k".repeat(length)]);
    for (const length of [1, 16, 31]) tooShort.push(["127.0.0.1:0", "k".repeat(length)]);
    tooShort.push(["0.0.0.0:0", `   ${"k".repeat(31)}   `], ["0.0.0.0:0", ""], ["0.0.0.0:0", " ".repeat(40)]);
    for (const [address, callerToken] of tooShort) {
      const result = await run(process.execPath, [KILN_BIN, "mcp", "http", address], {
        env: kilnEnv(kiln, token, { KILN_MCP_HTTP_TOKEN: callerToken }),
        timeoutMs: 30_000,
      });
      if (result.code !== 0 && result.code !== null && result.stdout === "") startsRefused += 1;
      else
        tally.broken.push(
          `kiln mcp http ${address} with a ${callerToken.trim().length}-character token: exit ${result.code}`,
        );
    }
    const long = await startHttpMcp("0.0.0.0:0", kilnEnv(kiln, token, { KILN_MCP_HTTP_TOKEN: "k".repeat(32) }));
    await long.stop();
    tally.figures.push(
      `${startsRefused}/${tooShort.length} starts with a token under 32 characters refused (32 starts)`,
    );

    // ---- stdout carries only JSON-RPC.
    const session = [
      rpc(1, "initialize", {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "t13", version: "0" },
      }),
      rpc(null, "notifications/initialized"),
      rpc(2, "tools/list"),
      rpc(3, "tools/call", { name: "identity_current", arguments: {} }),
      rpc(4, "tools/call", { name: "jobs_cancel", arguments: { id: "nope", idempotency_key: "c1" } }),
      rpc(5, "tools/call", { name: "jobs_get", arguments: { id: "" } }),
      rpc(6, "tools/call", { name: "no_such_tool", arguments: {} }),
      rpc(7, "tools/call", { name: "jobs_list", arguments: { limit: "many", extra: true } }),
      rpc(8, "resources/list"),
      rpc(9, "prompts/list"),
      rpc(10, "no/such/method"),
      rpc(11, "ping"),
      rpc(12, "tools/call", { name: "jobs_submit", arguments: { idempotency_key: "s1", body: { nonsense: 1 } } }),
      "this is not JSON",
      '{"jsonrpc":"2.0","id":13,"method":',
      rpc(14, "ping"),
    ];
    const awaited = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14];
    const sessions = [await stdioSession(kilnEnv(kiln, token), session, awaited)];
    const startups = await Promise.all([
      run(process.execPath, [KILN_BIN, "mcp", "--help"], { env: kilnEnv(kiln, token) }),
      run(process.execPath, [KILN_BIN, "mcp"], { env: kilnEnv(kiln, "", { KILN_TOKEN: undefined }) }),
      run(process.execPath, [KILN_BIN, "mcp"], { env: kilnEnv(kiln, `${token.slice(0, -1)}x`) }),
      run(process.execPath, [KILN_BIN, "mcp"], { env: kilnEnv(kiln, token, { KILN_ENDPOINT: "http://127.0.0.1:1" }) }),
    ]);
    let lines = 0;
    let foreign = 0;
    for (const { stdout } of [...sessions, ...startups]) {
      lines += stdout.split("\n").filter((l) => l.length > 0).length;
      for (const line of notJsonRpc(stdout)) {
        foreign += 1;
        tally.broken.push(`stdout carried a line that is not JSON-RPC: ${line.slice(0, 200)}`);
      }
    }
    const answeredIds = new Set(
      (sessions[0]?.stdout ?? "")
        .split("\n")
        .filter((l) => l.length > 0)
        .map((l) => (JSON.parse(l) as { id?: unknown }).id),
    );
    for (const id of awaited) {
      if (!answeredIds.has(id)) tally.broken.push(`the stdio session did not answer request ${id}`);
    }
    tally.figures.push(
      `${lines} stdout lines over ${sessions.length + startups.length} runs (session, --help, refused startups), ${foreign} not JSON-RPC`,
    );
  } finally {
    await kiln.close();
  }
}

const tally: Tally = { figures: [], broken: [] };
try {
  await main(tally);
} catch (error) {
  process.stdout.write("T13 MCP: did not run\n");
  process.stderr.write(`T13 MCP: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(2);
}
process.stdout.write(`T13 MCP: ${tally.figures.join("; ")}\n`);
for (const line of tally.broken) process.stderr.write(`T13 broken: ${line}\n`);
process.exit(tally.broken.length === 0 ? 0 : 1);
