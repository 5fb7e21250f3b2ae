/**
 * Warm lineages on a host: cargo's own incremental state (the target dir) kept per tenant,
 * repository and job class, handed to an attempt and taken back without copying a byte.
 *
 * On disk, under the lineage root (`<work root>/../lineages`, root-only, on the same file
 * system as the work root so that rename() never copies):
 *
 *   <key>/head.json          generation counter, identity, what happened last (saved, discarded)
 *   <key>/current/           the checked-in slot; absent while an attempt holds it
 *   <key>/current/target/    the warm CARGO_TARGET_DIR (the only part the sandbox ever sees)
 *   <key>/current/state.json generation, bytes, and the agent's record of the run (source
 *                            manifest, generated lockfiles) — outside target/, so no job can
 *                            tamper with it
 *
 * Checkout is one rename() of `current/` into the attempt's directory and check-in one rename()
 * back: O(1) whatever the lineage's size, and atomic, so a slot is never half-restored and
 * target + record always travel together (a record describing another target would make cargo
 * trust stale outputs).
 *
 * Concurrency, within one agent process (one agent owns a lineage root):
 * - while an attempt holds the slot, another attempt of the lineage starts cold (reason
 *   "lineage in use") in a fresh slot of its own;
 * - every attempt remembers the generation it descends from (the slot's, or for a cold start
 *   the lineage's current one); a check-in succeeds only if the lineage is still at that
 *   generation and then advances it. Whichever of two concurrent attempts finishes first is
 *   saved; the other's result is superseded and dropped, never written over the newer one.
 * Per-key operations are serialized by an in-process lock; the rename itself is what makes a
 * slot belong to exactly one attempt.
 *
 * Purge and eviction are the control plane's (it accounts bytes against the tenant's quota):
 * a placement may say the lineage was purged or evicted through generation G. Every slot
 * records its chain's root, the generation at which its chain started cold; its target dir
 * descends from every generation from the root on. At checkout, a slot whose root is at or
 * before G descends from the dropped state and is dropped (moved into the attempt directory,
 * removed with it: O(1) here too) and the attempt starts cold with the reason ("purged",
 * "evicted"); a slot whose chain started cold after G is kept.
 *
 * The rule after the attempt (see run-attempt.ts): the slot is checked in only when cargo ran
 * to its end (pass or fail: cargo leaves a consistent target dir either way). An attempt that
 * ended before cargo ran in the slot (its dependencies could not be fetched: the tenant's own
 * failure, or cancelled or out of time while fetching) gives the slot back unchanged (`giveBack`). After a
 * cancellation, the wall-clock ceiling, an infrastructure failure or an agent error, the whole
 * tree was SIGKILLed at an arbitrary point; cargo guards its fingerprints against interruption,
 * but one cold build is cheaper than a lineage poisoned for every later job of the repository,
 * so the slot is discarded and the next job starts cold, saying why.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { flushKeptDisksUnder, releaseKeptDisksUnder } from "../executor/shared/kept-target-disk.js";
import { type CopyMethod, copyTargetDir, emptyDirectory, type SeedCandidate, sharedCount } from "./lineage-seeding.js";

/** What keys a lineage: the tenant's repository and the job class (`<family>/<profile>/<toolchain>`). */
export interface LineageIdentity {
  readonly tenant: string;
  readonly repository: string;
  readonly jobClass: string;
}

/** What a lineage key looks like (a seed candidate naming anything else is ignored). */
const LINEAGE_KEY = /^lin_[0-9a-f]{32}$/;

/** A stable, file-system-safe lineage key (also the `lineage` the evidence names). */
export function lineageKey(identity: LineageIdentity): string {
  const digest = createHash("sha256")
    .update(JSON.stringify([identity.tenant, identity.repository, identity.jobClass]))
    .digest("hex");
  return `lin_${digest.slice(0, 32)}`;
}

interface Head {
  readonly generation: number;
  readonly tenant: string;
  readonly repository: string;
  readonly class: string;
  readonly last: { readonly event: "saved" | "discarded"; readonly at: string; readonly detail: string } | null;
  /** What the checked-in slot was built from, for lineage seeding (lineage-seeding.ts); absent without a slot. */
  readonly built?: SlotBuild;
}

/** The run a checked-in slot holds: its job and the digests of its locked crates. */
interface SlotBuild {
  readonly job: string | null;
  readonly crates: readonly string[];
}

/** A new lineage's slot started from a copy of another lineage of the tenant (lineage-seeding.ts). */
export interface LineageSeedUse {
  readonly lineage: string;
  readonly repository: string;
  readonly class: string;
  readonly job: string | null;
  /** Locked crates the job shares with the seed's last run, of `lockedCrates`. */
  readonly sharedCrates: number;
  readonly lockedCrates: number;
  readonly bytes: number;
  readonly copyMs: number;
  readonly copy: CopyMethod;
}

