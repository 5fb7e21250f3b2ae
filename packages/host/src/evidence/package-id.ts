/**
 * Cargo package ids as they appear in `--message-format=json` messages (`package_id`).
 *
 * Two formats exist:
 * - before Cargo 1.77: `name version (source-url)`, e.g.
 *   `serde 1.0.197 (registry+https://github.com/rust-lang/crates.io-index)` or
 *   `foo 0.1.0 (path+file:///work/foo)`;
 * - since Cargo 1.77 (a package id *spec*): `kind+url#name@version`, where the name is
 *   omitted when it equals the URL's last path segment, e.g.
 *   `registry+https://github.com/rust-lang/crates.io-index#serde@1.0.197`,
 *   `path+file:///work/foo#0.1.0`, `path+file:///work/my%20dir#foo@0.1.0`,
 *   `git+https://github.com/o/r?branch=main#r@0.2.0`.
 */

/** Where a package's source came from. `path` covers workspace members and other path dependencies. */
export type PackageSourceKind = "path" | "registry" | "git" | "directory" | "unknown";

export interface PackageRef {
  readonly name: string;
  /** Semver version; empty when the id names none. */
  readonly version: string;
  readonly sourceKind: PackageSourceKind;
  /** The source URL without its kind prefix (e.g. `https://github.com/rust-lang/crates.io-index`, `file:///work/foo`). */
  readonly sourceUrl: string | null;
}

const OLD_FORMAT = /^(\S+) (\S+) \((.+)\)$/;

/** Parses either package-id format; null when the text is neither. */
export function parsePackageId(id: string): PackageRef | null {
  const text = id.trim();
  const old = OLD_FORMAT.exec(text);
  if (old) {
    const [, name = "", version = "", source = ""] = old;
    return { name, version, ...classifySource(source) };
  }
  const hash = text.lastIndexOf("#");
  if (hash <= 0) return null;
  const source = text.slice(0, hash);
  const fragment = text.slice(hash + 1);
  if (!source.includes("://")) return null;
  const classified = classifySource(source);
  let name: string;
  let version: string;
  const at = fragment.indexOf("@");
  const colon = fragment.indexOf(":");
  if (at > 0) {
    name = fragment.slice(0, at);
    version = fragment.slice(at + 1);
  } else if (colon > 0) {
    name = fragment.slice(0, colon);
    version = fragment.slice(colon + 1);
  } else if (/^\d/.test(fragment)) {
    name = lastPathSegment(classified.sourceUrl ?? source);
    version = fragment;
  } else {
    name = fragment;
    version = "";
  }
  if (name === "") return null;
  return { name, version, ...classified };
}

/** Classifies a source URL such as `registry+https://…`, `sparse+https://…`, `path+file://…` or `git+https://…`. */
export function classifySource(source: string): Pick<PackageRef, "sourceKind" | "sourceUrl"> {
  const plus = source.indexOf("+");
  const scheme = source.indexOf("://");
  if (plus > 0 && (scheme < 0 || plus < scheme)) {
    const kind = source.slice(0, plus);
    const url = source.slice(plus + 1);
    switch (kind) {
      case "path":
        return { sourceKind: "path", sourceUrl: url };
      case "registry":
      case "sparse":
        return { sourceKind: "registry", sourceUrl: url };
      case "git":
        return { sourceKind: "git", sourceUrl: url };
      case "directory":
      case "local-registry":
        return { sourceKind: "directory", sourceUrl: url };
      default:
        return { sourceKind: "unknown", sourceUrl: url };
    }
  }
  if (source.startsWith("file://")) return { sourceKind: "path", sourceUrl: source };
  return { sourceKind: "unknown", sourceUrl: source === "" ? null : source };
}

function lastPathSegment(url: string): string {
  const withoutQuery = url.replace(/[?#].*$/, "").replace(/\/+$/, "");
  const segment = withoutQuery.slice(withoutQuery.lastIndexOf("/") + 1);
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
