import { createClient, KilnRefusal, KilnTransportError } from "@kiln/client";
import type { Scope } from "@kiln/contract";
import {
  CredentialRefused,
  createKilnMcpServer,
  DrainingStdioServerTransport,
  discoverScopes,
  toolsForScopes,
} from "@kiln/mcp";
import type { Command } from "commander";
import { parseListenAddress } from "./mcp-address.js";
import {
  httpAllowedOrigins,
  httpCallerToken,
  type McpEnvironment,
  McpStartupError,
  mcpEnvironment,
} from "./mcp-environment.js";
import { checkListenSecurity, serveMcpHttp } from "./mcp-http.js";

/** Diagnostics go to stderr: on stdio, stdout carries nothing but JSON-RPC. */
const log = (line: string) => process.stderr.write(`${line}\n`);

/** The API client and the credential's scopes, as the API reports them. */
async function connectToKiln(env: McpEnvironment) {
  const client = createClient({ endpoint: env.endpoint, token: env.token });
  let scopes: Scope[];
  try {
    scopes = await discoverScopes(client);
  } catch (error) {
    if (error instanceof CredentialRefused) {
      throw new McpStartupError(`the credential from ${env.tokenSource} was refused: ${error.refusal.detail}`, 1);
    }
    if (error instanceof KilnRefusal || error instanceof KilnTransportError) {
      const cause =
        error.cause instanceof Error
          ? ` (${error.cause.cause instanceof Error ? error.cause.cause.message : error.cause.message})`
          : "";
      throw new McpStartupError(
        `cannot read the credential's scopes from ${env.endpoint}: ${error.message}${cause}`,
        1,
      );
    }
    throw error;
  }
  const tools = toolsForScopes(scopes).length;
  log(`kiln mcp: ${tools} tools for scopes [${scopes.join(", ")}] against ${env.endpoint}`);
  return { client, scopes };
}

async function runStdio(): Promise<void> {
  const { client, scopes } = await connectToKiln(mcpEnvironment(process.env));
  const server = createKilnMcpServer({ client, scopes });
  // At end of input it closes once every request read has been answered, and the process ends.
  await server.connect(new DrainingStdioServerTransport());
  log("kiln mcp: serving on stdio");
}

async function runHttp(addressText: string): Promise<void> {
  // The listen address and caller token are checked before anything else happens.
  const address = parseListenAddress(addressText);
  const callerToken = httpCallerToken(process.env);
  const allowedOrigins = httpAllowedOrigins(process.env);
  checkListenSecurity(address, callerToken);
  const { client, scopes } = await connectToKiln(mcpEnvironment(process.env));
  const { server, url } = await serveMcpHttp({ address, callerToken, allowedOrigins, client, scopes, log });
  log(`kiln mcp: listening on ${url}${callerToken === undefined ? "" : " (caller token required)"}`);
  const stop = () => server.close(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

/** Runs a subcommand; a startup refusal is one clear line on stderr and a non-zero exit. */
async function guarded(run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (!(error instanceof McpStartupError)) throw error;
    log(`kiln mcp: ${error.message}`);
    process.exitCode = error.exitCode;
  }
}

/** `kiln mcp` (stdio) and `kiln mcp http <address>` (streamable HTTP at POST /mcp). */
export function registerMcpCommand(program: Command): void {
  const mcp = program
    .command("mcp")
    .description("serve kiln's operations as MCP tools to an AI agent (stdio; `mcp http <address>` for HTTP)")
    // Even help goes to stderr: on stdio, stdout carries nothing but JSON-RPC.
    .configureOutput({ writeOut: (text) => process.stderr.write(text) })
    .addHelpText(
      "after",
      "\nEnvironment:\n" +
        "  KILN_TOKEN            the agent credential (or KILN_CREDENTIAL_FILE: a file holding it)\n" +
        "  KILN_ENDPOINT         the kiln API origin (default http://127.0.0.1:7860)\n" +
        "  KILN_MCP_HTTP_TOKEN   caller token (32+ characters) required of every HTTP request;\n" +
        "                        needed to listen beyond loopback\n" +
        "  KILN_MCP_HTTP_ALLOWED_ORIGINS  browser origins served besides the listener's own\n" +
        "                        (comma-separated, e.g. http://localhost:6274 for the MCP Inspector)",
    )
    .action(() => guarded(runStdio));
  mcp
    .command("http")
    .description("serve MCP over streamable HTTP at POST /mcp (stateless, JSON responses)")
    .argument("<address>", "host:port to listen on, e.g. 127.0.0.1:7861 (port 0: any free port)")
    .action((address: string) => guarded(() => runHttp(address)));
}