interface SlotState {
  readonly generation: number;
  /** Where its chain started cold (absent in slots saved before roots were recorded: 1). */
  readonly root?: number;
  readonly bytes: number;
  readonly saved_at: string;
  readonly record: unknown;
}

/** What an attempt holds of its lineage between restore and save. */
export interface LineageLease {
  readonly key: string;
  readonly identity: LineageIdentity;
  readonly attemptId: string;
  readonly outcome: "warm" | "cold";
  /** Why cold; null when warm. */
  readonly reason: string | null;
  /** The generation this attempt's target dir descends from (0: the lineage has none yet). */
  readonly baseGeneration: number;
  /** Where the restored slot's chain started cold (null when cold: a save starts a new chain). */
  readonly rootGeneration: number | null;
  /** Bytes of the lineage handed over, as measured when it was checked in (0 when cold). */
  readonly restoredBytes: number;
  /** What the agent recorded with the slot at its check-in (null when cold). */
  readonly record: unknown;
  /** The attempt's slot; `targetDir` lies in it. */
  readonly slotDir: string;
  /** The host path to use as CARGO_TARGET_DIR: the warm one, or a fresh empty one. */
  readonly targetDir: string;
  /** How long the checkout took (the rename and the reads around it). */
  readonly checkoutMs: number;
  /** Set when the cold slot was seeded from another lineage of the tenant. */
  readonly seed?: LineageSeedUse;
}

/** The control plane's word that the lineage was purged or evicted through a generation. */
export interface LineageDropOrder {
  readonly reason: "purged" | "evicted";
  readonly throughGeneration: number;
}

export type CheckInResult =
  | { readonly saved: true; readonly generation: number; readonly root: number }
  | { readonly saved: false; readonly detail: string };

const errorCode = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | null)?.code;

async function readJson<T>(path: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
}

/** Replaces a small file atomically (write beside it, rename over it). */
async function writeJson(path: string, value: unknown): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, JSON.stringify(value), { mode: 0o600 });
  await rename(temporary, path);
}

export class LineageStore {
  /** Lineage key → the attempts of this process holding a slot checked out of it. */
  private readonly held = new Map<string, Set<string>>();
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(readonly root: string) {}

