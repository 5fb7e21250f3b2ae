import { type KilnClient, KilnRefusal, KilnTransportError } from "@kiln/client";
import { CaptureError } from "./archive/capture.js";
import { UploadError } from "./archive/upload.js";
import { ConfigError, type KilnEnvironment, requireToken, resolveEnvironment } from "./config.js";
import { createCliClient } from "./http-fetch.js";

/** Exit codes (documented in `kiln --help` and the README). */
export const EXIT = {
  ok: 0,
  /** A refusal, a usage or configuration error, or the service could not be reached. */
  error: 2,
  /** The job ended for a service-side reason (not cargo's). */
  service: 3,
  interrupted: 130,
} as const;

/** Ends the command with an exit code after its output was written. */
export class CliExit extends Error {
  constructor(
    readonly code: number,
    message = "",
  ) {
    super(message);
    this.name = "CliExit";
  }
}

export const out = (text: string) => process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
export const err = (text: string) => process.stderr.write(text.endsWith("\n") ? text : `${text}\n`);
export const printJson = (value: unknown) => out(JSON.stringify(value, null, 2));
export const printJsonLine = (value: unknown) => out(JSON.stringify(value));

export interface Connected {
  environment: KilnEnvironment;
  client: KilnClient;
}

/** The environment and a client carrying its credential (a ConfigError when none is configured). */
export function connect(options: { tokenRequired?: boolean } = {}): Connected {
  const environment = resolveEnvironment(process.env);
  if (options.tokenRequired ?? true) {
    const { token } = requireToken(environment);
    return { environment, client: createCliClient({ endpoint: environment.endpoint, token }) };
  }
  return {
    environment,
    client: createCliClient({
      endpoint: environment.endpoint,
      ...(environment.token === undefined ? {} : { token: environment.token }),
    }),
  };
}

const causeOf = (error: Error): string => {
  let cause: unknown = error.cause;
  let text = "";
  while (cause instanceof Error) {
    text = cause.message;
    cause = cause.cause;
  }
  return text === "" ? "" : ` (${text})`;
};

/**
 * A refusal as a person reads it: its code and the service's detail, without the operation's
 * id (a person ran a command, not an operation), and the next step where the code implies one.
 */
export function describeRefusal(refusal: KilnRefusal): string {
  const { code, detail } = refusal.refusal;
  const next: Partial<Record<string, string>> = {
    unauthenticated: "sign in with `kiln login` (or set KILN_TOKEN to a valid token)",
    credential_revoked: "sign in again with `kiln login`",
    credential_expired: "use a current credential (`kiln login`, or a new agent credential)",
    out_of_scope:
      "your role or credential lacks that scope (owners and admins hold every scope, members read and submit, viewers read); ask a tenant admin or owner",
    role_required: "ask a tenant admin or owner",
  };
  const hint = next[code];
  return `refused (${code}): ${withoutOperationId(detail, refusal.operation)}${hint === undefined ? "" : `; ${hint}`}`;
}

/** "jobs.submit needs …" → "this needs …": the service names its operation where a person ran a command. */
const withoutOperationId = (detail: string, operation: string): string =>
  detail.startsWith(`${operation} `) ? `this ${detail.slice(operation.length + 1)}` : detail;

/** A transport failure without the operation's id: what could not be reached and why. */
const describeTransport = (error: KilnTransportError): string => {
  const prefix = `${error.operation}: `;
  const message = error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
  return `${message}${causeOf(error)}`;
};

/**
 * Runs a command body: a refusal prints its code and detail (with --json, the Refusal document
 * on stdout) and exits 2; transport, configuration and capture errors print one line and exit 2.
 */
export async function runCommand(json: boolean, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (error) {
    if (error instanceof CliExit) {
      if (error.message !== "") err(`kiln: ${error.message}`);
      process.exitCode = error.code;
      return;
    }
    if (error instanceof KilnRefusal) {
      // One line, so it also ends a JSON-lines stream (kiln cargo --json) cleanly.
      if (json) printJsonLine(error.refusal);
      err(`kiln: ${describeRefusal(error)}`);
      process.exitCode = EXIT.error;
      return;
    }
    if (error instanceof KilnTransportError) {
      err(`kiln: ${describeTransport(error)}`);
      process.exitCode = EXIT.error;
      return;
    }
    if (error instanceof ConfigError || error instanceof CaptureError || error instanceof UploadError) {
      err(`kiln: ${error.message}`);
      process.exitCode = EXIT.error;
      return;
    }
    throw error;
  }
}

/**
 * What happens when the reader of stdout or stderr goes away (`kiln jobs list | head -3`: the
 * pipe closes, the next write fails with EPIPE). By default the command ends quietly, as a
 * reader that stopped reading asked for; `kiln cargo` replaces it to cancel its job first.
 */
let onClosedOutput: () => void = () => process.exit(EXIT.ok);

/** Replaces what a closed output does; the function returned puts the previous handling back. */
export function whenOutputCloses(handler: () => void): () => void {
  const previous = onClosedOutput;
  onClosedOutput = handler;
  return () => {
    onClosedOutput = previous;
  };
}

/** Installs the EPIPE handling on stdout and stderr (main.ts, before any command writes). */
export function quietOnClosedOutput(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EPIPE") onClosedOutput();
      else throw error;
    });
  }
}

/** A plain-text table: columns padded to their widest cell. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}
