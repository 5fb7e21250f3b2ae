import type { Storage } from "../dialect.js";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** The control plane's CA as stored: its certificate and its private key sealed under the master key. */
export interface CertificateAuthorityRecord {
  readonly certificatePem: string;
  readonly certificateSha256: string;
  readonly sealedPrivateKey: string;
  readonly createdAt: string;
}

/** The one CA of a deployment (there is no rotation yet, so its id is fixed). */
const CA_ID = "host-ca";

/** The CA, or undefined before any server needed one. */
export async function readCertificateAuthority(
  target: StorageOrTransaction,
): Promise<CertificateAuthorityRecord | undefined> {
  const row = await executorOf(target)
    .selectFrom("certificate_authorities")
    .selectAll()
    .where("id", "=", CA_ID)
    .executeTakeFirst();
  return row === undefined
    ? undefined
    : {
        certificatePem: row.certificate_pem,
        certificateSha256: row.certificate_sha256,
        sealedPrivateKey: row.sealed_private_key,
        createdAt: row.created_at,
      };
}

/**
 * The deployment's CA: the stored one, else `candidate` stored as it. Two servers making their
 * first CA at once both insert with ON CONFLICT DO NOTHING and read back the row that won, so
 * every server of a deployment issues and verifies with one CA.
 */
export async function ensureCertificateAuthority(
  storage: Storage,
  input: { candidate: Omit<CertificateAuthorityRecord, "createdAt">; now: Date },
): Promise<CertificateAuthorityRecord> {
  const existing = await readCertificateAuthority(storage);
  if (existing !== undefined) return existing;
  await storage.db
    .insertInto("certificate_authorities")
    .values({
      id: CA_ID,
      certificate_pem: input.candidate.certificatePem,
      certificate_sha256: input.candidate.certificateSha256,
      sealed_private_key: input.candidate.sealedPrivateKey,
      created_at: formatTimestamp(input.now),
    })
    .onConflict((conflict) => conflict.column("id").doNothing())
    .execute();
  const stored = await readCertificateAuthority(storage);
  if (stored === undefined) throw new Error("the certificate authority was inserted but cannot be read back");
  return stored;
}