  /** Runs `fn` with the key's lock held (per-key read-modify-write of head.json). */
  private async locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(key) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.locks.set(key, tail);
    try {
      return await next;
    } finally {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    }
  }

  /**
   * Hands the lineage's slot to the attempt by renaming it to `<attemptDir>/lineage`, or makes
   * a fresh, empty slot there when there is none to hand over (cold, with the reason).
   */
  async checkout(
    identity: LineageIdentity,
    attemptDir: string,
    attemptId: string,
    drop: LineageDropOrder | null = null,
  ): Promise<LineageLease> {
    const key = lineageKey(identity);
    const dir = join(this.root, key);
    const slotDir = join(attemptDir, "lineage");
    const targetDir = join(slotDir, "target");
    const started = process.hrtime.bigint();
    const elapsed = () => Number(process.hrtime.bigint() - started) / 1e6;
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // The slot's parent must exist: a rename into a missing directory is ENOENT too, which
    // would read as "no slot to hand over".
    await mkdir(attemptDir, { recursive: true });
    return this.locked(key, async () => {
      const head = await readJson<Head>(join(dir, "head.json"));
      const cold = async (reason: string, base = head?.generation ?? 0): Promise<LineageLease> => {
        await mkdir(targetDir, { recursive: true });
        return {
          key,
          identity,
          attemptId,
          outcome: "cold",
          reason,
          baseGeneration: base,
          rootGeneration: null,
          restoredBytes: 0,
          record: null,
          slotDir,
          targetDir,
          checkoutMs: elapsed(),
        };
      };
      try {
        await rename(join(dir, "current"), slotDir);
      } catch (error) {
        const code = errorCode(error);
        if (code !== "ENOENT") {
          return cold(
            code === "EXDEV"
              ? "the lineage store is on another file system than the work root"
              : `the lineage could not be restored (${code ?? String(error)})`,
          );
        }
        if ((this.held.get(key)?.size ?? 0) > 0) return cold("lineage in use");
        if (head === null) return cold("first job of the class");
        if (head.last?.event === "discarded") return cold(head.last.detail);
        // Checked out and never checked back in: its attempt was on an agent that stopped.
        return cold("the lineage was lost with an attempt that did not finish on this host");
      }
      this.hold(key, attemptId);
      const state = await readJson<SlotState>(join(slotDir, "state.json"));
      if (state === null || typeof state.generation !== "number") {
        // A slot without its state cannot vouch for its record: treat it as no lineage at all.
        this.release(key, attemptId);
        await releaseKeptDisksUnder([slotDir]);
        await rm(slotDir, { recursive: true, force: true });
        return cold("the lineage's state was unreadable");
      }
      const root = typeof state.root === "number" ? state.root : 1;
      if (drop !== null && root <= drop.throughGeneration) {
        // Descends from the purged or evicted state: drop it with the attempt directory.
        this.release(key, attemptId);
        await rename(slotDir, join(attemptDir, "dropped-lineage"));
        await writeJson(
          join(dir, "head.json"),
          this.head(identity, state.generation, {
            event: "discarded",
            at: new Date().toISOString(),
            detail: drop.reason,
          }),
        );
        return cold(drop.reason, state.generation);
      }
      // A crash between a check-in's rename and its head write leaves head one behind: heal it.
      if (head === null || head.generation !== state.generation) {
        await writeJson(
          join(dir, "head.json"),
          this.head(identity, state.generation, head?.last ?? null, head?.built ?? null),
        );
      }
      return {
        key,
        identity,
        attemptId,
        outcome: "warm",
        reason: null,
        baseGeneration: state.generation,
        rootGeneration: root,
        restoredBytes: state.bytes,
        record: state.record,
        slotDir,
        targetDir,
        checkoutMs: elapsed(),
      };
    });
  }

  /**
   * Writes back what a kept target disk under the lease's target dir still holds in memory
   * (flushKeptDisksUnder): before check-in measures the slot's bytes, and early, while a test
   * job's binaries run (AttemptLineage.writeBackEarly). A method of the store so that a test can
   * see when each write-back runs and hold one back.
   */
  writeBack(lease: LineageLease): Promise<void> {
    return flushKeptDisksUnder(lease.targetDir);
  }

  /**
   * Saves the attempt's slot as the lineage's new generation, unless another attempt checked
   * in since this one's base generation (then the newer one stays and this one is dropped;
   * the caller removes the attempt directory, slot included).
   */
  async checkIn(
    lease: LineageLease,
    saved: { bytes: number; record: unknown; at: Date; built?: SlotBuild | null },
  ): Promise<CheckInResult> {
    const dir = join(this.root, lease.key);
    return this.locked(lease.key, async () => {
      this.release(lease.key, lease.attemptId);
      const head = await readJson<Head>(join(dir, "head.json"));
      const current = head?.generation ?? 0;
      if (current !== lease.baseGeneration) {
        return {
          saved: false,
          detail: `superseded: the lineage moved to generation ${current} while this attempt ran (it started from ${lease.baseGeneration})`,
        };
      }
      const generation = current + 1;
      const root = lease.rootGeneration ?? generation;
      const state: SlotState = {
        generation,
        root,
        bytes: saved.bytes,
        saved_at: saved.at.toISOString(),
        record: saved.record,
      };
      await writeJson(join(lease.slotDir, "state.json"), state);
      // A slot left in place at this generation (a crash before its head write) is replaced.
      await rename(join(dir, "current"), join(lease.slotDir, "..", "replaced-lineage")).catch(() => undefined);
      await rename(lease.slotDir, join(dir, "current"));
      await writeJson(
        join(dir, "head.json"),
        this.head(
          lease.identity,
          generation,
          { event: "saved", at: saved.at.toISOString(), detail: lease.attemptId },
          saved.built ?? null,
        ),
      );
      return { saved: true, generation, root };
    });
  }

  /**
   * Gives up the attempt's slot (it stays in the attempt directory, removed with it). When
   * the lineage is left without a slot because of it, the next job's cold reason says why.
   */
  async discard(lease: LineageLease, why: string, at: Date): Promise<void> {
    const dir = join(this.root, lease.key);
    await this.locked(lease.key, async () => {
      const held = this.release(lease.key, lease.attemptId);
      const head = await readJson<Head>(join(dir, "head.json"));
      if (held && head !== null && head.generation === lease.baseGeneration) {
        await writeJson(
          join(dir, "head.json"),
          this.head(lease.identity, head.generation, {
            event: "discarded",
            at: at.toISOString(),
            detail: `the lineage's last attempt ${why}; its target dir was discarded`,
          }),
        );
      }
    });
  }

  /**
   * Puts the attempt's slot back as the lineage's current one, unchanged (its state and record
   * as they were checked out), for an attempt that ended before cargo ran in it: its
   * dependencies could not be fetched, or it was cancelled or reached its ceiling while they
   * were. The lineage stays at its generation, as if the attempt had never checked it out. A
   * cold slot has nothing to give back; a lineage that moved on meanwhile keeps the newer slot.
   * Returns whether the slot went back.
   */
  async giveBack(lease: LineageLease): Promise<boolean> {
    const dir = join(this.root, lease.key);
    return this.locked(lease.key, async () => {
      const held = this.release(lease.key, lease.attemptId);
      if (!held || lease.outcome !== "warm") return false;
      const head = await readJson<Head>(join(dir, "head.json"));
      if (head === null || head.generation !== lease.baseGeneration) return false;
      try {
        await rename(lease.slotDir, join(dir, "current"));
        return true;
      } catch {
        return false;
      }
    });
  }

  /**
   * Fills a new lineage's cold slot with a copy of the candidate sharing the most of `crates`
   * (the job's locked crates' digests) — one of the same tenant, checked in on this host, whose
   * last run shared at least one — and says so in the returned lease (still `cold`: the lineage
   * had nothing of its own). A candidate that is checked out, another tenant's, or fails to copy
   * is passed over. Returns the lease unchanged, with why, when none serves.
   */
  async seed(
    lease: LineageLease,
    candidates: readonly SeedCandidate[],
    crates: readonly string[],
  ): Promise<{ lease: LineageLease; note: string }> {
    if (lease.outcome !== "cold" || lease.baseGeneration !== 0) {
      return { lease, note: "not seeded: the lineage is not new" };
    }
    const ranked: { candidate: SeedCandidate; shared: number; job: string | null }[] = [];
    for (const candidate of candidates) {
      if (!LINEAGE_KEY.test(candidate.lineage) || candidate.lineage === lease.key) continue;
      const head = await readJson<Head>(join(this.root, candidate.lineage, "head.json")).catch(() => null);
      // The control plane offers only the tenant's own lineages; the host holds it to that too.
      if (head === null || head.tenant !== lease.identity.tenant || !Array.isArray(head.built?.crates)) continue;
      const shared = sharedCount(crates, head.built.crates);
      if (shared > 0) ranked.push({ candidate, shared, job: head.built.job ?? null });
    }
    ranked.sort((a, b) => b.shared - a.shared);
    const passedOver: string[] = [];
    for (const { candidate, shared, job } of ranked) {
      const seedDir = join(this.root, candidate.lineage);
      const started = process.hrtime.bigint();
      const copied = await this.locked(candidate.lineage, async () => {
        const state = await readJson<SlotState>(join(seedDir, "current", "state.json")).catch(() => null);
        if (state === null) return "checked out by a running attempt";
        try {
          const copy = await copyTargetDir(join(seedDir, "current", "target"), lease.targetDir);
          return { copy, bytes: state.bytes };
        } catch (error) {
          await emptyDirectory(lease.targetDir);
          return `its copy failed (${error instanceof Error ? error.message : String(error)})`;
        }
      });
      if (typeof copied === "string") {
        passedOver.push(`${candidate.lineage}: ${copied}`);
        continue;
      }
      const copyMs = Number(process.hrtime.bigint() - started) / 1e6;
      const seed: LineageSeedUse = {
        lineage: candidate.lineage,
        repository: candidate.repository,
        class: candidate.class,
        job,
        sharedCrates: shared,
        lockedCrates: crates.length,
        bytes: copied.bytes,
        copyMs,
        copy: copied.copy,
      };
      return {
        lease: {
          ...lease,
          reason: `seeded: ${lease.reason}; started from a copy of lineage ${candidate.lineage} (${candidate.repository}, ${candidate.class}), which shares ${shared} of its ${crates.length} locked crates`,
          restoredBytes: copied.bytes,
          seed,
        },
        note: `seeded from lineage ${candidate.lineage} (${candidate.repository}, ${candidate.class}): ${shared} of ${crates.length} locked crates shared, ${(copied.bytes / 1e6).toFixed(1)} MB copied (${copied.copy}) in ${copyMs.toFixed(1)} ms`,
      };
    }
    const why =
      candidates.length === 0
        ? "no lineage of the tenant on this host was built with the same class, injected settings, target and flags"
        : ranked.length === 0
          ? `none of the ${candidates.length} lineages offered shares a locked crate with it`
          : `every lineage sharing its crates was passed over (${passedOver.join("; ")})`;
    return { lease, note: `not seeded: ${why}` };
  }

  private hold(key: string, attemptId: string): void {
    const holders = this.held.get(key) ?? new Set<string>();
    holders.add(attemptId);
    this.held.set(key, holders);
  }

  /** Whether the attempt held a slot of the lineage (it no longer does). */
  private release(key: string, attemptId: string): boolean {
    const holders = this.held.get(key);
    const was = holders?.delete(attemptId) ?? false;
    if (holders?.size === 0) this.held.delete(key);
    return was;
  }

  private head(
    identity: LineageIdentity,
    generation: number,
    last: Head["last"],
    built: SlotBuild | null = null,
  ): Head {
    return {
      generation,
      tenant: identity.tenant,
      repository: identity.repository,
      class: identity.jobClass,
      last,
      ...(built === null ? {} : { built }),
    };
  }
}
