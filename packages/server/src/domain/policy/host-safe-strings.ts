/**
 * What a job's strings must be for the host to carry them out, beyond their schemas: the
 * kernel refuses a path with a segment over NAME_MAX bytes (ENAMETOOLONG) and any argument or
 * environment string holding a NUL (execve's strings end at one), and the argument space of
 * one exec is bounded (ARG_MAX). Refused at admission, naming the field, rather than admitted
 * and failed on the host.
 */

/** The longest file name (one path segment) the host's file systems take: NAME_MAX, in bytes. */
export const MAX_PATH_SEGMENT_BYTES = 255;

/**
 * The most bytes a job's arguments and environment may hold together. Linux gives one exec
 * 2 MiB for argv and envp with the default 8 MiB stack; the sandbox's own launcher arguments
 * and environment need the rest.
 */
export const MAX_INVOCATION_STRING_BYTES = 1024 * 1024;

/** A refusal detail when a segment of `path` is longer than a file name can be, else null. */
export function longSegmentOf(field: string, path: string): string | null {
  for (const segment of path.split("/")) {
    const bytes = Buffer.byteLength(segment);
    if (bytes > MAX_PATH_SEGMENT_BYTES) {
      return `${field} has a segment of ${bytes} bytes (${JSON.stringify(`${segment.slice(0, 32)}…`)}); a file name is at most ${MAX_PATH_SEGMENT_BYTES} bytes of UTF-8`;
    }
  }
  return null;
}

/** A refusal detail when `value` holds a NUL byte, else null. */
export function nulIn(field: string, value: string): string | null {
  return value.includes("\0") ? `${field} contains a NUL byte, which no argument or environment value can carry` : null;
}
