/**
 * One attempt's side of its warm lineage: restore (check the slot out, give the freshly
 * materialized source its deterministic mtimes, put back a lockfile cargo generated) before
 * cargo runs, and save (check the slot back in with the run's record) or discard after, plus
 * the evidence's `caches` item saying what happened.
 */
import type { ExecutionOutcome, MountPoints } from "../executor/executor.js";
import {
  captureGeneratedLockfiles,
  type GeneratedLockfile,
  lockfileCandidates,
  parseGeneratedLockfiles,
  resolutionInputsUnchanged,
  restoreGeneratedLockfiles,
} from "./generated-lockfiles.js";
import type { CacheItem, CrateItem, LineageSave, Placement } from "./host-protocol.js";
import { emptyDirectory, lockedCrateDigests, workspaceLockfile } from "./lineage-seeding.js";
import type { LineageLease, LineageStore } from "./lineage-store.js";
import { measureTreeBytes } from "./measure-tree-bytes.js";
import {
  applySourceMtimes,
  parseSourceManifest,
  planSourceMtimes,
  type SourceManifest,
  withoutRewrittenFiles,
} from "./source-mtimes.js";

/**
 * Where every attempt sees its directories inside the sandbox. Fixed, so that the absolute
 * paths cargo hashes into its fingerprints (workspace members, CARGO_TARGET_DIR) are the same
 * for every attempt of a lineage, whatever host directories back them.
 */
export const SANDBOX_MOUNTS: MountPoints = { workspace: "/kiln/src", target: "/kiln/target", home: "/kiln/home" };

/**
 * The baseline of affected_tests (affected-tests.ts): the source of the lineage's last `cargo
 * test` run that tested every package a plain `cargo test` tests (all of them, or the affected
 * ones of an unchanged rest) and passed, and what it was run with.
 */
export interface TestBaseline {
  /** Source path → SHA-256. */
  readonly sources: Readonly<Record<string, string>>;
  /** The job whose run it was. */
  readonly job: string;
  /** The arguments, environment and working directory it ran with (a comparison key). */
  readonly invocation: string;
}

/** What the agent keeps with a lineage's slot about the run that built it. */
interface LineageRecord {
  readonly manifest: SourceManifest;
  readonly lockfiles: readonly GeneratedLockfile[];
  readonly tests: TestBaseline | null;
}

function parseTestBaseline(value: unknown): TestBaseline | null {
  const v = value as Partial<TestBaseline> | null | undefined;
  if (typeof v?.job !== "string" || typeof v.invocation !== "string") return null;
  if (v.sources === null || typeof v.sources !== "object" || Array.isArray(v.sources)) return null;
  const sources: Record<string, string> = Object.create(null);
  for (const [path, sha256] of Object.entries(v.sources)) {
    if (typeof sha256 !== "string") return null;
    sources[path] = sha256;
  }
  return { sources, job: v.job, invocation: v.invocation };
}

function parseRecord(value: unknown): LineageRecord | null {
  const v = value as { manifest?: unknown; lockfiles?: unknown; tests?: unknown } | null;
  const manifest = parseSourceManifest(v?.manifest ?? null);
  return manifest === null
    ? null
    : { manifest, lockfiles: parseGeneratedLockfiles(v?.lockfiles), tests: parseTestBaseline(v?.tests) };
}

/** How the attempt's run ended, for the slot: the executor's outcome, or that it filled its disk quota. */
export type LineageEnding = ExecutionOutcome | "disk_quota_exceeded";

/** Why a slot is not checked in, by how the executor ended (see lineage-store.ts for the rule). */
const DISCARDED_BECAUSE: Readonly<Record<Exclude<LineageEnding, "exited">, string>> = {
  cancelled: "was cancelled while cargo ran",
  wall_clock_ceiling: "was stopped at its wall-clock ceiling while cargo ran",
  infrastructure: "could not be run to its end by the sandbox",
  disk_quota_exceeded: "filled its disk quota (the next job would start with a full target dir)",
};

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

export class AttemptLineage {
  private settled = false;
  /** The write-back writeBackEarly started, if any; never rejects (its failure was reported). */
  private earlyWriteBack: Promise<void> | null = null;
  private savedBytes: number | null = null;
  private saved: { generation: number; root: number } | null = null;
  private saveNote: string | null = null;

