import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { drainHost, openStorage, type Storage, undrainHost, writeTenantControls } from "@kiln/storage";
import { createPostgresTestDatabase, DIALECTS } from "@kiln/storage/testing";
import { crate, type Doc, explainJob, fetchApi, Jobs, processesCarrying } from "../src/testing/e2e-jobs.js";
import { tenantWithRepository } from "../src/testing/harness.js";
import { type ServerProcess, startServerProcess, stopServerProcess } from "./server-process.js";

/**
 * A build script that holds its job running until the test lets it go: it waits for a shell
 * whose command line carries `<KILN_MARKER>-hold` (a `sleep` the test never waits out), and the
 * test ends that shell by its pid. Then the crate builds and its test passes.
 */
const HOLDING_BUILD_SCRIPT = `use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let marker = std::env::var("KILN_MARKER").expect("KILN_MARKER");
    // "; exit 0" keeps sh from exec'ing sleep, so the marked command line stays this process's.
    // No inherited output: the sleep outlives the shell the test ends, and must not keep cargo
    // waiting on the build script's pipes (the attempt's end kills it).
    let _ = Command::new("sh")
        .args(["-c", "sleep 3600; exit 0", &format!("{marker}-hold")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
`;

/** Long enough for a first cargo build on a loaded machine; only bounds a failing run. */
const PATIENCE_MS = 15 * 60_000;

const postgres = DIALECTS.find((d) => d.name === "postgres");
if (postgres?.skip) process.stdout.write(`# concurrency across two server processes skipped: ${postgres.skip}\n`);

/**
 * Issue 16's must-show "concurrency 1 for a tenant: of three submitted jobs, one runs and two wait
 * with a queue annotation, and they run in order — also with two server processes on one
 * PostgreSQL": two real `kiln-server serve` processes, each with its own local host (its own
 * scheduler claiming from the shared database) on a real sandbox with real cargo, share one
 * PostgreSQL database and one blob directory. The three jobs are submitted through both
 * processes. Each holds its build until the test releases it, so every observation is of a
 * settled state, never a race against the clock: at every observation (through either process)
 * at most one of the tenant's jobs runs, the waiting ones carry the annotation naming the
 * concurrency limit, and they start in submission order.
 */
