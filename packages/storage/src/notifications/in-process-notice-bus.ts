import { resolve } from "node:path";

type Listener = (channel: string, payload: string) => void;

/**
 * SQLite's notices: a SQLite database tells no process about another's commits, so notices
 * travel only inside the process that committed them, on one bus per database file (two
 * `Storage`s on one file in one process — tests, the admin CLI beside a server — share it).
 * kiln runs one server process on SQLite; waiters keep a slow poll for writes from elsewhere.
 */
const buses = new Map<string, Set<Listener>>();

function keyOf(file: string): string {
  return resolve(file);
}

/** Delivers each notice to every listener on `file`'s bus, after the current turn (never inside a commit). */
export function publishNotices(file: string, notices: readonly { channel: string; payload: string }[]): void {
  const listeners = buses.get(keyOf(file));
  if (listeners === undefined || notices.length === 0) return;
  queueMicrotask(() => {
    for (const { channel, payload } of notices) for (const listener of [...listeners]) listener(channel, payload);
  });
}

/** Listens on `file`'s bus; returns the unsubscribe. */
export function listenOnBus(file: string, listener: Listener): () => void {
  const key = keyOf(file);
  let listeners = buses.get(key);
  if (listeners === undefined) {
    listeners = new Set();
    buses.set(key, listeners);
  }
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) buses.delete(key);
  };
}
