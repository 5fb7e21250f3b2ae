import type { Kysely, Migration } from "kysely";

/**
 * `hosts.isolation_reason`: why a host serves with the isolation it enrolled with (issue 35) —
 * `KILN_EXECUTOR` and, for `auto`, what its KVM probe found ("KVM did not boot the probe guest
 * within 5 s; serving with the sandbox"). Written at each enrollment, shown by operator.hosts.get;
 * null for hosts that enrolled before it was reported.
 */
export function hostIsolationReason(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("hosts").addColumn("isolation_reason", "text").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("hosts").dropColumn("isolation_reason").execute();
    },
  };
}
