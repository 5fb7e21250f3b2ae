#!/usr/bin/env node
// What one PostgreSQL test database costs the cluster (issue 39): the CPU the throwaway cluster's
// processes spend per test that takes a migrated database, opens a storage on it, reads a row
// and is done with it, measured from the cluster's process tree (/proc). Two ways in the same
// run, on the same cluster, interleaved round by round, each a copy of the migrated template
// (`CREATE DATABASE … TEMPLATE`, FILE_COPY) dropped after (`DROP DATABASE … WITH (FORCE)`):
//   - a session per statement: both statements each on a new session, as the tests did before
//     packages/storage/src/testing/cluster-session.ts (the baseline);
//   - the testing module's own path (`openFresh`, then `close`): both on the one session the
//     process keeps to the cluster.
// The storage's own open (its pool's sessions, the migrations check) is in both.
//
//   npm run build && node bench/test-databases.mjs [--runs N]
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { processTreeTicks } from "../scripts/machine-cpu.mjs";
import { startThrowawayCluster } from "../scripts/postgres-cluster.mjs";
import { requireBuilt, root } from "./support/built-packages.mjs";
import { describeMachine } from "./support/machine.mjs";
import { positiveIntegerOption } from "./support/options.mjs";
import { fmt, log, table } from "./support/output.mjs";
import { median } from "./support/statistics.mjs";

/** A built file of packages/storage. */
const dist = (path) => join(root, "packages", "storage", "dist", path);
requireBuilt(dist("src/testing/index.js"));
const RUNS = positiveIntegerOption("runs", "5");
/** Test databases per way per round. */
const PER_ROUND = 20;

const cluster = await startThrowawayCluster();
process.env.KILN_TEST_POSTGRES_URL = cluster.url;
try {
  const { DIALECTS } = await import(dist("src/testing/index.js"));
  const { postgresTemplate } = await import(dist("src/testing/migration-templates.js"));
  const { openStorage } = await import(dist("src/open-storage.js"));
  const { default: pg } = await import("pg");
  const { sql } = await import("kysely");
  const postgres = DIALECTS.find((dialect) => dialect.name === "postgres");
  const postmaster = Number(readFileSync(join(cluster.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  const clusterCpuMs = () => processTreeTicks(postmaster) * 10;
  const readRow = (storage) => sql`select count(*) from jobs`.execute(storage.db);
  const administer = async (statement) => {
    const session = new pg.Client({ connectionString: cluster.url });
    await session.connect();
    try {
      await session.query(statement);
    } finally {
      await session.end();
    }
  };
  const template = await postgresTemplate(cluster.url);

  const ways = {
    sessionPerStatement: async () => {
      const name = `kiln_bench_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
      await administer(`create database ${name} template ${template} strategy = file_copy`);
      const url = new URL(cluster.url);
      url.pathname = `/${name}`;
      const storage = await openStorage({ databaseUrl: url.toString(), dataDir: "/nonexistent" });
      await readRow(storage);
      await storage.close();
      await administer(`drop database ${name} with (force)`);
    },
    oneSession: async () => {
      const storage = await postgres.openFresh();
      await readRow(storage);
      await storage.close();
    },
  };
  // One of each first: the template is built, and the testing module opens its session.
  for (const way of Object.values(ways)) await way();

  const perTest = { sessionPerStatement: [], oneSession: [] };
  for (let round = 0; round < RUNS; round++) {
    for (const [name, way] of Object.entries(ways)) {
      const before = clusterCpuMs();
      for (let i = 0; i < PER_ROUND; i++) await way();
      // A session's process ends a moment after its client closes; its CPU counts once it is reaped.
      await new Promise((resolve) => setTimeout(resolve, 300));
      perTest[name].push((clusterCpuMs() - before) / PER_ROUND);
    }
    log(
      `round ${round + 1}/${RUNS}: a session per statement ${fmt(perTest.sessionPerStatement.at(-1), 1)} ms, one session ${fmt(perTest.oneSession.at(-1), 1)} ms`,
    );
  }

  const machine = describeMachine();
  const baseline = median(perTest.sessionPerStatement);
  const kept = median(perTest.oneSession);
  process.stdout.write(
    `${[
      `PostgreSQL CPU per test database (${machine.cpus} × ${machine.cpuModel}, ${machine.date}; median of ${RUNS} rounds of ${PER_ROUND} each way)`,
      "",
      table(
        ["create and drop", "cluster CPU per test (ms)", "ratio"],
        [
          ["each on a session of its own", fmt(baseline, 1), "1.00"],
          ["on the process's one session", fmt(kept, 1), fmt(kept / baseline)],
        ],
      ),
    ].join("\n")}\n`,
  );
} finally {
  await cluster.stop();
}
