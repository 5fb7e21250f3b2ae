/**
 * T12 SSE and log resume, on SQLite and PostgreSQL, over real sockets. While a job's host
 * appends log lines (the in-process host protocol, in random batches) and job events are
 * written for its tenant (jobs accepted by several concurrent writers, with another tenant's
 * interleaved), two clients follow them — jobs.logs_stream and cli.events — and disconnect at
 * seeded random points (after 0 to 5 frames of 1 to 60 lines, sometimes before reading any), resuming each time
 * from the last id they processed (Last-Event-ID, or for the log sometimes `cursor`). Half-way
 * the server is restarted: the app and its storage are closed and a new app is opened over the
 * same SQLite file or PostgreSQL database, on another port; the clients resume against it.
 *
 * Broken promises: a log sequence or a tenant event never delivered (gap), one delivered twice
 * (duplicate), a record whose text is not the line written under it, a frame id that is not
 * the position after its page (log) or the event's own sequence (events), another tenant's
 * event delivered, the log stream not ending with one settled frame after the job finishes.
 * Every verdict is a count over what was delivered; machine load only changes how long it takes.
 */

import type { AttemptResult } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import type { LocalBlobStore, Storage } from "@kiln/storage";
import type { TestDatabase } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/build-app.js";
import { bearer, hostProtocolOf, personWithToken, testBlobs } from "../src/testing/harness.js";
import {
  type AttemptLease,
  acceptJob,
  claimJob,
  listen,
  type ReceivedEvent,
  SseReader,
} from "../src/testing/job-fixtures.js";
import { SeededRandom, trialSeed } from "./seeded-random.js";
import { count, runTrial, trialDialects } from "./trial.js";

const SEED = trialSeed("T12", 12);
const LINES = Number(process.env.KILN_T12_LINES ?? 5_000);
const EVENT_JOBS = Number(process.env.KILN_T12_EVENT_JOBS ?? 600);
const EVENT_WRITERS = 4;
/** Only a stalled stream hits this; it is a reconnect, not a verdict. */
const READ_PATIENCE_MS = 120_000;

/** One incarnation of the server: storage opened on the database, the app listening. */
interface Server {
  storage: Storage;
  app: FastifyInstance;
  base: string;
}

class Restartable {
  current!: Server;
  restarts = 0;
  /** Settles when the current server is listening; replaced while a restart is under way. */
  up: Promise<void> = Promise.resolve();
  constructor(
    private readonly database: TestDatabase,
    private readonly clock: ManualClock,
    private readonly blobs: LocalBlobStore,
  ) {}

  async start(): Promise<void> {
    const storage = await this.database.open();
    const app = buildApp({
      storage,
      clock: this.clock,
      version: "t12",
      publicOrigin: "http://kiln.test",
      blobs: this.blobs,
      checkResponses: true,
    });
    await app.ready();
    this.current = { storage, app, base: await listen(app) };
  }

  private restarting = false;
  private inFlight = 0;
  private drained: (() => void) | null = null;

  /**
   * Runs a write on the current storage. A restart waits for the writes under way and holds
   * new ones until the new server is up, so no write meets a closed storage (a writer of the
   * real service would retry against the new process; here the retry is this wait).
   */
  async use<T>(write: (storage: Storage) => Promise<T>): Promise<T> {
    while (this.restarting) await this.up;
    this.inFlight += 1;
    try {
      return await write(this.current.storage);
    } finally {
      this.inFlight -= 1;
      if (this.inFlight === 0) this.drained?.();
    }
  }

  /** Whether the server a client reached in `incarnation` is closing or gone. */
  closing(incarnation: number): boolean {
    return this.restarting || this.restarts !== incarnation;
  }

  /** Closes the app (its open streams end) and its storage, then opens both anew. */
  async restart(): Promise<void> {
    let done!: () => void;
    this.up = new Promise((resolve) => {
      done = resolve;
    });
    this.restarting = true;
    if (this.inFlight > 0)
      await new Promise<void>((resolve) => {
        this.drained = resolve;
      });
    this.drained = null;
    await this.stop();
    await this.start();
    this.restarts += 1;
    this.restarting = false;
    done();
  }

