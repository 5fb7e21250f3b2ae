import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * The toolchain names hosts advertised at enrollment, over every enrolled host that advertised
 * any (`hosts` counts them; 0 when none did, and then nothing is known).
 */
export async function advertisedToolchains(
  target: StorageOrTransaction,
): Promise<{ hosts: number; names: ReadonlySet<string> }> {
  const rows = await executorOf(target)
    .selectFrom("hosts")
    .select("toolchains")
    .where("toolchains", "is not", null)
    .execute();
  const names = new Set<string>();
  for (const row of rows) for (const name of JSON.parse(row.toolchains ?? "[]") as string[]) names.add(name);
  return { hosts: rows.length, names };
}
