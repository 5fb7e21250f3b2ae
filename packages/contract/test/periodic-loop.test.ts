import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Logger, type LoopFailure, startPeriodicLoop } from "../src/index.js";
import { ManualClock } from "../src/testing/index.js";

/** A logger that keeps what it was told. */
function recordingLogger(): Logger & { lines: { level: string; message: string }[] } {
  const lines: { level: string; message: string }[] = [];
  return {
    lines,
    error: (_details, message) => lines.push({ level: "error", message }),
    warn: (_details, message) => lines.push({ level: "warn", message }),
    info: (_details, message) => lines.push({ level: "info", message }),
  };
}

describe("ManualClock", () => {
  it("runs timers in the order they fall due, each at its own instant, and nothing beyond the span", async () => {
    const clock = new ManualClock("2026-11-24T00:00:00.000Z");
    const seen: string[] = [];
    clock.after(300, () => seen.push(`b@${clock.now().toISOString()}`));
    clock.after(100, () => {
      seen.push(`a@${clock.now().toISOString()}`);
      clock.after(100, () => seen.push(`a2@${clock.now().toISOString()}`));
    });
    const late = clock.after(1000, () => seen.push("late"));
    await clock.advance(500);
    assert.deepEqual(seen, ["a@2026-11-24T00:00:00.100Z", "a2@2026-11-24T00:00:00.200Z", "b@2026-11-24T00:00:00.300Z"]);
    assert.equal(clock.now().toISOString(), "2026-11-24T00:00:00.500Z");
    late.cancel();
    await clock.advance(1000);
    assert.equal(seen.includes("late"), false, "a cancelled timer never runs");
    assert.equal(clock.pending, 0);
  });

  it("sleep resolves when time passes and rejects at once when its signal aborts", async () => {
    const clock = new ManualClock();
    let slept = false;
    const sleeping = clock.sleep(1000).then(() => {
      slept = true;
    });
    await clock.advance(999);
    assert.equal(slept, false);
    await clock.advance(1);
    await sleeping;
    assert.equal(slept, true);
    const abort = new AbortController();
    const aborted = clock.sleep(60_000, abort.signal);
    abort.abort(new Error("cancelled"));
    await assert.rejects(aborted, /cancelled/);
    assert.equal(clock.pending, 0, "the aborted sleep's timer is gone");
  });
});

describe("startPeriodicLoop", () => {
  it("runs on the clock, logs and emits every failed run with the loop's name, and keeps running", async () => {
    const clock = new ManualClock();
    const log = recordingLogger();
    const failures: LoopFailure[] = [];
    let runs = 0;
    const loop = startPeriodicLoop({
      name: "lease reaper",
      clock,
      everyMs: 1000,
      log,
      onFailure: (failure) => failures.push(failure),
      run: async () => {
        runs += 1;
        if (runs === 2) throw new Error("database is locked");
      },
    });
    await clock.advance(999);
    assert.equal(runs, 0);
    await clock.advance(3001);
    assert.equal(runs, 4, "the failed second run did not stop the loop");
    assert.equal(failures.length, 1);
    assert.equal(failures[0]?.loop, "lease reaper");
    assert.match(String(failures[0]?.error), /database is locked/);
    assert.deepEqual(log.lines, [{ level: "error", message: "lease reaper: database is locked" }]);
    await loop.stop();
    await clock.advance(10_000);
    assert.equal(runs, 4, "nothing runs after stop");
  });

  it("a nudge runs the body at once, and never two runs at a time", async () => {
    const clock = new ManualClock();
    let running = 0;
    let most = 0;
    let release: () => void = () => {};
    const loop = startPeriodicLoop({
      name: "sweeper",
      clock,
      everyMs: 60_000,
      log: recordingLogger(),
      run: async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        running -= 1;
      },
    });
    loop.nudge();
    loop.nudge();
    assert.equal(running, 1);
    release();
    await loop.stop();
    assert.equal(most, 1);
  });
});
