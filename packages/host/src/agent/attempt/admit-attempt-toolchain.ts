import { stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { messageOf } from "@kiln/contract";
import type { AdmittedToolchain } from "../../executor/executor.js";
import type { AttemptContext } from "./attempt-context.js";

/**
 * The toolchain admitted with the job, as this host has it installed; or why not, which fails
 * the job with cause toolchain_not_admitted (a toolchain is never silently replaced).
 */
export async function admitAttemptToolchain(
  attempt: AttemptContext,
): Promise<{ admitted: AdmittedToolchain } | { refused: string }> {
  try {
    return { admitted: await resolveRemembered(attempt.deps.resolveToolchain, attempt.placement.toolchain) };
  } catch (error) {
    const detail = messageOf(error);
    attempt.system(`kiln: toolchain ${attempt.placement.toolchain} is not admitted: ${detail}`);
    return { refused: detail };
  }
}

type Resolve<T extends AdmittedToolchain = AdmittedToolchain> = (name: string) => Promise<T>;

/** What a resolution depended on: the toolchains directory and the toolchain's channel manifest. */
interface Remembered {
  readonly admitted: AdmittedToolchain;
  readonly stamp: string;
}

/**
 * Admissions remembered per resolver and requested name. Resolving lists every installed
 * toolchain and reads each one's channel manifest (about 1 MB each), 5–60 ms of every warm
 * job's fixed cost (docs/benchmarks.md, issue 21). A remembered admission is used only while
 * the toolchains directory (a toolchain installed or removed) and the admitted toolchain's
 * channel manifest (an update in place) keep their modification times; a refusal is never
 * remembered, so a toolchain installed later is found at once.
 */
const remembered = new WeakMap<Resolve, Map<string, Remembered>>();

async function stampOf(admitted: AdmittedToolchain): Promise<string | null> {
  try {
    const [toolchains, manifest] = await Promise.all([
      stat(dirname(admitted.path)),
      stat(join(admitted.path, "lib", "rustlib", "multirust-channel-manifest.toml")),
    ]);
    return `${toolchains.mtimeMs}/${manifest.mtimeMs}/${manifest.size}`;
  } catch {
    // A linked toolchain has no manifest: resolved afresh each time.
    return null;
  }
}

export async function resolveRemembered<T extends AdmittedToolchain>(resolve: Resolve<T>, name: string): Promise<T> {
  let byName = remembered.get(resolve);
  if (byName === undefined) {
    byName = new Map();
    remembered.set(resolve, byName);
  }
  const known = byName.get(name);
  // Remembered under this very resolver, so it is one of the T it returned.
  if (known !== undefined && (await stampOf(known.admitted)) === known.stamp) return known.admitted as T;
  const admitted = await resolve(name);
  const stamp = await stampOf(admitted);
  if (stamp === null) byName.delete(name);
  else byName.set(name, { admitted, stamp });
  return admitted;
}
