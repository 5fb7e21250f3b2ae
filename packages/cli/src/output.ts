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
      err(`kiln: ${error.operation} refused: ${error.refusal.code}: ${error.refusal.detail}`);
      process.exitCode = EXIT.error;
      return;
    }
    if (error instanceof KilnTransportError) {
      err(`kiln: ${error.message}${causeOf(error)}`);
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
