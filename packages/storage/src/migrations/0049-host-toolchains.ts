import type { Kysely, Migration } from "kysely";

/**
 * `hosts.toolchains`: the toolchain names a host admits (JSON array of strings), as it
 * advertised them at its latest enrollment (issue 36): jobs.submit refuses a toolchain no host
 * advertises, at submission instead of after placement. Null for a host that advertised none
 * (enrolled before, or whose toolchains are resolved another way): admission then does not judge.
 */
export function hostToolchains(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("hosts").addColumn("toolchains", "text").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("hosts").dropColumn("toolchains").execute();
    },
  };
}
