import type { ExecutionRequest, MountPoints } from "../executor.js";

/**
 * The variables every executor sets for the command, whatever the job declared: the toolchain's
 * bin directory first on PATH, the job's home as HOME and CARGO_HOME, its target dir, and cargo
 * told it is offline. RUSTUP_TOOLCHAIN is never set (there is no rustup inside: the toolchain's
 * own cargo and rustc are on PATH).
 */
export function executorVariables(mounts: MountPoints, toolchainMountPoint: string): Record<string, string> {
  return {
    PATH: `${toolchainMountPoint}/bin:/usr/bin:/bin`,
    HOME: mounts.home,
    CARGO_HOME: mounts.home,
    CARGO_TARGET_DIR: mounts.target,
    CARGO_NET_OFFLINE: "true",
  };
}

/**
 * The command's whole environment: what the job declared, then the executor's variables, which
 * win over declared ones of the same name. A declared variable that is not one (a bad name, a
 * NUL in its value) is left out; each one left out is said in `detail`, for the evidence.
 */
export function commandEnvironment(
  request: ExecutionRequest,
  variables: Readonly<Record<string, string>>,
  detail: string[],
): [string, string][] {
  const environment: [string, string][] = [];
  for (const [name, value] of Object.entries(request.environment)) {
    if (name in variables || name === "RUSTUP_TOOLCHAIN") {
      detail.push(`environment: declared ${name} is set by the executor and was not used`);
    } else if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || value.includes("\0")) {
      detail.push(`environment: declared ${JSON.stringify(name)} is not a valid variable and was not set`);
    } else environment.push([name, value]);
  }
  for (const [name, value] of Object.entries(variables)) environment.push([name, value]);
  return environment;
}
