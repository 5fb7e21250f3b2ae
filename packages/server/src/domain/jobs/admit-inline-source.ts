import type { BlobStore, Db } from "@kiln/storage";
import { MAX_INVOCATION_STRING_BYTES, nulIn } from "../policy/host-safe-strings.js";
import { refuse } from "../refusal.js";
import { type Outcome, valueOrRefusal } from "../refusal-outcome.js";
import { refuseOverBandwidth } from "../tenants/bandwidth-allowance.js";
import { refuseOversizedCargoFiles } from "./admission-source.js";
import type { AdmittedSource } from "./admitted-source.js";
import { refusedEnvironmentReason } from "./refused-environment.js";
import type { SourceManifestEntry } from "./source-manifest.js";

/** An inline source file with its bytes decoded from the body's array of integers, and their digest. */
export interface InlineFile {
  readonly path: string;
  readonly bytes: Uint8Array;
  readonly sha256: string;
  readonly executable: boolean;
}

const REFUSED_ARGUMENTS = [/^--target-dir(=|$)/, /^--config(=|$)/, /^-Z/, /^--manifest-path=(\/|.*\.\.)/];

/** Arguments and environment that would step outside the sandbox's contract. */
export function admitInvocation(
  invocation: {
    arguments: readonly string[];
    environment?: Readonly<Record<string, string>>;
    working_directory?: string;
    artifacts?: readonly string[];
  },
  files: readonly { readonly path: string }[] | null,
): void {
  let stringBytes = 0;
  invocation.arguments.forEach((arg, index) => {
    const nul = nulIn(`body.workspace.invocation.arguments[${index}]`, arg);
    if (nul !== null) refuse("invalid_request", nul);
    stringBytes += Buffer.byteLength(arg) + 1;
    if (REFUSED_ARGUMENTS.some((re) => re.test(arg))) {
      refuse(
        "invalid_request",
        `body.workspace.invocation.arguments[${index}] (${arg}) is not admitted: kiln owns the target dir, configuration and toolchain flags`,
      );
    }
    if (arg === "--manifest-path" && /^\/|\.\./.test(invocation.arguments[index + 1] ?? "")) {
      refuse(
        "invalid_request",
        `body.workspace.invocation.arguments[${index + 1}]: --manifest-path must stay inside the source`,
      );
    }
  });
  for (const [name, value] of Object.entries(invocation.environment ?? {})) {
    const refused = refusedEnvironmentReason(name);
    if (refused !== null) {
      refuse("invalid_request", `body.workspace.invocation.environment.${name} ${refused}; it is not admitted`);
    }
    const nul = nulIn(`body.workspace.invocation.environment.${name}`, value);
    if (nul !== null) refuse("invalid_request", nul);
    stringBytes += Buffer.byteLength(name) + Buffer.byteLength(value) + 2;
  }
  if (stringBytes > MAX_INVOCATION_STRING_BYTES) {
    refuse(
      "invalid_request",
      `body.workspace.invocation.arguments and environment hold ${stringBytes} bytes together; at most ${MAX_INVOCATION_STRING_BYTES} (the host's argument space)`,
    );
  }
  (invocation.artifacts ?? []).forEach((pattern, index) => {
    const nul = nulIn(`body.workspace.invocation.artifacts[${index}]`, pattern);
    if (nul !== null) refuse("invalid_request", nul);
    if (pattern.startsWith("/") || pattern.split("/").includes("..")) {
      refuse(
        "invalid_request",
        `body.workspace.invocation.artifacts[${index}] must be relative to the target dir, without ..`,
      );
    }
  });
  const wd = invocation.working_directory ?? ".";
  if (wd !== "." && files !== null && !files.some((f) => f.path.startsWith(`${wd}/`))) {
    refuse(
      "invalid_request",
      `body.workspace.invocation.working_directory ${JSON.stringify(wd)} is not a directory of the source`,
    );
  }
}

/**
 * The legacy inline source: its rules (admitInlineFiles, checked where its body was prepared and
 * thrown here: body-preparations.ts) and the bounds of its Cargo files, then the tenant's
 * bandwidth allowance (the admission's snapshot of it), then its bytes into the blob store file by file.
 *
 * Its files' bytes are source bytes received like an uploaded part's: refused by the same check
 * (refuseOverBandwidth, `conflict` with the retry time) before anything is stored, and recorded
 * in the job's insert transaction (insertAdmittedJob: inline_source_bytes), where the bandwidth consumption and
 * usage's bytes uploaded count them. A replay of the submission never reaches here (the
 * submission key finds its job first), and of two racing ones only the one that inserts the job
 * records, so a submission's bytes count once. As for parts, concurrent submissions are not
 * serialised against the allowance: they can pass it by what is in flight at once.
 */
export async function admitInlineSource(
  deps: { db: Db; blobs: BlobStore },
  input: {
    tenantId: string;
    files: readonly InlineFile[];
    /** admitInlineFiles's verdict on the files. */
    rules: Outcome<null>;
    invocation: Parameters<typeof admitInvocation>[0];
    /** The tenant's bandwidth allowance, from the admission's policy snapshot. */
    bandwidthAllowance: number;
    now: Date;
  },
): Promise<AdmittedSource> {
  const { files, invocation } = input;
  valueOrRefusal(input.rules);
  admitInvocation(invocation, files);
  refuseOversizedCargoFiles(files.map((file) => ({ path: file.path, bytes: file.bytes.length })));
  const sourceBytes = files.reduce((sum, file) => sum + file.bytes.length, 0);
  // An empty source transfers nothing, so it is neither checked nor recorded.
  if (sourceBytes > 0) {
    await refuseOverBandwidth(deps.db, {
      tenantId: input.tenantId,
      allowance: input.bandwidthAllowance,
      incomingBytes: sourceBytes,
      now: input.now,
      operation: "jobs.submit with an inline source",
    });
  }
  const manifest: SourceManifestEntry[] = [];
  for (const file of files) {
    const stored = await deps.blobs.put(file.bytes, file.sha256);
    manifest.push({ path: file.path, sha256: stored.sha256, bytes: stored.bytes, executable: file.executable });
  }
  return { manifest, transfer: { kind: "inline", bytes: sourceBytes } };
}

/**
 * The job class — the lineage key of its warm cache: the operation family (build and
 * test share compiled dependencies; check and clippy share metadata; doc; bench), the
 * profile (release when `--release` or `--profile release`) and the toolchain.
 */
export function jobClassOf(operation: string, args: readonly string[], toolchain: string): string {
  const family = operation === "check" || operation === "clippy" ? "check" : operation === "test" ? "build" : operation;
  return `${family}/${profileOf(args)}/${toolchain}`;
}

/** The Cargo profile the arguments select: release for `--release`, else `--profile`'s, else dev. */
export function profileOf(args: readonly string[]): string {
  if (args.includes("--release")) return "release";
  const inline = args.find((a) => a.startsWith("--profile="));
  if (inline !== undefined) return inline.slice("--profile=".length) || "dev";
  const profileIndex = args.indexOf("--profile");
  return profileIndex >= 0 ? (args[profileIndex + 1] ?? "dev") : "dev";
}
