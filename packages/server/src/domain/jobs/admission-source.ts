import type { BlobStore } from "@kiln/storage";
import { refuse } from "../refusal.js";
import { readSourceFile, type SourceManifestEntry } from "./source-manifest.js";
import type { TomlDocument, TomlReader } from "./toml-document.js";

/**
 * The most bytes admission reads of a Cargo manifest, a Cargo configuration file or a toolchain
 * file. Real ones are kilobytes: the largest of the 164 crates in Debian's cargo registry is
 * winapi's 7 KB, web-sys's (over 1,500 features) 54 KB, windows' 30 KB; a 50 MB Cargo.toml
 * held the event loop 13.4 s and a gigabyte (issue 33).
 */
export const MAX_CARGO_FILE_BYTES = 1024 * 1024;

/**
 * The most bytes a Cargo.lock of the source may hold. Admission does not read it, but the host's
 * dependency gateway parses it: real ones are hundreds of kilobytes for the largest workspaces.
 */
export const MAX_CARGO_LOCK_BYTES = 4 * 1024 * 1024;

/** What kind of Cargo file a path names, and its bound; null for any other file. */
function cargoFileOf(path: string): { readonly what: string; readonly bound: number } | null {
  const slash = path.lastIndexOf("/");
  const name = path.slice(slash + 1);
  switch (name) {
    case "Cargo.toml":
      return { what: "a Cargo manifest", bound: MAX_CARGO_FILE_BYTES };
    case "rust-toolchain":
    case "rust-toolchain.toml":
      return { what: "a toolchain file", bound: MAX_CARGO_FILE_BYTES };
    case "config":
    case "config.toml":
      return path.slice(0, slash).split("/").at(-1) === ".cargo"
        ? { what: "a Cargo configuration file", bound: MAX_CARGO_FILE_BYTES }
        : null;
    case "Cargo.lock":
      return { what: "a Cargo lockfile", bound: MAX_CARGO_LOCK_BYTES };
    default:
      return null;
  }
}

const mib = (bytes: number) => `${bytes / (1024 * 1024)} MiB`;

/**
 * Refuses a source with a Cargo manifest, Cargo configuration, toolchain file or lockfile beyond
 * its bound, anywhere in the source, before admission reads any of them: `invalid_request`
 * naming the file, its size and the bound. Only sizes are looked at (the manifest's), so a
 * refused file is never read.
 */
export function refuseOversizedCargoFiles(files: readonly { readonly path: string; readonly bytes: number }[]): void {
  for (const file of files) {
    const cargo = cargoFileOf(file.path);
    if (cargo === null || file.bytes <= cargo.bound) continue;
    refuse(
      "invalid_request",
      `body.workspace.source: ${file.path} is ${file.bytes} bytes; kiln admits ${cargo.what} of at most ${cargo.bound} bytes (${mib(cargo.bound)}), far beyond any real one. Shrink it, or leave it out of the captured workspace, and submit again`,
    );
  }
}

/** Parses a TOML file's bytes: on a body worker in the tenant's turn, or here when the server runs none. */
export type TomlParser = (bytes: Buffer) => Promise<TomlDocument>;

/** The captured source as admission reads it (settings, network policy, the pinned toolchain). */
export interface AdmissionSource {
  /** Every regular file's path. */
  readonly paths: readonly string[];
  /** A file's bytes; null when the source has no such regular file. */
  bytes(path: string): Promise<Buffer | null>;
  /** A TOML file, parsed once whoever asks (off the event loop: web/http/toml-parser-of.ts); null when absent. */
  readonly toml: TomlReader;
}

/**
 * The source of an admitted manifest (after refuseOversizedCargoFiles: every file admission
 * parses is bounded), its files read from the blob store when asked.
 */
export function admissionSourceOf(
  manifest: readonly SourceManifestEntry[],
  blobs: BlobStore,
  parse: TomlParser,
): AdmissionSource {
  const files = new Map(manifest.filter((entry) => !("kind" in entry)).map((entry) => [entry.path, entry]));
  const bytes = async (path: string) => {
    const entry = files.get(path);
    return entry === undefined ? null : readSourceFile(blobs, entry);
  };
  const parsed = new Map<string, Promise<TomlDocument | null>>();
  return {
    paths: [...files.keys()],
    bytes,
    toml: (path) => {
      let document = parsed.get(path);
      if (document === undefined) {
        document = bytes(path).then((read) => (read === null ? null : parse(read)));
        parsed.set(path, document);
      }
      return document;
    },
  };
}

/** The files that may pin a toolchain, most specific first. */
export function toolchainFileCandidates(workingDirectory: string): string[] {
  const dirs = workingDirectory === "." ? [""] : [`${workingDirectory}/`, ""];
  return dirs.flatMap((dir) => [`${dir}rust-toolchain.toml`, `${dir}rust-toolchain`]);
}

/** A legacy rust-toolchain file's one line naming a channel (`nightly-2024-05-01`, `1.85.0`). */
const BARE_CHANNEL = /^[\w.-]+$/;

/**
 * The toolchain the source pins, if any: the nearest rust-toolchain.toml's (or legacy
 * rust-toolchain's) `[toolchain] channel`, or a legacy file's one bare line, as rustup reads them.
 */
export async function pinnedToolchainOf(source: AdmissionSource, workingDirectory: string): Promise<string | null> {
  for (const path of toolchainFileCandidates(workingDirectory)) {
    if (path.endsWith("rust-toolchain")) {
      const bytes = await source.bytes(path);
      if (bytes === null) continue;
      const line = bytes.length <= 256 ? bytes.toString("utf8").trim() : "";
      if (BARE_CHANNEL.test(line)) return line;
    }
    const document = await source.toml(path);
    if (document === null || !("toml" in document)) continue;
    const channel = (document.toml as { toolchain?: { channel?: unknown } } | null)?.toolchain?.channel;
    if (typeof channel === "string") return channel;
  }
  return null;
}