describe("concurrency 1 across two kiln-server processes on one PostgreSQL (real hosts, real cargo)", {
  skip: postgres?.skip ?? "no PostgreSQL dialect",
}, () => {
  const base = `kiln-two-proc-${randomBytes(6).toString("hex")}`;
  const dirs: string[] = [];
  let db: { url: string; drop(): Promise<void> };
  let storage: Storage;
  let tenant: string;
  let token: string;
  const servers: ServerProcess[] = [];

  before(async () => {
    db = await createPostgresTestDatabase();
    storage = await openStorage({ databaseUrl: db.url, dataDir: "/nonexistent" });
    // The tenant exists before the servers start, so neither makes a first-start tenant.
    const member = await tenantWithRepository(storage, { role: "member", now: new Date() });
    tenant = member.tenant;
    token = member.token;
    assert.equal(
      (
        await writeTenantControls(storage, {
          tenantId: tenant,
          expectedVersion: 0,
          changes: { maxRunningJobs: 1 },
          changedBy: "test",
          now: new Date(),
        })
      ).kind,
      "written",
    );
    // Each process has a data dir (work root, lineages, crate cache) of its own; the blobs a
    // submission stored through one must be readable by the other's host, so they share one.
    const blobs = mkdtempSync(join(tmpdir(), "kiln-two-proc-blobs-"));
    dirs.push(blobs);
    const masterKey = randomBytes(32).toString("hex");
    for (const name of ["a", "b"]) {
      const dataDir = mkdtempSync(join(tmpdir(), `kiln-two-proc-${name}-`));
      dirs.push(dataDir);
      symlinkSync(blobs, join(dataDir, "blobs"));
      servers.push(
        await startServerProcess({
          KILN_DATABASE_URL: db.url,
          KILN_DATA_DIR: dataDir,
          KILN_PUBLIC_URL: undefined,
          KILN_LOCAL_HOST: undefined,
          KILN_LOCAL_HOST_ID: `${base}-host-${name}`,
          KILN_MASTER_KEY: masterKey,
        }),
      );
    }
  });
  after(async () => {
    // A held build the test did not release (it failed half-way) would hold a graceful stop.
    for (const p of await processesCarrying(`${base}-`)) {
      if (p.cmdline.includes("-hold")) process.kill(p.pid, "SIGKILL");
    }
    for (const s of servers) await stopServerProcess(s);
    await storage?.close();
    await db?.drop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("of three jobs submitted through both processes one runs, two wait annotated, and they run in submission order", async (t) => {
    const [a, b] = servers;
    assert.ok(a !== undefined && b !== undefined);
    const through = [new Jobs(fetchApi(a.url, token)), new Jobs(fetchApi(b.url, token))] as const;
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      const jobs = through[(n - 1) % 2] as Jobs;
      ids.push(
        await jobs.submit(
          crate(`held${n}`, {
            "build.rs": HOLDING_BUILD_SCRIPT,
            "src/lib.rs": `pub fn n() -> u32 { ${n} }\n\n#[test]\nfn holds() {\n    assert_eq!(n(), ${n});\n}\n`,
          }),
          `${base}-submit-${n}`,
          { environment: { KILN_MARKER: `${base}-${n}` } },
        ),
      );
      // Submission order is queue order (queued_at, then id): the next is queued at a later instant.
      const queuedAt = Date.parse((await jobs.get(ids[n - 1] as string)).queued_at);
      while (Date.now() <= queuedAt) await sleep(1);
    }

    let observations = 0;
    /** The three jobs as one process or the other reports them now; asserts at most one runs. */
    const observe = async (): Promise<Doc[]> => {
      const jobs = through[observations % 2] as Jobs;
      observations += 1;
      const seen: Doc[] = [];
      for (const id of ids) seen.push(await jobs.get(id));
      const running = seen.filter((j) => j.status === "running" || j.status === "cancellation_requested");
      assert.ok(
        running.length <= 1,
        `observation ${observations}: ${running.length} of the tenant's jobs run at once: ${JSON.stringify(seen.map((j) => [j.id, j.status]))}`,
      );
      return seen;
    };
    const byTest = { actor: "test", action: "test.alternate-hosts", reason: "the next job goes to the other process" };
    /** The host job `id`'s attempt was placed on. */
    const hostOf = async (id: string) =>
      (
        await storage.db
          .selectFrom("attempts")
          .select("host_id")
          .where("job_id", "=", id)
          .where("number", "=", 1)
          .executeTakeFirstOrThrow()
      ).host_id;
    let previousHost: string | null = null;
    const holding = async (n: number) =>
      (await processesCarrying(`${base}-${n}-hold`)).filter((p) => p.cmdline.includes(`${base}-${n}-hold`));

    for (const k of [0, 1, 2]) {
      const id = ids[k] as string;
      // Until job k's build holds, every observation still sees at most one running.
      const deadline = Date.now() + PATIENCE_MS;
      let held = await holding(k + 1);
      while (held.length === 0) {
        const seen = await observe();
        if (Date.now() > deadline) {
          throw new Error(
            `job ${k + 1}'s build never held: ${JSON.stringify(seen.map((j) => [j.id, j.status, j.queue_annotation]))}\n${await explainJob(through[0], id)}\n${a.output()}\n${b.output()}`,
          );
        }
        await sleep(250);
        held = await holding(k + 1);
      }
      const seen = await observe();
      assert.deepEqual(
        seen.map((j) => j.status),
        ids.map((_, i) => (i < k ? "passed" : i === k ? "running" : "queued")),
        `with job ${k + 1} holding: ${JSON.stringify(seen.map((j) => [j.id, j.status]))}`,
      );
      assert.equal(seen[k].queue_annotation, null, "the running job's annotation was cleared at placement");
      for (const waiting of seen.slice(k + 1)) {
        assert.match(
          waiting.queue_annotation ?? "",
          new RegExp(`^waiting: tenant ${tenant} is at its concurrency limit \\(1 running of 1\\)`),
          `job ${waiting.id} waits without saying why`,
        );
      }

      // The next job must go to the other process's host: this one is drained (its running
      // attempt goes on), the other returned to service. The other host is idle and claiming
      // all the while, so only the tenant's limit keeps the next job queued until this one ends.
      const placedOn = await hostOf(id);
      assert.notEqual(placedOn, previousHost, `job ${k + 1} went to the host left serving`);
      previousHost = placedOn;
      if (k < 2) {
        const other = [`${base}-host-a`, `${base}-host-b`].find((h) => h !== placedOn) as string;
        const drained = await drainHost(storage.db, { ...byTest, hostId: placedOn, now: new Date() });
        assert.equal(drained.kind, "changed", JSON.stringify(drained));
        const revision = await storage.db
          .selectFrom("hosts")
          .select(["state", "revision"])
          .where("id", "=", other)
          .executeTakeFirstOrThrow();
        if (revision.state === "draining") {
          const back = await undrainHost(storage.db, {
            ...byTest,
            hostId: other,
            expectedRevision: Number(revision.revision),
            now: new Date(),
          });
          assert.equal(back.kind, "changed", JSON.stringify(back));
        }
      }

      // Released: the build goes on, the job passes, and only then may the next one start.
      for (const p of held) process.kill(p.pid, "SIGKILL");
      for (;;) {
        const now = await observe();
        if (now[k].status === "passed") break;
        assert.equal(
          now[k].status,
          "running",
          `job ${k + 1} ended ${now[k].status}: ${await explainJob(through[0], id)}`,
        );
        if (Date.now() > deadline) throw new Error(`job ${k + 1} did not pass after its release`);
        await sleep(250);
      }
    }
    // One attempt each, started in submission order, on the two processes' hosts in turn.
    const attempts = await storage.db
      .selectFrom("attempts")
      .select(["job_id", "number", "host_id"])
      .where("job_id", "in", ids)
      .orderBy("started_at")
      .execute();
    assert.deepEqual(
      attempts.map((x) => [x.job_id, x.number]),
      ids.map((id) => [id, 1]),
    );
    const [first, second, third] = attempts.map((x) => x.host_id);
    assert.ok(first !== second && third === first, `placed on ${first}, ${second}, ${third}`);
    t.diagnostic(
      `placed on ${attempts.map((x) => x.host_id).join(", ")}; ${observations} observations through both processes`,
    );
  });
});
