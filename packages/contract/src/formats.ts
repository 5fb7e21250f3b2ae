import { FormatRegistry } from "@sinclair/typebox";

/**
 * The string formats the catalogue's schemas use, for TypeBox's own checker (`Value.Check`),
 * which knows none by itself; the HTTP layer's ajv has ajv-formats. RFC 3339 date-time as
 * ajv-formats' `full` mode accepts it: a date, `T`, a time with optional fraction, and `Z` or
 * an offset.
 */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:?\d{2})$/;

if (!FormatRegistry.Has("date-time")) {
  FormatRegistry.Set("date-time", (value) => DATE_TIME.test(value) && !Number.isNaN(Date.parse(value)));
}
