/**
 * Cargo's machine-readable messages (`--message-format=json…`), one JSON object per stdout
 * line, each starting with `{"reason":`. Only the fields kiln's evidence uses are kept.
 *
 * Note: with `--message-format=json-render-diagnostics` Cargo renders rustc's diagnostics
 * to stderr itself and emits *no* `compiler-message` objects; they are parsed here anyway
 * for output produced with plain `--message-format=json`.
 */

export interface ArtifactTarget {
  readonly name: string;
  /** e.g. `["lib"]`, `["bin"]`, `["test"]`, `["bench"]`, `["example"]`, `["custom-build"]`, `["proc-macro"]`. */
  readonly kinds: readonly string[];
  readonly crateTypes: readonly string[];
  readonly srcPath: string | null;
}

export interface ArtifactProfile {
  readonly optLevel: string | null;
  /** 0, 1, 2, or a name such as `line-tables-only`. */
  readonly debuginfo: number | string | null;
  readonly debugAssertions: boolean | null;
  readonly overflowChecks: boolean | null;
  /** True when the unit was compiled as a test harness (`--test`). */
  readonly test: boolean;
}

export interface CompilerArtifactMessage {
  readonly reason: "compiler-artifact";
  readonly packageId: string;
  readonly manifestPath: string | null;
  readonly target: ArtifactTarget;
  readonly profile: ArtifactProfile;
  readonly features: readonly string[];
  readonly filenames: readonly string[];
  readonly executable: string | null;
  /** True when Cargo reused the unit without rebuilding it. */
  readonly fresh: boolean;
}

export interface BuildScriptExecutedMessage {
  readonly reason: "build-script-executed";
  readonly packageId: string;
  readonly linkedLibs: readonly string[];
  readonly linkedPaths: readonly string[];
  readonly cfgs: readonly string[];
  readonly env: readonly (readonly [string, string])[];
  readonly outDir: string | null;
}

export interface CompilerMessageMessage {
  readonly reason: "compiler-message";
  readonly packageId: string;
  readonly targetName: string | null;
  /** `error`, `warning`, `note`, `help`, `failure-note`, `error: internal compiler error`. */
  readonly level: string;
  readonly message: string;
  readonly code: string | null;
  readonly rendered: string | null;
}

export interface BuildFinishedMessage {
  readonly reason: "build-finished";
  readonly success: boolean;
}

export interface OtherCargoMessage {
  readonly reason: "other";
  readonly rawReason: string;
}

export type CargoMessage =
  | CompilerArtifactMessage
  | BuildScriptExecutedMessage
  | CompilerMessageMessage
  | BuildFinishedMessage
  | OtherCargoMessage;

/** True for a line that looks like one of Cargo's JSON messages. */
export function looksLikeCargoMessage(line: string): boolean {
  return line.startsWith('{"reason":');
}

/** Parses one stdout line; null when it is not a Cargo JSON message. */
export function parseCargoMessage(line: string): CargoMessage | null {
  if (!looksLikeCargoMessage(line)) return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (!isRecord(value)) return null;
  const reason = value.reason;
  if (typeof reason !== "string") return null;
  switch (reason) {
    case "compiler-artifact": {
      const target = isRecord(value.target) ? value.target : {};
      const profile = isRecord(value.profile) ? value.profile : {};
      const debuginfo = profile.debuginfo;
      return {
        reason,
        packageId: str(value.package_id) ?? "",
        manifestPath: str(value.manifest_path),
        target: {
          name: str(target.name) ?? "",
          kinds: strings(target.kind),
          crateTypes: strings(target.crate_types),
          srcPath: str(target.src_path),
        },
        profile: {
          optLevel: typeof profile.opt_level === "number" ? String(profile.opt_level) : str(profile.opt_level),
          debuginfo: typeof debuginfo === "number" || typeof debuginfo === "string" ? debuginfo : null,
          debugAssertions: bool(profile.debug_assertions),
          overflowChecks: bool(profile.overflow_checks),
          test: profile.test === true,
        },
        features: strings(value.features),
        filenames: strings(value.filenames),
        executable: str(value.executable),
        fresh: value.fresh === true,
      };
    }
    case "build-script-executed": {
      const env: (readonly [string, string])[] = [];
      if (Array.isArray(value.env)) {
        for (const pair of value.env) {
          if (Array.isArray(pair) && typeof pair[0] === "string" && typeof pair[1] === "string") {
            env.push([pair[0], pair[1]]);
          }
        }
      }
      return {
        reason,
        packageId: str(value.package_id) ?? "",
        linkedLibs: strings(value.linked_libs),
        linkedPaths: strings(value.linked_paths),
        cfgs: strings(value.cfgs),
        env,
        outDir: str(value.out_dir),
      };
    }
    case "compiler-message": {
      const message = isRecord(value.message) ? value.message : {};
      const target = isRecord(value.target) ? value.target : {};
      const code = isRecord(message.code) ? str(message.code.code) : null;
      return {
        reason,
        packageId: str(value.package_id) ?? "",
        targetName: str(target.name),
        level: str(message.level) ?? "",
        message: str(message.message) ?? "",
        code,
        rendered: str(message.rendered),
      };
    }
    case "build-finished":
      return { reason, success: value.success === true };
    default:
      return { reason: "other", rawReason: reason };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function str(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

function bool(value: unknown): boolean | null {
  return typeof value === "boolean" ? value : null;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}
