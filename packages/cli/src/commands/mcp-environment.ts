import { readFileSync } from "node:fs";

/** The API origin when KILN_ENDPOINT is not set: the embedded server's default listener. */
export const DEFAULT_ENDPOINT = "http://127.0.0.1:7860";

/** Shortest caller token the HTTP transport accepts (spec: 32 characters or more). */
export const MIN_HTTP_TOKEN_LENGTH = 32;

/** `kiln mcp` cannot start: the message says why; it never contains a secret. */
export class McpStartupError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = "McpStartupError";
  }
}

export interface McpEnvironment {
  /** The agent credential every tool call is made with. */
  readonly token: string;
  readonly endpoint: string;
  /** Where the credential came from, for diagnostics (never the value). */
  readonly tokenSource: "KILN_TOKEN" | "KILN_CREDENTIAL_FILE";
}

/** The credential (KILN_TOKEN, else KILN_CREDENTIAL_FILE's trimmed contents) and KILN_ENDPOINT. */
export function mcpEnvironment(env: NodeJS.ProcessEnv): McpEnvironment {
  const endpoint = env.KILN_ENDPOINT?.trim() || DEFAULT_ENDPOINT;
  try {
    new URL(endpoint);
  } catch {
    throw new McpStartupError(`KILN_ENDPOINT is not a URL: ${endpoint}`);
  }
  const direct = env.KILN_TOKEN?.trim();
  if (direct !== undefined && direct !== "") return { token: direct, endpoint, tokenSource: "KILN_TOKEN" };
  const file = env.KILN_CREDENTIAL_FILE?.trim();
  if (file !== undefined && file !== "") {
    let contents: string;
    try {
      contents = readFileSync(file, "utf8").trim();
    } catch (error) {
      const code = (error as { code?: string }).code ?? "unreadable";
      throw new McpStartupError(`KILN_CREDENTIAL_FILE ${file} cannot be read (${code})`);
    }
    if (contents === "") throw new McpStartupError(`KILN_CREDENTIAL_FILE ${file} is empty`);
    return { token: contents, endpoint, tokenSource: "KILN_CREDENTIAL_FILE" };
  }
  throw new McpStartupError(
    "no credential: set KILN_TOKEN to an agent credential, or KILN_CREDENTIAL_FILE to a file holding one",
  );
}

/** KILN_MCP_HTTP_TOKEN, when configured; a configured token shorter than 32 characters is refused. */
export function httpCallerToken(env: NodeJS.ProcessEnv): string | undefined {
  const token = env.KILN_MCP_HTTP_TOKEN?.trim();
  if (token === undefined || token === "") return undefined;
  if (token.length < MIN_HTTP_TOKEN_LENGTH) {
    throw new McpStartupError(
      `KILN_MCP_HTTP_TOKEN must be ${MIN_HTTP_TOKEN_LENGTH} characters or more (it has ${token.length})`,
    );
  }
  return token;
}