  private constructor(
    private readonly store: LineageStore,
    private lease: LineageLease,
    private readonly placement: Placement,
    private readonly workspaceDir: string,
    private manifest: SourceManifest,
    /** Log lines about the restore. */
    readonly notes: readonly string[],
    /** The affected_tests baseline the restored slot carries (null when cold or none). */
    readonly testBaseline: TestBaseline | null,
    /** A new lineage left unseeded at restore for want of a Cargo.lock to rank seeds by. */
    private awaitingLockfile: boolean,
  ) {
    this.nextTestBaseline = testBaseline;
  }

  /** The baseline saved with the slot: the restored one unless this run sets a new one. */
  nextTestBaseline: TestBaseline | null;

  /** The generation the slot was restored from (null when cold). */
  get restoredGeneration(): number | null {
    return this.lease.outcome === "warm" ? this.lease.baseGeneration : null;
  }

  /**
   * Checks the lineage out into `attemptDir` and prepares the materialized source in
   * `workspaceDir`: deterministic mtimes, and the previous run's generated lockfile where
   * the resolution inputs are unchanged. `nowMs` is the mtime of changed and new files.
   */
  static async restore(
    store: LineageStore,
    placement: Placement,
    dirs: { attemptDir: string; workspaceDir: string; attemptId: string },
    nowMs: number,
  ): Promise<AttemptLineage> {
    const identity = { tenant: placement.tenant, repository: placement.repository, jobClass: placement.jobClass };
    const checkedOut = await store.checkout(identity, dirs.attemptDir, dirs.attemptId, placement.lineageDrop ?? null);
    const seeded = await seedNewLineage(store, checkedOut, placement, dirs.workspaceDir);
    const lease = seeded.lease;
    const record = lease.outcome === "warm" ? parseRecord(lease.record) : null;
    const plan = planSourceMtimes(placement.source, record?.manifest ?? null, nowMs);
    await applySourceMtimes(dirs.workspaceDir, plan.manifest);
    const notes = [
      lease.outcome === "warm"
        ? `lineage ${lease.key} (${placement.repository}, ${placement.jobClass}): warm, generation ${lease.baseGeneration}, ${mb(lease.restoredBytes)} handed over in ${lease.checkoutMs.toFixed(1)} ms; ${plan.unchanged} of ${placement.source.length} source files unchanged keep their mtimes`
        : `lineage ${lease.key} (${placement.repository}, ${placement.jobClass}): cold (${lease.reason})`,
      ...(seeded.note === null ? [] : [`lineage ${lease.key}: ${seeded.note}`]),
    ];
    if (record !== null && record.lockfiles.length > 0) {
      if (resolutionInputsUnchanged(placement.source, record.manifest)) {
        const candidates = new Set(lockfileCandidates(placement.source, placement.invocation.working_directory ?? "."));
        for (const lockfile of record.lockfiles.filter((l) => candidates.has(l.path))) {
          try {
            await restoreGeneratedLockfiles(dirs.workspaceDir, [lockfile]);
            notes.push(
              `${lockfile.path} put back as cargo generated it last time (no manifest or cargo configuration changed), mtime included`,
            );
          } catch (error) {
            notes.push(`${lockfile.path}: could not be put back (${error instanceof Error ? error.message : error})`);
          }
        }
      } else notes.push("a Cargo.toml or cargo configuration changed: cargo resolves the lockfile afresh");
    }
    return new AttemptLineage(
      store,
      lease,
      placement,
      dirs.workspaceDir,
      plan.manifest,
      notes,
      record?.tests ?? null,
      seeded.awaitingLockfile,
    );
  }

  /**
   * A new lineage whose source had no Cargo.lock at restore is seeded once the dependency
   * gateway had cargo generate one (`lockfile`): the gateway's generate-lockfile wrote nothing
   * to the slot that a build would use, so the slot is emptied and filled as at restore. Returns
   * the log line, or null when restore already decided (a lock was there, the lineage is not
   * new, or seeding is off).
   */
  async seedFromGeneratedLockfile(lockfile: string): Promise<string | null> {
    if (!this.awaitingLockfile || this.placement.lineageSeeds === undefined) return null;
    this.awaitingLockfile = false;
    const crates = lockedCrateDigests(lockfile);
    if (crates === null || crates.length === 0) {
      return `lineage ${this.lease.key}: not seeded: the Cargo.lock cargo generated locks no crate from outside the workspace`;
    }
    await emptyDirectory(this.lease.targetDir);
    const seeded = await this.store.seed(this.lease, this.placement.lineageSeeds.candidates, crates);
    this.lease = seeded.lease;
    return `lineage ${this.lease.key}: ${seeded.note}, ranked by the Cargo.lock cargo generated`;
  }

