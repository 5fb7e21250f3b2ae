import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import {
  type IssuedCertificateInput,
  type IssuedCertificateRecord,
  issuedCertificateOf,
  issuedCertificateRow,
} from "./issued-certificate-record.js";

/**
 * The newest unrevoked host-listener certificate for exactly these names that is still valid at
 * `now`, or undefined. Servers of one deployment configured with the same names share it.
 */
export async function findListenerCertificate(
  target: StorageOrTransaction,
  input: { names: readonly string[]; now: Date },
): Promise<IssuedCertificateRecord | undefined> {
  const row = await executorOf(target)
    .selectFrom("issued_certificates")
    .selectAll()
    .where("role", "=", "listener")
    .where("names", "=", JSON.stringify(input.names))
    .where("revoked_at", "is", null)
    .where("not_after", ">", formatTimestamp(input.now))
    .orderBy("issued_at", "desc")
    .orderBy("serial", "desc")
    .limit(1)
    .executeTakeFirst();
  return row === undefined ? undefined : issuedCertificateOf(row);
}

/** Records a certificate the CA issued outside an enrollment or a renewal (a host listener's). */
export async function recordIssuedCertificate(
  target: StorageOrTransaction,
  input: { certificate: IssuedCertificateInput; now: Date },
): Promise<void> {
  await executorOf(target)
    .insertInto("issued_certificates")
    .values(issuedCertificateRow(input.certificate, formatTimestamp(input.now)))
    .execute();
}
