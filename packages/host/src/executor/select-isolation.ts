import { join } from "node:path";
import { type Clock, type Logger, systemClock } from "@kiln/contract";
import type { HostIsolation, IsolationChoice } from "./host-isolation.js";
import { GuestImages } from "./microvm/guest-images.js";
import { MICROVM_DEFAULTS } from "./microvm/microvm-executor.js";
import { microvmIsolation } from "./microvm/microvm-isolation.js";
import { probeGuest } from "./microvm/probe-guest.js";
import { sandboxIsolation } from "./sandbox/sandbox-isolation.js";
import { ensureSandboxUser } from "./shared/ensure-sandbox-user.js";

/** How a host chooses its isolation (DESIGN §7: `KILN_EXECUTOR`, `KILN_MICROVM_ACCEL`). */
export interface IsolationSettings {
  /** `auto` (default): a microVM where KVM boots a probe guest, else the sandbox, saying why. */
  readonly executor: "auto" | "microvm" | "sandbox";
  /** `tcg` lets `microvm` run under software emulation; only ever when asked for explicitly. */
  readonly microvmAccel: "kvm" | "tcg";
  /** Where the guest's kernel and images are kept (default `<data dir>/guest`; `KILN_MICROVM_GUEST_DIR`). */
  readonly guestDirectory: string;
  /** The Debian mirror the guest root is installed from (`KILN_MICROVM_DEBIAN_MIRROR`). */
  readonly mirror?: string;
  /** How long `auto` (and `microvm` under KVM) waits for the probe guest (`KILN_MICROVM_PROBE_SECONDS`, default 5). */
  readonly probeSeconds: number;
  /** KILN_MAX_ATTEMPT_DISK_BYTES: the most disk one attempt may take here, either isolation (default: its size's quota). */
  readonly maxAttemptDiskBytes?: number;
}

export const DEFAULT_PROBE_SECONDS = 5;

/** The settings from the environment; an unknown value is an error naming the variable and what it may be. */
export function isolationSettingsFromEnv(env: NodeJS.ProcessEnv, dataDir: string): IsolationSettings {
  const choose = <T extends string>(name: string, allowed: readonly T[], fallback: T): T => {
    const value = env[name]?.trim() || fallback;
    if (!(allowed as readonly string[]).includes(value))
      throw new Error(`${name}=${JSON.stringify(value)} is not one of ${allowed.join(", ")}`);
    return value as T;
  };
  const probe = env.KILN_MICROVM_PROBE_SECONDS?.trim();
  const probeSeconds = probe === undefined || probe === "" ? DEFAULT_PROBE_SECONDS : Number(probe);
  if (!(probeSeconds > 0 && probeSeconds <= 300))
    throw new Error(`KILN_MICROVM_PROBE_SECONDS=${JSON.stringify(probe)} is not a number of seconds in (0, 300]`);
  const mirror = env.KILN_MICROVM_DEBIAN_MIRROR?.trim();
  return {
    executor: choose("KILN_EXECUTOR", ["auto", "microvm", "sandbox"], "auto"),
    microvmAccel: choose("KILN_MICROVM_ACCEL", ["kvm", "tcg"], "kvm"),
    guestDirectory: env.KILN_MICROVM_GUEST_DIR?.trim() || join(dataDir, "guest"),
    ...(mirror ? { mirror } : {}),
    probeSeconds,
  };
}

/**
 * The host's isolation: the sandbox when asked for; a microVM when asked for — refusing to start
 * without a KVM that boots a guest unless software emulation was asked for too; and for `auto`, a
 * microVM when a probe guest boots under KVM within its bound, else the sandbox. Which one serves
 * and why is logged here, and the agent reports it at enrollment (operator.hosts.get) and in every
 * unit's evidence. A microVM host's guest images are built here when absent (minutes, once); the
 * log says what was built, or that nothing was.
 */
