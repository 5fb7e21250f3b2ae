import { messageOf } from "@kiln/contract";
import { type BlobStore, readMigrationState, type Storage } from "@kiln/storage";
import { ESCALATION_SECONDS, operatingState } from "./operating-state.js";

/**
 * Management readiness from three cheap probes, each a measurement rather than an assumption:
 * the database answers (one indexed read of the migration table), its schema is at the newest
 * migration this build carries, and the blob store is writable by this process (its own
 * probe, without a write: access(2) on a directory, HeadBucket on a bucket; the probe runs on
 * every states read and must stay cheap).
 */
export async function managementReadiness(deps: { storage: Storage; blobs: BlobStore }, now: Date) {
  const refusing = new Date(now.getTime() + ESCALATION_SECONDS * 1000);
  let migrations: Awaited<ReturnType<typeof readMigrationState>>;
  try {
    migrations = await readMigrationState(deps.storage);
  } catch (error) {
    return operatingState("management_readiness", {
      now,
      code: "database_unreachable",
      detail: `the ${deps.storage.dialect} database did not answer: ${messageOf(error)}`,
      refusingUntil: refusing,
    });
  }
  if (migrations.applied !== migrations.expected) {
    return operatingState("management_readiness", {
      now,
      code: "migrations_pending",
      detail: `the database is at migration ${migrations.applied ?? "none"}; this build needs ${migrations.expected}`,
      refusingUntil: refusing,
    });
  }
  try {
    await deps.blobs.probeWritable();
  } catch (error) {
    return operatingState("management_readiness", {
      now,
      code: "blob_store_unwritable",
      detail: `the blob store at ${deps.blobs.location} is not writable: ${messageOf(error)}`,
      refusingUntil: refusing,
    });
  }
  return operatingState("management_readiness", {
    now,
    code: "ready",
    detail: `${deps.storage.dialect} database answers at migration ${migrations.applied}; blob store writable`,
    refusingUntil: null,
  });
}