  get targetDir(): string {
    return this.lease.targetDir;
  }

  get warm(): boolean {
    return this.lease.outcome === "warm";
  }

  /**
   * Starts writing back what cargo has written to the kept target disk so far, while the attempt
   * goes on: called when a test job's build is finished and its test binaries start, so the
   * save's own write-back (LineageStore.writeBack, on the way to the job's result) is left with
   * only what the tests wrote. After a one-file edit of regex that was about 0.4 s of rebuilt
   * binaries on the result's path. A failure is `reported` and leaves the save's write-back to
   * do it all (and fail the save if it fails too).
   */
  writeBackEarly(reported: (error: unknown) => void): void {
    if (this.settled || this.earlyWriteBack !== null) return;
    this.earlyWriteBack = this.store.writeBack(this.lease).catch(reported);
  }

  /**
   * After the run: checks the slot in when cargo ran to its end (pass or fail), else discards
   * it. Returns the log line saying which.
   */
  async save(outcome: LineageEnding, at: Date): Promise<string> {
    // A `sync` still running holds the disk, which a discard unmounts.
    await this.earlyWriteBack;
    try {
      return await this.checkInOrDiscard(outcome, at);
    } catch (error) {
      // The job's result stands; only the lineage is lost (the slot goes with the attempt directory).
      this.savedBytes = null;
      this.saveNote = `not saved: ${error instanceof Error ? error.message : String(error)}`;
      await this.store.discard(this.lease, "could not be saved", at).catch(() => undefined);
      return `lineage ${this.lease.key}: ${this.saveNote}`;
    }
  }

  private async checkInOrDiscard(outcome: LineageEnding, at: Date): Promise<string> {
    this.settled = true;
    if (outcome !== "exited") {
      const why = DISCARDED_BECAUSE[outcome];
      await this.store.discard(this.lease, why, at);
      this.saveNote = `not saved: the attempt ${why}`;
      return `lineage ${this.lease.key}: ${this.saveNote}; its target dir is discarded`;
    }
    const workingDirectory = this.placement.invocation.working_directory ?? ".";
    // A target disk kept mounted holds its last writes in memory: written back first, so the
    // lineage's bytes below are what it holds (kept-target-disk.ts).
    await this.store.writeBack(this.lease);
    // Independent reads of the finished attempt's directories: side by side.
    const [lockfiles, manifest, measured, lockfile] = await Promise.all([
      captureGeneratedLockfiles(this.workspaceDir, lockfileCandidates(this.placement.source, workingDirectory)),
      withoutRewrittenFiles(this.workspaceDir, this.manifest),
      measureTreeBytes(this.lease.targetDir),
      workspaceLockfile(this.workspaceDir, this.placement),
    ]);
    this.manifest = manifest;
    const bytes = measured ?? 0;
    const result = await this.store.checkIn(this.lease, {
      bytes,
      record: { manifest: this.manifest, lockfiles, tests: this.nextTestBaseline },
      at,
      // What a later new lineage of the tenant ranks this one by, as a seed (lineage-seeding.ts).
      built: { job: this.placement.jobId, crates: lockfile === null ? [] : (lockedCrateDigests(lockfile) ?? []) },
    });
    if (result.saved) {
      this.savedBytes = bytes;
      this.saved = { generation: result.generation, root: result.root };
      this.saveNote = `saved as generation ${result.generation}`;
      return `lineage ${this.lease.key}: ${this.saveNote} (${mb(bytes)})`;
    }
    this.saveNote = `not saved: ${result.detail}`;
    return `lineage ${this.lease.key}: ${this.saveNote}`;
  }

  /**
   * When the attempt ended before cargo ran in the slot (the dependency fetch failed, was
   * cancelled or reached the ceiling): the slot goes back unchanged and the lineage stays as it
   * was. Returns the log line saying so.
   */
  async giveBack(): Promise<string> {
    if (this.settled) return `lineage ${this.lease.key}: ${this.saveNote ?? "settled"}`;
    this.settled = true;
    const kept = await this.store.giveBack(this.lease);
    this.saveNote =
      this.lease.outcome === "cold"
        ? "not saved: the attempt ended before cargo ran"
        : kept
          ? `kept as it was (generation ${this.lease.baseGeneration}): the attempt ended before cargo ran`
          : "not kept: the lineage moved on while the attempt ran";
    return `lineage ${this.lease.key}: ${this.saveNote}`;
  }

