import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { type IssuedCertificateRecord, issuedCertificateOf } from "./issued-certificate-record.js";

/** What the identity inventory (operator.identities.list) is computed from. Digests, never keys. */
export interface HostIdentityRecords {
  /** Per host that was ever issued one: its newest certificate and how many of its certificates are live. */
  hosts: {
    hostId: string;
    newest: Omit<IssuedCertificateRecord, "sealedPrivateKey">;
    /** Unrevoked and unexpired at `now`. */
    live: number;
    revoked: number;
  }[];
  /** Host-listener certificates unrevoked and unexpired at `now`, the newest per set of names. */
  listeners: Omit<IssuedCertificateRecord, "sealedPrivateKey">[];
  /** Enrollment tokens neither redeemed nor expired at `now`, with their digests. */
  outstandingEnrollments: {
    hostId: string;
    tokenHash: string;
    createdBy: string;
    createdAt: string;
    expiresAt: string;
  }[];
}

const withoutKey = ({ sealedPrivateKey: _, ...rest }: IssuedCertificateRecord) => rest;

export async function listHostIdentityRecords(
  target: StorageOrTransaction,
  input: { now: Date },
): Promise<HostIdentityRecords> {
  const db = executorOf(target);
  const now = formatTimestamp(input.now);
  // One read of every issued certificate: a deployment has a handful per host (one per renewal
  // in the short lifetime), and the inventory is an operator's occasional read.
  const rows = (
    await db.selectFrom("issued_certificates").selectAll().orderBy("issued_at").orderBy("serial").execute()
  ).map(issuedCertificateOf);
  const hosts = new Map<string, HostIdentityRecords["hosts"][number]>();
  const listeners = new Map<string, IssuedCertificateRecord>();
  for (const row of rows) {
    const live = row.revokedAt === null && row.notAfter > now;
    if (row.role === "listener") {
      if (live) listeners.set(JSON.stringify(row.names), row);
      continue;
    }
    if (row.hostId === null) continue;
    const seen = hosts.get(row.hostId);
    hosts.set(row.hostId, {
      hostId: row.hostId,
      newest: withoutKey(row),
      live: (seen?.live ?? 0) + (live ? 1 : 0),
      revoked: (seen?.revoked ?? 0) + (row.revokedAt === null ? 0 : 1),
    });
  }
  const tokens = await db
    .selectFrom("host_enrollment_tokens")
    .select(["host_id", "token_hash", "created_by", "created_at", "expires_at"])
    .where("redeemed_at", "is", null)
    .where("expires_at", ">", now)
    .orderBy("host_id")
    .orderBy("created_at")
    .execute();
  return {
    hosts: [...hosts.values()].sort((a, b) => (a.hostId < b.hostId ? -1 : a.hostId > b.hostId ? 1 : 0)),
    listeners: [...listeners.values()].map(withoutKey),
    outstandingEnrollments: tokens.map((t) => ({
      hostId: t.host_id,
      tokenHash: t.token_hash,
      createdBy: t.created_by,
      createdAt: t.created_at,
      expiresAt: t.expires_at,
    })),
  };
}
