import { ConfigError, DEFAULT_ENDPOINT, resolveEnvironment, type TokenSource } from "../config.js";

export { DEFAULT_ENDPOINT };

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
  readonly tokenSource: TokenSource;
}

/**
 * The credential and endpoint, resolved exactly as every other `kiln` command resolves them
 * (config.ts): KILN_TOKEN > KILN_CREDENTIAL_FILE > the stored `kiln login` token;
 * KILN_ENDPOINT > the config file > the default.
 */
export function mcpEnvironment(env: NodeJS.ProcessEnv): McpEnvironment {
  try {
    const resolved = resolveEnvironment(env);
    if (resolved.token === undefined || resolved.tokenSource === undefined) {
      throw new McpStartupError(
        "no credential: set KILN_TOKEN to an agent credential, or KILN_CREDENTIAL_FILE to a file holding one (or run `kiln login`)",
      );
    }
    return { token: resolved.token, endpoint: resolved.endpoint, tokenSource: resolved.tokenSource };
  } catch (error) {
    if (error instanceof ConfigError) throw new McpStartupError(error.message);
    throw error;
  }
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

/**
 * KILN_MCP_HTTP_ALLOWED_ORIGINS: origins besides the listener's own whose browser pages may call
 * the HTTP transport (an MCP client served from another local port, e.g. the MCP Inspector's
 * page), separated by commas or spaces. Each must be exactly an origin (`scheme://host[:port]`,
 * http or https, no path); anything else refuses to start rather than admitting what it meant.
 */
export function httpAllowedOrigins(env: NodeJS.ProcessEnv): string[] {
  const listed = (env.KILN_MCP_HTTP_ALLOWED_ORIGINS ?? "").split(/[\s,]+/).filter((text) => text !== "");
  return listed.map((text) => {
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    const exact = url !== undefined && (url.protocol === "http:" || url.protocol === "https:");
    if (url === undefined || !exact || text.replace(/\/$/, "").toLowerCase() !== url.origin.toLowerCase()) {
      throw new McpStartupError(
        `KILN_MCP_HTTP_ALLOWED_ORIGINS names ${JSON.stringify(text)}, which is not an origin: ` +
          "write each as scheme://host[:port] (http or https, no path), e.g. http://localhost:6274",
      );
    }
    return url.origin;
  });
}
