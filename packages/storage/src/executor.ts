import { Kysely } from "kysely";
import type { Storage } from "./dialect.js";
import type { Database } from "./schema.js";

/**
 * What a verb runs against: the `Storage` itself (each statement commits on its own) or a
 * transaction the caller opened, so a verb can join a larger unit of work — e.g. completing an
 * idempotency receipt in the same transaction as the effect it records.
 */
export type StorageOrTransaction = Storage | Kysely<Database>;

export function executorOf(target: StorageOrTransaction): Kysely<Database> {
  return target instanceof Kysely ? target : target.db;
}

/**
 * Runs `fn` atomically: inside the caller's transaction when given one, otherwise in a new one.
 * (Kysely has no nested transactions; joining the outer one is what the caller means.)
 */
export function inTransaction<T>(target: StorageOrTransaction, fn: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  if (target instanceof Kysely) {
    return target.isTransaction ? fn(target) : target.transaction().execute(fn);
  }
  return target.transaction(fn);
}

/** A database handle a handler writes through: the storage's own, or a transaction. */
export type Db = Kysely<Database>;
