/**
 * Toolchain admission: a job may use only a rustup toolchain this host has installed, named
 * the way rustup names them. A request that matches none is refused with the list of what is
 * admitted — never silently replaced by another toolchain.
 */
import { execFile } from "node:child_process";
import { readdir, readFile, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { AdmittedToolchain } from "../executor.js";

const run = promisify(execFile);

/** An admitted toolchain plus the rustc version it carries (for requests by version, and the evidence). */
export interface InstalledToolchain extends AdmittedToolchain {
  /** e.g. "1.95.0" or "1.97.0-nightly"; null when it could not be determined. */
  readonly version: string | null;
}

export class ToolchainNotAdmittedError extends Error {
  constructor(
    readonly requested: string,
    readonly admitted: readonly string[],
  ) {
    super(
      `toolchain ${JSON.stringify(requested)} is not admitted on this host; admitted: ${
        admitted.length > 0 ? admitted.join(", ") : "none (no rustup toolchains are installed)"
      }`,
    );
    this.name = "ToolchainNotAdmittedError";
  }
}

export interface ToolchainOptions {
  /** Defaults to $RUSTUP_HOME, else ~/.rustup. */
  readonly rustupHome?: string;
}

function toolchainsDirectory(options: ToolchainOptions): string {
  return join(options.rustupHome ?? process.env.RUSTUP_HOME ?? join(homedir(), ".rustup"), "toolchains");
}

/** The target triple rustup appends to channel names on this host. */
export function hostTriple(): string {
  const arch = process.arch === "x64" ? "x86_64" : process.arch === "arm64" ? "aarch64" : process.arch;
  return `${arch}-unknown-linux-gnu`;
}

/** "rustc 1.95.0 (59807616e 2026-04-14)" or a manifest's "1.95.0 (…)" → "1.95.0". */
function versionFrom(text: string): string | null {
  return /(\d+\.\d+\.\d+(?:-[a-z]+(?:\.\d+)?)?)/.exec(text)?.[1] ?? null;
}

async function toolchainVersion(path: string): Promise<string | null> {
  // The channel manifest names the rustc it installed, so nothing needs to be executed to know it.
  try {
    const manifest = await readFile(join(path, "lib", "rustlib", "multirust-channel-manifest.toml"), "utf8");
    const match = /^\[pkg\.rustc\]\s*\nversion = "([^"]*)"/m.exec(manifest);
    if (match?.[1] !== undefined) return versionFrom(match[1]);
  } catch {
    // Linked (custom) toolchains have no manifest.
  }
  try {
    const { stdout } = await run(join(path, "bin", "rustc"), ["--version"], { timeout: 10_000 });
    return versionFrom(stdout);
  } catch {
    return null;
  }
}

/** Every usable toolchain under $RUSTUP_HOME/toolchains (a directory with bin/cargo and bin/rustc), by name. */
export async function listAdmittedToolchains(options: ToolchainOptions = {}): Promise<InstalledToolchain[]> {
  const directory = toolchainsDirectory(options);
  let names: string[];
  try {
    names = await readdir(directory);
  } catch {
    return [];
  }
  const toolchains: InstalledToolchain[] = [];
  for (const name of names.sort()) {
    const path = join(directory, name);
    try {
      if (!(await stat(path)).isDirectory()) continue;
      await stat(join(path, "bin", "cargo"));
      await stat(join(path, "bin", "rustc"));
    } catch {
      continue;
    }
    toolchains.push({ name, path, version: await toolchainVersion(path) });
  }
  return toolchains;
}

/**
 * Resolves a requested name the way a user writes it: the full name
 * (`stable-x86_64-unknown-linux-gnu`), a channel without the host triple (`stable`, `nightly`,
 * `1.95.0`), or a plain release version that an installed stable toolchain carries (`1.95.0`
 * when `stable` is 1.95.0). Anything else throws ToolchainNotAdmittedError.
 */
export function resolveToolchain(requested: string, admitted: readonly InstalledToolchain[]): InstalledToolchain {
  const byName =
    admitted.find((t) => t.name === requested) ?? admitted.find((t) => t.name === `${requested}-${hostTriple()}`);
  if (byName !== undefined) return byName;
  if (/^\d+\.\d+\.\d+$/.test(requested)) {
    // Only an exact release version: "1.97.0" must not silently pick a 1.97.0-nightly.
    const byVersion = admitted.filter((t) => t.version === requested);
    const preferred = byVersion.find((t) => t.name.endsWith(hostTriple())) ?? byVersion[0];
    if (preferred !== undefined) return preferred;
  }
  throw new ToolchainNotAdmittedError(
    requested,
    admitted.map((t) => (t.version !== null ? `${t.name} (${t.version})` : t.name)),
  );
}

/**
 * Every name resolveToolchain admits for these toolchains — what a host advertises at
 * enrollment so submission can refuse a toolchain no host has: each full name, the channel
 * without the host triple, and the release version of each (resolveToolchain's three rules).
 */
export function admittedToolchainNames(admitted: readonly InstalledToolchain[]): string[] {
  const names = new Set<string>();
  const suffix = `-${hostTriple()}`;
  for (const toolchain of admitted) {
    names.add(toolchain.name);
    if (toolchain.name.endsWith(suffix)) names.add(toolchain.name.slice(0, -suffix.length));
    if (toolchain.version !== null && /^\d+\.\d+\.\d+$/.test(toolchain.version)) names.add(toolchain.version);
  }
  return [...names].sort();
}

/** Lists and resolves in one step. */
export async function admitToolchain(requested: string, options: ToolchainOptions = {}): Promise<InstalledToolchain> {
  return resolveToolchain(requested, await listAdmittedToolchains(options));
}
