import { createHash } from "node:crypto";
import type { AttemptPlacement, Injection, JobAdmission } from "@kiln/contract";
import { findLineageSeeds, type JobRow, type StorageOrTransaction } from "@kiln/storage";

/** The parts of a job's invocation that change how its units compile. */
interface CompilingInvocation {
  readonly arguments: readonly string[];
  readonly environment?: Readonly<Record<string, string>>;
}

/**
 * What a lineage's dependency builds were compiled with, beyond the locked crates themselves:
 * the job class (family, profile, toolchain), the injected build settings applied, and the
 * arguments and environment that change how every unit compiles (`--target`, RUSTFLAGS, cargo's
 * own CARGO_* settings). Two jobs of the same tenant with equal contexts lay their dependencies
 * out the same way (the dependency gateway puts every crate at the same path), so cargo finds
 * the units of the crates they share fresh in either's target dir: that makes one lineage a
 * seed for the other (lineage seeding, find-lineage-seeds.ts). Which of those seeds shares the
 * most is the host's to rank, since only it reads the job's Cargo.lock. A digest, so the
 * column stays short and equality is the whole query.
 */
export function lineageSeedContext(input: {
  readonly jobClass: string;
  readonly invocation: CompilingInvocation;
  readonly injections: readonly Injection[];
}): string {
  const applied = input.injections
    .filter((i) => i.status === "applied" && i.environment !== null)
    .map((i) => `${i.environment?.name}=${i.environment?.value}`)
    .sort();
  const environment = Object.entries(input.invocation.environment ?? {})
    .filter(([name]) => COMPILING_ENVIRONMENT.test(name))
    .map(([name, value]) => `${name}=${value}`)
    .sort();
  const context = JSON.stringify([input.jobClass, targetsOf(input.invocation.arguments), applied, environment]);
  return `ctx_${createHash("sha256").update(context).digest("hex").slice(0, 32)}`;
}

/** Environment that changes how every unit compiles (not what tests read at run time). */
const COMPILING_ENVIRONMENT = /^(RUSTFLAGS|RUSTDOCFLAGS|CARGO_ENCODED_RUSTFLAGS|CARGO_ENCODED_RUSTDOCFLAGS|CARGO_.*)$/;

/** The `--target` triples the arguments name, in order (none: the host's). */
function targetsOf(args: readonly string[]): string[] {
  const targets: string[] = [];
  const end = args.indexOf("--");
  const own = end < 0 ? args : args.slice(0, end);
  own.forEach((arg, index) => {
    if (arg.startsWith("--target=")) targets.push(arg.slice("--target=".length));
    else if (arg === "--target" && own[index + 1] !== undefined) targets.push(own[index + 1] as string);
  });
  return targets;
}

/** The seed context of a stored job (null when its records cannot be read: such a lineage is never a seed). */
export function seedContextOfJob(job: JobRow): string | null {
  try {
    const admission = JSON.parse(job.admitted ?? "null") as JobAdmission | null;
    const invocation = JSON.parse(job.invocation ?? "null") as CompilingInvocation | null;
    if (admission === null || invocation === null || !Array.isArray(invocation.arguments)) return null;
    return lineageSeedContext({ jobClass: job.class, invocation, injections: admission.injections ?? [] });
  } catch {
    return null;
  }
}

/**
 * What the placement of a claimed job says about lineage seeding: whether the repository's
 * setting was on at admission and, when it was, the lineages the host may seed it from (none
 * when the job's own lineage is live on that host).
 */
export async function lineageSeedsFor(
  target: StorageOrTransaction,
  job: JobRow,
  host: string,
): Promise<NonNullable<AttemptPlacement["lineageSeeds"]>> {
  const admission = JSON.parse(job.admitted ?? "null") as Partial<JobAdmission> | null;
  const enabled = admission?.lineage_seeding ?? true;
  const seedContext = seedContextOfJob(job);
  if (!enabled || seedContext === null) return { enabled, candidates: [] };
  const candidates = await findLineageSeeds(target, {
    tenantId: job.tenant_id,
    repository: job.repository,
    class: job.class,
    host,
    seedContext,
  });
  return { enabled, candidates };
}
