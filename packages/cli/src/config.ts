import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** The API origin when neither KILN_ENDPOINT nor the config file names one: `kiln-server serve`'s default listener. */
export const DEFAULT_ENDPOINT = "http://127.0.0.1:7860";

/** How KILN_ENDPOINT, KILN_TOKEN, KILN_CREDENTIAL_FILE and the config directory combine (also in `kiln --help`). */
export const CONFIGURATION_HELP = [
  "Configuration (first match wins):",
  "  credential  KILN_TOKEN > KILN_CREDENTIAL_FILE (a file holding a token) > the token `kiln login` stored",
  "              in $XDG_CONFIG_HOME/kiln/credentials.json (mode 0600; default ~/.config/kiln), used only",
  "              when it was issued by the endpoint in use",
  "  endpoint    KILN_ENDPOINT > `endpoint` in $XDG_CONFIG_HOME/kiln/config.json > http://127.0.0.1:7860",
  "  repository  --repository owner/name > `repository` in config.json > the git remote `origin`",
  "  size        --size > `size` in config.json > kiln2-cpu",
  "  layout      the last upload's pack layout (digests, no contents) is kept in",
  "              $XDG_CACHE_HOME/kiln/layouts (default ~/.cache/kiln) so an edit re-sends about the",
  "              changed files; KILN_LAYOUT_CACHE=off disables it",
  "",
  "Exit codes: 0 success; cargo's own exit code when the remote cargo failed (101 for build and test",
  "failures); 2 a refusal, a usage or configuration error, or the service could not be reached;",
  "3 the job ended for a service-side reason (infrastructure, wall-clock ceiling, toolchain not",
  "admitted, cancelled elsewhere); 130 interrupted (Ctrl-C cancels the job first).",
].join("\n");

/** A configuration problem: one line for the user; never contains a secret. */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = "ConfigError";
  }
}

export interface ConfigFile {
  endpoint?: string;
  repository?: string;
  size?: string;
}

export interface StoredCredentials {
  endpoint: string;
  token: string;
  /** The CLI token's id when login could read it (for revocation on logout). */
  token_id: string | null;
  principal: string | null;
  tenant: string | null;
  saved_at: string;
}

export type TokenSource = "KILN_TOKEN" | "KILN_CREDENTIAL_FILE" | "login";

export interface KilnEnvironment {
  readonly endpoint: string;
  readonly endpointSource: "KILN_ENDPOINT" | "config" | "default";
  readonly configDir: string;
  readonly config: ConfigFile;
  readonly token: string | undefined;
  /** Where the credential came from, for diagnostics (never the value). */
  readonly tokenSource: TokenSource | undefined;
}

/** kiln's directory under an XDG base: the variable when set, else the default below $HOME. */
export function xdgKilnDirectory(
  env: NodeJS.ProcessEnv,
  variable: "XDG_CONFIG_HOME" | "XDG_CACHE_HOME",
  fallback: ".config" | ".cache",
): string {
  const xdg = env[variable]?.trim();
  const base = xdg !== undefined && xdg !== "" ? xdg : join(env.HOME?.trim() || homedir(), fallback);
  return join(base, "kiln");
}

/** $XDG_CONFIG_HOME/kiln, else ~/.config/kiln. */
export const configDirectory = (env: NodeJS.ProcessEnv): string => xdgKilnDirectory(env, "XDG_CONFIG_HOME", ".config");

export const configPath = (dir: string) => join(dir, "config.json");
export const credentialsPath = (dir: string) => join(dir, "credentials.json");

function readJson(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return undefined;
    throw new ConfigError(`${path} cannot be read (${(error as { code?: string }).code ?? "unreadable"})`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ConfigError(`${path} is not JSON`);
  }
}

export function readConfigFile(dir: string): ConfigFile {
  const doc = readJson(configPath(dir));
  if (doc === undefined) return {};
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new ConfigError(`${configPath(dir)} must hold a JSON object`);
  }
  const out: ConfigFile = {};
  for (const key of ["endpoint", "repository", "size"] as const) {
    const value = (doc as Record<string, unknown>)[key];
    if (typeof value === "string" && value.trim() !== "") out[key] = value.trim();
  }
  return out;
}