export async function selectHostIsolation(
  settings: IsolationSettings,
  deps: { readonly log: Logger; readonly clock?: Clock },
): Promise<HostIsolation> {
  const { log } = deps;
  const clock = deps.clock ?? systemClock;
  const maxDisk = settings.maxAttemptDiskBytes === undefined ? {} : { maxDiskBytes: settings.maxAttemptDiskBytes };
  if (settings.executor === "sandbox") {
    const choice: IsolationChoice = {
      isolation: "sandbox",
      requested: "sandbox",
      reason: "sandbox: asked for (KILN_EXECUTOR=sandbox)",
    };
    log.info({ isolation: choice }, `isolation: ${choice.reason}`);
    return sandboxIsolation({ choice, clock, ...maxDisk });
  }
  const images = new GuestImages({
    directory: settings.guestDirectory,
    ...(settings.mirror === undefined ? {} : { mirror: settings.mirror }),
    log: (line) => log.info({ guestDirectory: settings.guestDirectory }, `microVM guest: ${line}`),
  });
  const microvm = (accel: "kvm" | "tcg", choice: IsolationChoice) =>
    microvmIsolation({ accel, guestDirectory: settings.guestDirectory, images, choice, clock, ...maxDisk });

  if (settings.executor === "microvm" && settings.microvmAccel === "tcg") {
    const isolation = microvm("tcg", {
      isolation: "microvm",
      requested: "microvm",
      reason:
        "microvm: asked for with KILN_MICROVM_ACCEL=tcg — software emulation, no hardware virtualization (slow: an operator's or a test's explicit choice)",
    });
    await ensureGuestImages(isolation.images, log);
    log.info({ isolation: isolation.choice }, `isolation: ${isolation.choice.reason}`);
    return isolation;
  }

  const started = Date.now();
  const probe = await probeGuest({
    images,
    accel: "kvm",
    qemuPath: MICROVM_DEFAULTS.qemuPath,
    bwrapPath: MICROVM_DEFAULTS.bwrapPath,
    user: await ensureSandboxUser(MICROVM_DEFAULTS.sandboxUser),
    cgroupParentName: MICROVM_DEFAULTS.cgroupParentName,
    timeoutMs: settings.probeSeconds * 1000,
  });
  log.info(
    { probe, milliseconds: Date.now() - started },
    probe.booted ? `KVM booted the probe guest in ${probe.milliseconds} ms` : `KVM probe: ${probe.reason}`,
  );
  if (probe.booted) {
    const isolation = microvm("kvm", {
      isolation: "microvm",
      requested: settings.executor,
      reason: `${settings.executor}: KVM booted a probe guest (kernel ${probe.kernelRelease}) in ${probe.milliseconds} ms`,
    });
    await ensureGuestImages(isolation.images, log);
    log.info({ isolation: isolation.choice }, `isolation: ${isolation.choice.reason}`);
    return isolation;
  }
  if (settings.executor === "microvm")
    throw new Error(
      `KILN_EXECUTOR=microvm, but ${probe.reason}; set KILN_MICROVM_ACCEL=tcg to run microVMs under software emulation (slow), or KILN_EXECUTOR=sandbox`,
    );
  const choice: IsolationChoice = {
    isolation: "sandbox",
    requested: "auto",
    reason: `auto: ${probe.reason}; serving with the sandbox`,
  };
  log.warn({ isolation: choice }, `isolation: ${choice.reason}`);
  return sandboxIsolation({ choice, clock, ...maxDisk });
}

/** Builds what is missing of the guest's boot images, and says so — or that nothing was built. */
async function ensureGuestImages(images: GuestImages, log: Logger): Promise<void> {
  const { artifacts } = await images.ensureBoot();
  const built = artifacts.filter((a) => a.built);
  log.info(
    { guestDirectory: images.directory, artifacts },
    built.length === 0
      ? `microVM guest: nothing built; ${artifacts.map((a) => a.name).join(", ")} found in ${images.directory}`
      : `microVM guest: built ${built.map((a) => a.name).join(", ")} in ${images.directory}`,
  );
}
