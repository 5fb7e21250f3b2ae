import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type IssuedCertificateRecord, issuedCertificateOf } from "./issued-certificate-record.js";

/** The certificate the CA issued under `serial` (upper-case hex), or undefined: one it never issued. */
export async function findIssuedCertificate(
  target: StorageOrTransaction,
  serial: string,
): Promise<IssuedCertificateRecord | undefined> {
  const row = await executorOf(target)
    .selectFrom("issued_certificates")
    .selectAll()
    .where("serial", "=", serial)
    .executeTakeFirst();
  return row === undefined ? undefined : issuedCertificateOf(row);
}
