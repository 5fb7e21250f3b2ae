/**
 * Timestamps are stored as ISO-8601 UTC text with milliseconds (`2026-11-22T07:10:13.123Z`).
 * That form has a fixed width, so plain text comparison orders it chronologically on both
 * SQLite and PostgreSQL, and no engine-specific date type or time zone setting is involved.
 */
export function formatTimestamp(instant: Date): string {
  const text = instant.toISOString();
  // toISOString switches to the six-digit `+YYYYYY` form outside years 0000–9999, which
  // would break the fixed-width ordering; such instants are a bug upstream, not data.
  if (text.length !== 24) {
    throw new RangeError(`timestamp out of range: ${text}`);
  }
  return text;
}

export function addSeconds(instant: Date, seconds: number): Date {
  return new Date(instant.getTime() + seconds * 1000);
}