  async stop(): Promise<void> {
    await this.current.app.close();
    await this.current.storage.close();
  }
}

interface Counts {
  lines: number;
  logGaps: number;
  logDuplicates: number;
  wrongText: number;
  wrongIds: number;
  events: number;
  eventGaps: number;
  eventDuplicates: number;
  foreignEvents: number;
  connections: number;
  refusedWhileClosing: number;
  cutByServer: number;
  restarts: number;
  broken: string[];
}

interface LogFrame {
  job: string;
  page: { records: { sequence: number; text: string }[]; settled: boolean };
}

/**
 * Each actor draws from a generator of its own, derived from the seed, so its choices (batch
 * sizes, page limits, when to disconnect, how to resume) repeat under the same seed however the
 * machine interleaves the actors.
 */
async function trialOn(dialectName: string, database: TestDatabase, seed: number, c: Counts) {
  const actor = (n: number) => new SeededRandom(seed * 16 + n);
  const broken = (what: string) => c.broken.push(`${dialectName}: ${what}`);
  const clock = ManualClock.withRealTimers();
  const blobs = testBlobs();
  const server = new Restartable(database, clock, blobs);
  await server.start();
  try {
    const storage = () => server.current.storage;
    const owner = await personWithToken(storage(), { role: "owner", now: clock.now() });
    const stranger = await personWithToken(storage(), { role: "owner", now: clock.now() });
    const job = await acceptJob(storage(), { tenant: owner.tenant, now: clock.now() });
    const lease: AttemptLease = await claimJob(storage(), job.id, clock.now(), 86_400);
    const restartAt = actor(0).int(Math.floor(LINES / 3), Math.floor((2 * LINES) / 3));

    let restarted = false;
    const restartOnce = async () => {
      if (restarted) return;
      restarted = true;
      await server.restart();
    };

    // ---- the writers: log lines through the host protocol, events by accepting jobs.
    const writeLog = async () => {
      const random = actor(1);
      let written = 0;
      while (written < LINES) {
        const batch = Math.min(random.int(1, 40), LINES - written);
        const lines = Array.from({ length: batch }, (_, i) => ({
          stream: "stdout" as const,
          at: clock.now().toISOString(),
          text: `line ${written + i + 1}`,
        }));
        const answer = await server.use((storage) =>
          hostProtocolOf({ storage, blobs, clock }).appendLogs(lease, lines),
        );
        if (answer !== "accepted") throw new Error(`appendLogs answered ${answer}`);
        written += batch;
        if (written >= restartAt) await restartOnce();
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    let eventJobs = 0;
    const writeEvents = async () => {
      while (eventJobs < EVENT_JOBS) {
        eventJobs += 1;
        // Every fifth job is another tenant's, interleaved with the followed tenant's.
        const tenant = eventJobs % 5 === 0 ? stranger.tenant : owner.tenant;
        await server.use((storage) => acceptJob(storage, { tenant, now: clock.now() }));
        await new Promise((resolve) => setImmediate(resolve));
      }
    };

    // ---- the log reader: disconnects after a random number of frames and resumes.
    const received: { sequence: number; text: string }[] = [];
    const readLog = async () => {
      const random = actor(2);
      let last: string | null = null;
      let settledFrames = 0;
      for (;;) {
        await server.up;
        const limit = random.int(1, 60);
        const byCursor = last !== null && random.next() < 0.3;
        const query = `?limit=${limit}${byCursor ? `&cursor=${last}` : ""}`;
        const headers: Record<string, string> = { ...bearer(owner.token) };
        if (last !== null && !byCursor) headers["last-event-id"] = last;
        let reader: SseReader;
        let incarnation = 0;
        try {
          incarnation = server.restarts;
          reader = await SseReader.open(`${server.current.base}/api/jobs/${job.id}/logs/stream${query}`, headers);
        } catch {
          continue; // the server is restarting: wait for it and resume
        }
        c.connections += 1;
        if (reader.status === 503 && server.closing(incarnation)) {
          // A closing server refuses new requests (Fastify's 503 while closing): resume.
          c.refusedWhileClosing += 1;
          reader.close();
          continue;
        }
        if (reader.status !== 200) {
          broken(`resuming the log from ${last} answered ${reader.status}`);
          reader.close();
          return;
        }
        const leaveAfter = random.int(0, 5);
        try {
          for (let frames = 0; frames < leaveAfter; frames++) {
            const event: ReceivedEvent | null = await reader.next(READ_PATIENCE_MS);
            if (event === null) {
              if (settledFrames === 0) c.cutByServer += 1;
              break;
            }
            const frame = JSON.parse(event.data) as LogFrame;
            let position: number = last === null ? 0 : Number(last.slice(1));
            for (const record of frame.page.records) {
              received.push({ sequence: record.sequence, text: record.text });
              position = record.sequence;
            }
            if (event.id !== `l${position}` || frame.job !== job.id) {
              c.wrongIds += 1;
              broken(`log frame id ${event.id} after position l${position}`);
            }
            last = `l${position}`;
            if (frame.page.settled) settledFrames += 1;
          }
        } catch {
          c.cutByServer += 1; // the connection broke (the restart): resume
        } finally {
          reader.close();
        }
        if (settledFrames > 0) {
          if (settledFrames !== 1) broken(`${settledFrames} settled log frames`);
          return;
        }
      }
    };

    // ---- the event reader: the same, on cli.events from sequence 0.
    const events: { sequence: number; job: string }[] = [];
    const readEvents = async (expectedLast: () => number | null, known: Promise<void>) => {
      const random = actor(3);
      let last = "0";
      for (;;) {
        const target = expectedLast();
        if (target !== null && Number(last) >= target) return;
        await server.up;
        const headers: Record<string, string> = { ...bearer(owner.token), "last-event-id": last };
        let reader: SseReader;
        let incarnation = 0;
        try {
          incarnation = server.restarts;
          reader = await SseReader.open(`${server.current.base}/api/cli/events?after=0`, headers);
        } catch {
          continue;
        }
        c.connections += 1;
        if (reader.status === 503 && server.closing(incarnation)) {
          c.refusedWhileClosing += 1;
          reader.close();
          continue;
        }
        if (reader.status !== 200) {
          broken(`resuming events from ${last} answered ${reader.status}`);
          reader.close();
          return;
        }
        const leaveAfter = random.int(0, 12);
        try {
          for (let frames = 0; frames < leaveAfter; frames++) {
            const reached = expectedLast();
            if (reached !== null && Number(last) >= reached) break;
            // cli.events never ends: once the last event is known and delivered, stop waiting.
            const next = reader.next(READ_PATIENCE_MS);
            next.catch(() => undefined);
            const first = await Promise.race([next, known.then(() => "known" as const)]);
            if (first === "known") {
              const target = expectedLast();
              if (target !== null && Number(last) >= target) break;
            }
            const event = first === "known" ? await next : first;
            if (event === null) {
              c.cutByServer += 1; // cli.events ends only when its server stops
              break;
            }
            const data = JSON.parse(event.data) as { sequence: number; job: string };
            events.push({ sequence: data.sequence, job: data.job });
            if (event.id !== String(data.sequence)) {
              c.wrongIds += 1;
              broken(`event id ${event.id} for sequence ${data.sequence}`);
            }
            last = String(data.sequence);
          }
        } catch {
          // the connection broke (the restart) or stalled: resume
        } finally {
          reader.close();
        }
      }
    };

    let lastOwnEvent: number | null = null;
    const writersDone = (async () => {
      await Promise.all([writeLog(), ...Array.from({ length: EVENT_WRITERS }, () => writeEvents())]);
      // The job ends: its stream sends the settled page.
      const protocol = hostProtocolOf({ storage: storage(), blobs, clock });
      const result: AttemptResult = {
        outcome: "passed",
        exitCode: 0,
        failure: null,
        report: { phases: [], crates: [], tests: [], unit: null },
        cargoOutput: null,
        lineageSave: null,
        artifacts: [],
      };
      const finished = await protocol.finish(lease, result);
      if (finished !== "finished") throw new Error(`finish answered ${finished}`);
      const top = await storage()
        .db.selectFrom("job_events")
        .select((e) => e.fn.max("sequence").as("sequence"))
        .where("tenant_id", "=", owner.tenant)
        .executeTakeFirstOrThrow();
      lastOwnEvent = Number(top.sequence);
    })();
    await Promise.all([writersDone, readLog(), readEvents(() => lastOwnEvent, writersDone)]);
    c.restarts += server.restarts;

    // ---- the tally, against what the database holds.
    const seen = new Map<number, number>();
    for (const r of received) {
      seen.set(r.sequence, (seen.get(r.sequence) ?? 0) + 1);
      if (r.text !== `line ${r.sequence}`) {
        c.wrongText += 1;
        broken(`log sequence ${r.sequence} carried "${r.text.slice(0, 40)}"`);
      }
    }
    c.lines += LINES;
    for (let s = 1; s <= LINES; s++) {
      const n = seen.get(s) ?? 0;
      if (n === 0) c.logGaps += 1;
      if (n > 1) c.logDuplicates += n - 1;
    }
    if (seen.size !== LINES || [...seen.keys()].some((s) => s < 1 || s > LINES))
      broken(`the log delivered ${seen.size} distinct sequences for ${LINES} lines`);

    const own = await storage()
      .db.selectFrom("job_events")
      .select("sequence")
      .where("tenant_id", "=", owner.tenant)
      .execute();
    const ownSequences = new Set(own.map((r) => Number(r.sequence)));
    const delivered = new Map<number, number>();
    for (const e of events) {
      delivered.set(e.sequence, (delivered.get(e.sequence) ?? 0) + 1);
      if (!ownSequences.has(e.sequence)) c.foreignEvents += 1;
    }
    c.events += ownSequences.size;
    for (const s of ownSequences) {
      const n = delivered.get(s) ?? 0;
      if (n === 0) c.eventGaps += 1;
      if (n > 1) c.eventDuplicates += n - 1;
    }
    if (c.logGaps + c.logDuplicates + c.eventGaps + c.eventDuplicates + c.foreignEvents > 0)
      broken(
        `log: ${c.logGaps} gaps, ${c.logDuplicates} duplicates; events: ${c.eventGaps} gaps, ` +
          `${c.eventDuplicates} duplicates, ${c.foreignEvents} of another tenant`,
      );
    if (server.restarts !== 1) broken(`the server restarted ${server.restarts} times, expected once`);
  } finally {
    await server.stop();
  }
}

await runTrial("T12", "SSE and log resume", async () => {
  const c: Counts = {
    lines: 0,
    logGaps: 0,
    logDuplicates: 0,
    wrongText: 0,
    wrongIds: 0,
    events: 0,
    eventGaps: 0,
    eventDuplicates: 0,
    foreignEvents: 0,
    connections: 0,
    refusedWhileClosing: 0,
    cutByServer: 0,
    restarts: 0,
    broken: [],
  };
  const engines: string[] = [];
  for (const [i, dialect] of trialDialects().entries()) {
    const database = await dialect.createDatabase();
    try {
      await trialOn(dialect.name, database, SEED + i, c);
      engines.push(dialect.name);
    } finally {
      await database.dispose();
    }
  }
  return {
    figure:
      `seed ${SEED} (${engines.join(" and ")}): ${count(c.lines)} log lines and ${count(c.events)} job events ` +
      `followed over ${count(c.connections)} connections (random disconnects; ${c.restarts} server restarts, ` +
      `open streams cut by them: ${c.cutByServer}, reconnects answered 503 while closing: ${c.refusedWhileClosing}): ` +
      `log ${c.logGaps} gaps, ${c.logDuplicates} duplicates, ${c.wrongText} wrong texts; events ${c.eventGaps} gaps, ` +
      `${c.eventDuplicates} duplicates, ${c.foreignEvents} of another tenant; ${c.wrongIds} wrong ids`,
    broken: c.broken,
  };
});
