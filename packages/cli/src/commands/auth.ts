import { setTimeout as sleep } from "node:timers/promises";
import { createClient, type KilnClient, KilnRefusal, type OutputOf } from "@kiln/client";
import type { Command } from "commander";
import {
  credentialsPath,
  readConfigFile,
  readStoredCredentials,
  removeStoredCredentials,
  resolveEnvironment,
  writeConfigFile,
  writeStoredCredentials,
} from "../config.js";
import { CliExit, connect, EXIT, err, out, printJson, runCommand } from "../output.js";

interface JsonOption {
  json?: boolean;
}

/** The id of the token just issued: the newest live CLI token of the person (best effort; null when unreadable). */
async function issuedTokenId(client: KilnClient, issuedAfter: Date): Promise<string | null> {
  try {
    const page = await client.call("cli_tokens.list", { query: { limit: 20 } });
    const live = page.tokens.filter(
      (t) => t.revoked_at === null && new Date(t.created_at).getTime() >= issuedAfter.getTime() - 60_000,
    );
    return live[0]?.id ?? null;
  } catch {
    // A role without the credentials scope cannot list its tokens; logout then only forgets it.
    return null;
  }
}

async function login(options: JsonOption & { server?: string }): Promise<void> {
  const environment = resolveEnvironment(process.env);
  const endpoint = options.server === undefined ? environment.endpoint : serverUrl(options.server);
  const anonymous = createClient({ endpoint });
  const started = await anonymous.call("device.start", {});
  const startedAt = new Date();
  err(
    `To sign in to kiln at ${endpoint}, open\n\n  ${started.verification_uri}\n\nand confirm the code ${started.user_code}`,
  );
  err(`Waiting for approval (the code expires at ${started.expires_at}) …`);
  const deadline = new Date(started.expires_at).getTime();
  let interval = Math.max(1, started.interval_seconds);
  let token: string | undefined;
  while (token === undefined) {
    if (Date.now() > deadline) throw new CliExit(EXIT.error, "the device code expired before it was approved");
    await sleep(interval * 1000);
    let poll: OutputOf<"device.poll">;
    try {
      poll = await anonymous.call("device.poll", { query: { device_code: started.device_code } });
    } catch (error) {
      if (error instanceof KilnRefusal && (error.code === "rate_limited" || error.code === "unavailable")) {
        const wait = error.refusal.retry_after_seconds;
        interval = Math.max(interval + 5, typeof wait === "number" ? wait : 0);
        continue;
      }
      throw error;
    }
    switch (poll.state) {
      case "approved":
        if (poll.token === undefined)
          throw new CliExit(EXIT.error, "the approval carried no token; run kiln login again");
        token = poll.token;
        break;
      case "pending":
        interval = Math.max(interval, poll.interval_seconds ?? interval);
        break;
      case "limited":
        // Polled too fast (RFC 8628 slow_down): wait longer from now on.
        interval = Math.max(interval + 5, poll.interval_seconds ?? 0, poll.retry_after_seconds ?? 0);
        break;
      case "expired":
        throw new CliExit(EXIT.error, "the device code expired (or was already used); run kiln login again");
    }
  }
  const client = createClient({ endpoint, token });
  const identity = await client.call("identity.current", {});
  const tokenId = await issuedTokenId(client, startedAt);
  writeStoredCredentials(environment.configDir, {
    endpoint,
    token,
    token_id: tokenId,
    principal: identity.principal,
    tenant: identity.tenant,
    saved_at: new Date().toISOString(),
  });
  // Later commands use the endpoint logged in to unless KILN_ENDPOINT says otherwise.
  const config = readConfigFile(environment.configDir);
  if (config.endpoint !== endpoint) writeConfigFile(environment.configDir, { ...config, endpoint });
  const path = credentialsPath(environment.configDir);
  if (options.json) {
    printJson({
      endpoint,
      principal: identity.principal,
      tenant: identity.tenant,
      token_id: tokenId,
      credentials: path,
    });
  } else {
    out(`Logged in to ${endpoint} as ${identity.display_name} (${identity.principal}) in tenant ${identity.tenant}.`);
    out(`Token stored in ${path} (mode 0600).`);
  }
}

/** `--server`'s URL (its origin and path, without a trailing slash), or a refusal saying what a URL is here. */
function serverUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CliExit(
      EXIT.error,
      `--server must be the service's URL, e.g. https://kiln.example.com; got ${JSON.stringify(text)}`,
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new CliExit(EXIT.error, `--server must be an http(s) URL, got ${JSON.stringify(text)}`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

async function logout(options: JsonOption): Promise<void> {
  const environment = resolveEnvironment(process.env);
  const stored = readStoredCredentials(environment.configDir);
  if (stored === undefined) {
    if (options.json) printJson({ logged_out: false, revoked: false, detail: "not logged in" });
    else out("Not logged in.");
    return;
  }
  let revoked = false;
  let detail = "";
  if (stored.token_id !== null) {
    const client = createClient({ endpoint: stored.endpoint, token: stored.token });
    try {
      await client.call("cli_tokens.revoke", {
        params: { id: stored.token_id },
        idempotencyKey: `logout-${stored.token_id}`,
      });
      revoked = true;
    } catch (error) {
      if (error instanceof KilnRefusal) {
        revoked = error.code === "credential_revoked";
        detail = `${error.code}: ${error.refusal.detail}`;
      } else {
        detail = error instanceof Error ? error.message : String(error);
      }
    }
  } else {
    detail = "the token's id is unknown (the role may not list CLI tokens)";
  }
  removeStoredCredentials(environment.configDir);
  if (options.json) {
    printJson({ logged_out: true, endpoint: stored.endpoint, token_id: stored.token_id, revoked, detail });
    return;
  }
  out(`Logged out of ${stored.endpoint}; removed ${credentialsPath(environment.configDir)}.`);
  if (revoked) out("The token was revoked.");
  else err(`kiln: the token was not revoked server-side (${detail}); revoke it in the dashboard if it leaked`);
}

async function whoami(options: JsonOption): Promise<void> {
  const { environment, client } = connect();
  const identity = await client.call("identity.current", {});
  if (options.json) {
    printJson({ ...identity, endpoint: environment.endpoint, credential_source: environment.tokenSource });
    return;
  }
  out(`${identity.display_name} (${identity.principal}), ${identity.kind}`);
  out(`tenant   ${identity.tenant}${identity.role === null ? "" : ` (${identity.role})`}`);
  out(`scopes   ${identity.scopes.join(", ")}`);
  out(`endpoint ${environment.endpoint} (credential from ${environment.tokenSource})`);
}

export function registerAuthCommands(program: Command): void {
  program
    .command("login")
    .description("sign in with a device code: prints a URL and code to approve in the dashboard, then stores the token")
    .option(
      "--server <url>",
      "the kiln service to sign in to (later commands use it); default KILN_ENDPOINT or the config file's",
    )
    .option("--json", "print the result as one JSON document")
    .action((options: JsonOption & { server?: string }) => runCommand(options.json === true, () => login(options)));
  program
    .command("logout")
    .description("revoke the stored token (when the service allows) and remove it")
    .option("--json", "print the result as one JSON document")
    .action((options: JsonOption) => runCommand(options.json === true, () => logout(options)));
  program
    .command("whoami")
    .description("show who the credential in use is (identity.current)")
    .option("--json", "print the Identity document")
    .action((options: JsonOption) => runCommand(options.json === true, () => whoami(options)));
}
