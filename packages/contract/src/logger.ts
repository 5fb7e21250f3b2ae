/**
 * The logging every long-lived part of kiln writes through (pino's Logger satisfies it):
 * a structured object first, then the message. Background loops and host attempts log each
 * failure here and also emit it as a typed event, so an operator reads it and a test asserts it.
 */
export interface Logger {
  error(details: object, message: string): void;
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

/** For tests and tools that assert on events instead. */
export const silentLogger: Logger = {
  error: () => {},
  warn: () => {},
  info: () => {},
};

/** An error's message for a person (and a log line), whatever was thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
