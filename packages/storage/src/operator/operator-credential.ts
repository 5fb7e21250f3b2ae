import { randomBytes } from "node:crypto";
import type { Selectable } from "kysely";
import { executorOf, inTransaction, type StorageOrTransaction } from "../executor.js";
import type { OperatorCredentialsTable } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export type OperatorCredentialRow = Selectable<OperatorCredentialsTable>;

/** The operator bootstrap credential in force, if one was ever set. */
export async function findCurrentOperatorCredential(
  target: StorageOrTransaction,
): Promise<OperatorCredentialRow | undefined> {
  return executorOf(target)
    .selectFrom("operator_credentials")
    .selectAll()
    .where("retired_at", "is", null)
    .executeTakeFirst();
}

/** Retires the credential in force (if any) and sets a new one, atomically. */
export async function replaceOperatorCredential(
  target: StorageOrTransaction,
  input: { credentialHash: string; credentialCiphertext: string },
  at: Date,
): Promise<void> {
  const now = formatTimestamp(at);
  await inTransaction(target, async (db) => {
    await db.updateTable("operator_credentials").set({ retired_at: now }).where("retired_at", "is", null).execute();
    await db
      .insertInto("operator_credentials")
      .values({
        id: `opc_${randomBytes(8).toString("hex")}`,
        credential_hash: input.credentialHash,
        credential_ciphertext: input.credentialCiphertext,
        created_at: now,
        retired_at: null,
      })
      .execute();
  });
}
