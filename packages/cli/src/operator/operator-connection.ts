import { readFileSync } from "node:fs";
import { type OperatorSession, openOperatorSession } from "@kiln/client";
import { ConfigError, configDirectory, configPath, DEFAULT_ENDPOINT, readConfigFile } from "../config.js";
import { cliFetch } from "../http-fetch.js";

/** Where the operator CLI finds its server and credential (also in `kiln operator --help`). */
export const OPERATOR_CONFIGURATION_HELP = [
  "Operator configuration:",
  "  server      --server URL > KILN_ENDPOINT > `endpoint` in $XDG_CONFIG_HOME/kiln/config.json > http://127.0.0.1:7860",
  "  credential  --credential-file F (a file holding it) > KILN_OPERATOR_CREDENTIAL: the operator bootstrap",
  "              credential `kiln-server admin operator-credential` prints. It is never taken as a",
  "              command-line value (it would show in `ps`), never printed, and presented once per",
  "              command to open an operator session, which the command ends when it is done.",
].join("\n");

/** The server the operator commands speak to, by the precedence in OPERATOR_CONFIGURATION_HELP. */
export function operatorEndpoint(server: string | undefined, env: NodeJS.ProcessEnv): string {
  const fromEnv = env.KILN_ENDPOINT?.trim();
  const [endpoint, source] =
    server !== undefined
      ? [server, "--server"]
      : fromEnv !== undefined && fromEnv !== ""
        ? [fromEnv, "KILN_ENDPOINT"]
        : (() => {
            const dir = configDirectory(env);
            const configured = readConfigFile(dir).endpoint;
            return configured === undefined
              ? [DEFAULT_ENDPOINT, "the default"]
              : [configured, `endpoint in ${configPath(dir)}`];
          })();
  try {
    new URL(endpoint);
  } catch {
    throw new ConfigError(`${source} is not a URL: ${endpoint}`);
  }
  return endpoint;
}

/** The operator bootstrap credential, by the precedence in OPERATOR_CONFIGURATION_HELP; never in a message. */
export function operatorCredential(credentialFile: string | undefined, env: NodeJS.ProcessEnv): string {
  if (credentialFile !== undefined) {
    let contents: string;
    try {
      contents = readFileSync(credentialFile, "utf8").trim();
    } catch (error) {
      throw new ConfigError(
        `--credential-file ${credentialFile} cannot be read (${(error as { code?: string }).code ?? "unreadable"})`,
      );
    }
    if (contents === "") throw new ConfigError(`--credential-file ${credentialFile} is empty`);
    return contents;
  }
  const fromEnv = env.KILN_OPERATOR_CREDENTIAL?.trim();
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  throw new ConfigError(
    "no operator credential: set KILN_OPERATOR_CREDENTIAL or pass --credential-file F with the credential " +
      "`kiln-server admin operator-credential` prints",
  );
}

/** An operator session on the server, opened with the credential (the caller closes it). */
export function connectOperator(options: { server?: string; credentialFile?: string }): Promise<OperatorSession> {
  const endpoint = operatorEndpoint(options.server, process.env);
  const credential = operatorCredential(options.credentialFile, process.env);
  return openOperatorSession({ endpoint, credential, fetch: cliFetch });
}