export function readStoredCredentials(dir: string): StoredCredentials | undefined {
  const doc = readJson(credentialsPath(dir)) as Partial<StoredCredentials> | undefined;
  if (doc === undefined) return undefined;
  if (typeof doc.token !== "string" || typeof doc.endpoint !== "string") {
    throw new ConfigError(`${credentialsPath(dir)} holds no token; run kiln login again`);
  }
  return {
    endpoint: doc.endpoint,
    token: doc.token,
    token_id: doc.token_id ?? null,
    principal: doc.principal ?? null,
    tenant: doc.tenant ?? null,
    saved_at: doc.saved_at ?? "",
  };
}

/** Writes a file readable by its owner only (0600), atomically; the directory is 0700. */
function writePrivate(dir: string, path: string, text: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, text, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
}

export function writeStoredCredentials(dir: string, credentials: StoredCredentials): void {
  writePrivate(dir, credentialsPath(dir), `${JSON.stringify(credentials, null, 2)}\n`);
}

export function removeStoredCredentials(dir: string): boolean {
  try {
    rmSync(credentialsPath(dir));
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return false;
    throw error;
  }
}

export function writeConfigFile(dir: string, config: ConfigFile): void {
  writePrivate(dir, configPath(dir), `${JSON.stringify(config, null, 2)}\n`);
}

const sameOrigin = (a: string, b: string) => {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
};

/**
 * The endpoint and credential every command uses (and `kiln mcp`), by the precedence in
 * CONFIGURATION_HELP. `token` is undefined when none is configured; callers that need one
 * call requireToken.
 */
export function resolveEnvironment(env: NodeJS.ProcessEnv): KilnEnvironment {
  const configDir = configDirectory(env);
  const config = readConfigFile(configDir);
  const fromEnv = env.KILN_ENDPOINT?.trim();
  let endpoint = DEFAULT_ENDPOINT;
  let endpointSource: KilnEnvironment["endpointSource"] = "default";
  if (fromEnv !== undefined && fromEnv !== "") {
    endpoint = fromEnv;
    endpointSource = "KILN_ENDPOINT";
  } else if (config.endpoint !== undefined) {
    endpoint = config.endpoint;
    endpointSource = "config";
  }
  try {
    new URL(endpoint);
  } catch {
    throw new ConfigError(
      `${endpointSource === "config" ? `endpoint in ${configPath(configDir)}` : "KILN_ENDPOINT"} is not a URL: ${endpoint}`,
    );
  }
  const base = { endpoint, endpointSource, configDir, config };
  const direct = env.KILN_TOKEN?.trim();
  if (direct !== undefined && direct !== "") return { ...base, token: direct, tokenSource: "KILN_TOKEN" };
  const file = env.KILN_CREDENTIAL_FILE?.trim();
  if (file !== undefined && file !== "") {
    let contents: string;
    try {
      contents = readFileSync(file, "utf8").trim();
    } catch (error) {
      const code = (error as { code?: string }).code ?? "unreadable";
      throw new ConfigError(`KILN_CREDENTIAL_FILE ${file} cannot be read (${code})`);
    }
    if (contents === "") throw new ConfigError(`KILN_CREDENTIAL_FILE ${file} is empty`);
    return { ...base, token: contents, tokenSource: "KILN_CREDENTIAL_FILE" };
  }
  const stored = readStoredCredentials(configDir);
  if (stored !== undefined && sameOrigin(stored.endpoint, endpoint)) {
    return { ...base, token: stored.token, tokenSource: "login" };
  }
  return { ...base, token: undefined, tokenSource: undefined };
}

/** The credential, or a ConfigError saying how to get one. */
export function requireToken(environment: KilnEnvironment): { token: string; tokenSource: TokenSource } {
  if (environment.token === undefined || environment.tokenSource === undefined) {
    const stored = readStoredCredentials(environment.configDir);
    const hint =
      stored === undefined ? "" : ` (the stored login is for ${stored.endpoint}, not ${environment.endpoint})`;
    throw new ConfigError(
      `no credential for ${environment.endpoint}${hint}: run \`kiln login\`, or set KILN_TOKEN or KILN_CREDENTIAL_FILE`,
    );
  }
  return { token: environment.token, tokenSource: environment.tokenSource };
}
