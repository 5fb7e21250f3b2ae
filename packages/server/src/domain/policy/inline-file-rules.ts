import { refuse } from "../refusal.js";
import { longSegmentOf } from "./host-safe-strings.js";

/**
 * The spec's rules for the legacy inline source beyond its schema: canonical
 * repository-relative paths (no absolute path, no `.` or `..` segment, no empty
 * segment, no backslash, no NUL, no segment longer than a file name, at most 4096 bytes), the
 * complete set sorted by path in byte order with no duplicate, and no file that is also a
 * directory of another. Each refusal names the offending member.
 */
export function admitInlineFiles(files: readonly { readonly path: string }[]): void {
  let previous: string | null = null;
  const paths = new Set<string>();
  files.forEach((file, index) => {
    const field = `body.workspace.source.files[${index}].path`;
    const path = file.path;
    if (path.startsWith("/")) refuse("invalid_request", `${field} is absolute: ${JSON.stringify(path)}`);
    if (/[\\\0]/.test(path)) refuse("invalid_request", `${field} contains a backslash or NUL`);
    for (const segment of path.split("/")) {
      if (segment === "" || segment === "." || segment === "..") {
        refuse("invalid_request", `${field} is not canonical (empty, . or .. segment): ${JSON.stringify(path)}`);
      }
    }
    const long = longSegmentOf(field, path);
    if (long !== null) refuse("invalid_request", long);
    if (Buffer.byteLength(path) > 4096) refuse("invalid_request", `${field} is longer than 4096 bytes of UTF-8`);
    if (previous !== null) {
      const order = Buffer.compare(Buffer.from(previous), Buffer.from(path));
      if (order === 0) refuse("invalid_request", `${field} duplicates ${JSON.stringify(path)}`);
      if (order > 0) refuse("invalid_request", `${field} is out of order: files must be sorted by path`);
    }
    previous = path;
    paths.add(path);
  });
  for (const [index, file] of files.entries()) {
    const segments = file.path.split("/");
    for (let i = 1; i < segments.length; i++) {
      const parent = segments.slice(0, i).join("/");
      if (paths.has(parent)) {
        refuse(
          "invalid_request",
          `body.workspace.source.files[${index}].path lies under ${JSON.stringify(parent)}, which is a file`,
        );
      }
    }
  }
}
