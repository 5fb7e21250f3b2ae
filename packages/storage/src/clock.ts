/**
 * The storage layer never reads the wall clock itself: every verb that stamps a row takes a
 * `Clock` (or an explicit `now`), so tests can move time forward without sleeping and several
 * server processes agree on what "now" means only through the values they write.
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = {
  now: () => new Date(),
};
