// Throwaway PostgreSQL 15 cluster for tests: a fresh data directory in memory (/dev/shm, else a
// temp dir), a free loopback port, trust authentication, no fsync. Nothing here is fit for real data.
//
//   import { startThrowawayCluster } from "./postgres-cluster.mjs";
//   const { url, stop } = await startThrowawayCluster();
//
//   node scripts/postgres-cluster.mjs              # prints the URL, stops on Ctrl-C / SIGTERM
//   node scripts/postgres-cluster.mjs --durable    # the same with PostgreSQL's durable defaults
//                                                  # (fsync, synchronous commits, full pages): for
//                                                  # trials that measure latency as production has it
//   node scripts/postgres-cluster.mjs -- CMD ARGS  # runs CMD with KILN_TEST_POSTGRES_URL set,
//                                                  # stops the cluster, exits with CMD's status
//
// initdb and the server refuse to run as root, so when this script runs as root (CI, fresh
// machines) both run as the `postgres` OS user the Debian package creates, through `runuser`,
// and the temp dir is handed to that user. Run as any other user, they run as that user.

import { spawn } from "node:child_process";
import { accessSync, constants, readFileSync, statSync } from "node:fs";
import { appendFile, chmod, chown, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { processTreeTicks } from "./machine-cpu.mjs";

const POSTGRES_BIN = process.env.KILN_POSTGRES_BIN ?? "/usr/lib/postgresql/15/bin";
const SERVICE_USER = "postgres";

/**
 * Starts a cluster and resolves once it accepts connections. `durable` keeps PostgreSQL's own
 * fsync, synchronous_commit and full_page_writes (on), as a production cluster has them;
 * without it they are off, which is what tests want.
 * @param {{ durable?: boolean }} [options]
 * `cpuSeconds()` is the CPU the cluster's processes have spent so far (0 once stopped).
 * @returns {Promise<{ url: string, dataDir: string, cpuSeconds: () => number, stop: () => Promise<void> }>}
 */
export async function startThrowawayCluster(options = {}) {
  const durable = options.durable === true;
  const asServiceUser = process.getuid?.() === 0;
  const dir = await mkdtemp(join(durable ? tmpdir() : memoryBackedDir(), "kiln-postgres-"));
  const dataDir = join(dir, "data");
  const run = (program, args) => runCommand(join(POSTGRES_BIN, program), args, { cwd: dir, asServiceUser });

  try {
    if (asServiceUser) {
      const { uid, gid } = await serviceUserIds();
      await chown(dir, uid, gid);
    }
    // The data directory must not be readable by others, and the postgres user must own it.
    await chmod(dir, 0o700);

    // --locale=C: independent of whatever LANG the machine has (an ungenerated locale makes
    // initdb fail); C collation also orders our text timestamps and ids bytewise.
    await run("initdb", [
      "-D",
      dataDir,
      "--auth=trust",
      "-U",
      "postgres",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
      "--no-instructions",
    ]);

    let lastError;
    // A free port can be taken between probing and binding; try a few.
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = await freeLoopbackPort();
      // Appended to the file initdb wrote (as root, appending keeps the postgres user as owner);
      // later lines override earlier ones, so a retry's port wins.
      await appendFile(
        join(dataDir, "postgresql.conf"),
        [
          "",
          "# kiln throwaway test cluster",
          "listen_addresses = '127.0.0.1'",
          `port = ${port}`,
          `unix_socket_directories = '${dir}'`,
          // Durability is pointless for a cluster deleted after the run, and fsync is slow.
          ...(durable ? [] : ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]),
          // Test files run in parallel, each opening pools of several connections.
          "max_connections = 300",
          "",
        ].join("\n"),
      );
      try {
        await run("pg_ctl", ["-D", dataDir, "-l", join(dir, "postgres.log"), "-w", "-t", "60", "start"]);
      } catch (error) {
        lastError = error;
        continue;
      }
      const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
      let stopped;
      const stop = () => {
        stopped ??= (async () => {
          await run("pg_ctl", ["-D", dataDir, "-m", "fast", "-w", "stop"]).catch(() => {});
          await rm(dir, { recursive: true, force: true });
        })();
        return stopped;
      };
      const cpuSeconds = () => {
        // postmaster.pid's first line is the postmaster's PID; every backend is its child.
        const pid = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
        return processTreeTicks(pid) / 100;
      };
      return { url, dataDir, cpuSeconds: () => (stopped === undefined ? cpuSeconds() : 0), stop };
    }
    throw lastError ?? new Error("PostgreSQL did not start");
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Where a throwaway cluster's files go: /dev/shm (a tmpfs) where the machine has one. Every test
 * database is a copy of the template's ~1,200 files, unlinked again when dropped, and every CREATE
 * and DROP DATABASE checkpoints: on a disk's file system that file and journal work was most of a
 * test run's PostgreSQL CPU (issue 39), in memory it is a small part. With fsync off, the disk
 * kept nothing a throwaway cluster needs. A durable cluster stays on disk, as production has it.
 */
function memoryBackedDir() {
  const shm = "/dev/shm";
  try {
    accessSync(shm, constants.W_OK | constants.X_OK);
    return statSync(shm).isDirectory() ? shm : tmpdir();
  } catch {
    return tmpdir();
  }
}

/**
 * Runs a PostgreSQL program, as the postgres user when we are root; rejects with its output if
 * it fails. The working directory is the cluster's dir, which that user can enter (PostgreSQL
 * tools fail when they cannot resolve the current directory).
 */
function runCommand(program, args, { cwd, asServiceUser }) {
  const [command, argv] = asServiceUser ? ["runuser", ["-u", SERVICE_USER, "--", program, ...args]] : [program, args];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, {
      cwd,
      env: { ...process.env, LC_ALL: "C" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    child.on("error", (error) => reject(new Error(`could not run ${command}: ${error.message}`)));
    child.on("close", (code, signal) => {
      if (code === 0) {
        resolve(output);
      } else {
        const status = signal ? `signal ${signal}` : `status ${code}`;
        reject(new Error(`${[command, ...argv].join(" ")} failed with ${status}:\n${output.trim()}`));
      }
    });
  });
}

async function serviceUserIds() {
  const [uid, gid] = await Promise.all([
    runCommand("id", ["-u", SERVICE_USER], { asServiceUser: false }),
    runCommand("id", ["-g", SERVICE_USER], { asServiceUser: false }),
  ]).catch((error) => {
    throw new Error(
      `the '${SERVICE_USER}' OS user is missing; is the postgresql-15 package installed?\n${error.message}`,
    );
  });
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}

function freeLoopbackPort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function main(argv) {
  const separator = argv.indexOf("--");
  const command = separator === -1 ? [] : argv.slice(separator + 1);
  const options = separator === -1 ? argv : argv.slice(0, separator);
  const cluster = await startThrowawayCluster({ durable: options.includes("--durable") });

  let stopping = false;
  const stopAndExit = async (code) => {
    if (stopping) return;
    stopping = true;
    await cluster.stop();
    process.exit(code);
  };
  process.on("SIGINT", () => stopAndExit(130));
  process.on("SIGTERM", () => stopAndExit(143));

  if (command.length === 0) {
    console.log(cluster.url);
    // The data directory names the postmaster (its postmaster.pid), whose CPU a trial may measure.
    console.error(
      `PostgreSQL is running (data directory ${cluster.dataDir}); Ctrl-C (SIGINT) or SIGTERM stops it and deletes its data.`,
    );
    setInterval(() => {}, 1 << 30);
    return;
  }

  const [program = "", ...args] = command;
  const child = spawn(program, args, {
    stdio: "inherit",
    env: { ...process.env, KILN_TEST_POSTGRES_URL: cluster.url },
  });
  child.on("error", (error) => {
    console.error(`could not run ${program}: ${error.message}`);
    stopAndExit(127);
  });
  child.on("exit", (code, signal) => stopAndExit(code ?? (signal ? 128 : 1)));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