  /** When the attempt ended without reaching save (an error of the agent): give the slot up. */
  async abandon(at: Date): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    await this.earlyWriteBack;
    await this.store.discard(this.lease, "ended with an error of the host agent", at);
  }

  /** The generation this attempt saved, for the control plane's quota accounting; null when it saved none. */
  lineageSave(): LineageSave | null {
    if (this.saved === null || this.savedBytes === null) return null;
    return {
      lineage: this.lease.key,
      bytes: this.savedBytes,
      generation: this.saved.generation,
      rootGeneration: this.saved.root,
    };
  }

  /**
   * The evidence's `caches` item (open record: generation and what became of the save are
   * extra; a seeded attempt's seed and the dependency crates cargo found fresh in its copy too).
   */
  cacheItem(crates: readonly CrateItem[] = []): CacheItem {
    const seed = this.lease.seed;
    return {
      lineage: this.lease.key,
      class: this.placement.jobClass,
      outcome: this.lease.outcome,
      reason: this.lease.reason,
      restored_bytes: this.lease.restoredBytes,
      saved_bytes: this.savedBytes,
      restored_generation: this.lease.outcome === "warm" ? this.lease.baseGeneration : null,
      restore_ms: Math.round(this.lease.checkoutMs * 1000) / 1000,
      save: this.saveNote,
      // The generation saved and where its chain started cold (what the control plane accounts
      // comes from lineageSave(), not from here).
      saved_generation: this.saved?.generation ?? null,
      root_generation: this.saved?.root ?? null,
      ...(seed === undefined
        ? {}
        : {
            seeded_from: {
              lineage: seed.lineage,
              repository: seed.repository,
              class: seed.class,
              job: seed.job,
              shared_crates: seed.sharedCrates,
              locked_crates: seed.lockedCrates,
              copy_ms: Math.round(seed.copyMs * 1000) / 1000,
              copy: seed.copy,
            },
            reused_units: crates.filter((c) => c.source !== "workspace" && c.outcome === "fresh").length,
          }),
    };
  }
}

/**
 * Lineage seeding at restore (lineage-seeding.ts): a new lineage's cold slot is filled with a
 * copy of the best seed the placement offers, when the repository's setting allows it and the
 * job has a Cargo.lock to rank seeds by. Returns the lease to use and a log line (null: the
 * placement says nothing of seeding).
 */
async function seedNewLineage(
  store: LineageStore,
  lease: LineageLease,
  placement: Placement,
  workspaceDir: string,
): Promise<{ lease: LineageLease; note: string | null; awaitingLockfile: boolean }> {
  const seeding = placement.lineageSeeds;
  if (seeding === undefined || lease.outcome !== "cold" || lease.baseGeneration !== 0) {
    return { lease, note: null, awaitingLockfile: false };
  }
  if (!seeding.enabled) {
    return {
      lease: { ...lease, reason: `${lease.reason}; lineage seeding is off for this repository` },
      note: "not seeded: the repository's lineage_seeding setting is off",
      awaitingLockfile: false,
    };
  }
  const lockfile = await workspaceLockfile(workspaceDir, placement);
  if (lockfile === null) {
    // Through the dependency gateway cargo generates one before the build: ranked then
    // (seedFromGeneratedLockfile). Otherwise cargo resolves offline inside the build itself.
    const gateway = placement.network.policy === "dependency-gateway";
    return {
      lease,
      note: gateway
        ? "no Cargo.lock in the source: seeds are ranked once the dependency gateway has cargo generate one"
        : "not seeded: the source has no Cargo.lock to rank seeds by",
      awaitingLockfile: gateway,
    };
  }
  const crates = lockedCrateDigests(lockfile);
  if (crates === null || crates.length === 0) {
    return {
      lease,
      note: `not seeded: ${crates === null ? "its Cargo.lock is not one cargo could use" : "its Cargo.lock locks no crate from outside the workspace"}`,
      awaitingLockfile: false,
    };
  }
  return { ...(await store.seed(lease, seeding.candidates, crates)), awaitingLockfile: false };
}
