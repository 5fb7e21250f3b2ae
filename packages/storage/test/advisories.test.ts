import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  createTenant,
  dismissAdvisory,
  insertJob,
  listDismissals,
  listRecentAttemptReports,
  onboardRepository,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-22T07:00:00.000Z") };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 22, 8, minute)).toISOString();

for (const dialect of DIALECTS) {
  describe(`advisory dismissals and their basis [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;

    /** A job of `repository` accepted at `minute` with finished attempts (reports `r<minute>.<n>`). */
    async function job(repository: string, minute: number, attempts: ("finished" | "lost" | "running")[]) {
      const id = `job-${repository.replace("/", "-")}-${minute}`;
      await insertJob(storage, {
        id,
        tenant_id: repository.startsWith("globex/") ? "globex" : "acme",
        repository,
        branch: "main",
        base_commit: "0".repeat(40),
        head_sha: null,
        size: "kiln2-cpu",
        class: "build/dev/stable",
        description: "",
        status: "passed",
        submitted_by: "test",
        submission_key: id,
        request_hash: "h",
        invocation: '{"operation":"build","arguments":[]}',
        source_manifest: "[]",
        wall_clock_seconds: 600,
        max_attempts: 3,
        attempts_started: attempts.length,
        accepted_at: at(minute),
        queued_at: at(minute),
      });
      for (const [i, state] of attempts.entries()) {
        await storage.db
          .insertInto("attempts")
          .values({
            job_id: id,
            number: i + 1,
            host_id: "local",
            vcpus: 2,
            lease_token: "t",
            lease_expires_at: at(minute + 1),
            state,
            started_at: at(minute),
            finished_at: state === "finished" ? at(minute + 1) : null,
            outcome: state === "finished" ? "passed" : null,
            exit_code: 0,
            report: state === "finished" ? JSON.stringify({ mark: `r${minute}.${i + 1}` }) : null,
          })
          .execute();
      }
    }

    before(async () => {
      storage = await dialect.openFresh();
      await createTenant(storage, { id: "acme" }, clock.now());
      await createTenant(storage, { id: "globex" }, clock.now());
      for (const name of ["acme/a", "acme/b", "acme/quiet"]) {
        await onboardRepository(storage, { tenantId: "acme", name, onboardedBy: "test" }, clock.now());
      }
      await onboardRepository(storage, { tenantId: "globex", name: "globex/a", onboardedBy: "test" }, clock.now());
    });
    after(async () => {
      await storage?.close();
    });

    it("reads the most recent finished attempts of each repository, bounded per repository", async () => {
      for (let minute = 0; minute < 6; minute++) await job("acme/a", minute, ["finished"]);
      await job("acme/a", 10, ["lost", "finished"]);
      await job("acme/a", 11, ["running"]);
      await job("acme/b", 3, ["finished"]);
      await job("globex/a", 20, ["finished"]);

      const rows = await listRecentAttemptReports(storage, {
        tenantId: "acme",
        repositories: ["acme/a", "acme/b", "acme/quiet"],
        perRepository: 3,
      });
      assert.deepEqual(
        rows.map((r) => [r.repository, JSON.parse(r.report).mark, r.attempt]),
        [
          ["acme/a", "r10.2", 2],
          ["acme/a", "r5.1", 1],
          ["acme/a", "r4.1", 1],
          ["acme/b", "r3.1", 1],
        ],
      );
      assert.equal(rows[0]?.class, "build/dev/stable");
      assert.equal(rows[0]?.size, "kiln2-cpu");
      assert.deepEqual(
        await listRecentAttemptReports(storage, { tenantId: "acme", repositories: [], perRepository: 3 }),
        [],
      );
      const other = await listRecentAttemptReports(storage, {
        tenantId: "globex",
        repositories: ["acme/a", "globex/a"],
        perRepository: 20,
      });
      assert.deepEqual(
        other.map((r) => r.repository),
        ["globex/a"],
        "another tenant's attempts are never read",
      );
    });

    it("remembers the first dismissal of an advisory and who made it", async () => {
      const first = await dismissAdvisory(storage, {
        tenantId: "acme",
        repository: "acme/a",
        advisory: "adv-1",
        dismissedBy: "usr_ann",
        now: new Date(at(30)),
      });
      assert.deepEqual(first, {
        created: true,
        dismissal: { advisory: "adv-1", dismissedBy: "usr_ann", dismissedAt: at(30) },
      });
      const again = await dismissAdvisory(storage, {
        tenantId: "acme",
        repository: "acme/a",
        advisory: "adv-1",
        dismissedBy: "usr_bob",
        now: new Date(at(31)),
      });
      assert.deepEqual(again, { created: false, dismissal: first.dismissal });
      // The same id under another repository or tenant is another dismissal.
      await dismissAdvisory(storage, {
        tenantId: "acme",
        repository: "acme/b",
        advisory: "adv-2",
        dismissedBy: "usr_bob",
        now: new Date(at(32)),
      });
      await dismissAdvisory(storage, {
        tenantId: "globex",
        repository: "globex/a",
        advisory: "adv-1",
        dismissedBy: "usr_eve",
        now: new Date(at(33)),
      });

      const found = await listDismissals(storage, {
        tenantId: "acme",
        advisories: [
          { repository: "acme/a", advisory: "adv-1" },
          { repository: "acme/a", advisory: "adv-2" },
          { repository: "acme/b", advisory: "adv-2" },
          { repository: "acme/b", advisory: "adv-1" },
        ],
      });
      assert.deepEqual(
        [...found]
          .map(([repository, of]) => [repository, [...of.values()].map((d) => [d.advisory, d.dismissedBy])])
          .sort(),
        [
          ["acme/a", [["adv-1", "usr_ann"]]],
          ["acme/b", [["adv-2", "usr_bob"]]],
        ],
      );
      assert.equal((await listDismissals(storage, { tenantId: "acme", advisories: [] })).size, 0);
    });
  });
}
