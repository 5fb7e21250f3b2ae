/**
 * The storage layer never reads the wall clock itself: every verb that stamps a row takes a
 * `Clock` (or an explicit `now`), so tests can move time forward without sleeping and several
 * server processes agree on what "now" means only through the values they write. Storage only
 * reads the time; the runtime clock (contract's `Clock`, which also owns timers) satisfies this.
 */
export interface Clock {
  now(): Date;
}

export { systemClock } from "@kiln/contract";
