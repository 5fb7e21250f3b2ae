// A real `kiln-server serve` child process on loopback for the benches that measure across
// processes: no local host, the platform's background loops off, its host listener (mutual TLS)
// open so the bench can enroll as a remote host.
import { execFile, spawn } from "node:child_process";
import { createServer } from "node:net";
import { promisify } from "node:util";
import { dist, requireBuilt } from "./built-packages.mjs";

requireBuilt(dist("src/main.js"));

/** A TCP port free on 127.0.0.1 just now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts `kiln-server serve` named `name` on `dataDir`, with `env` over its environment
 * (KILN_DATABASE_URL, KILN_MASTER_KEY, …); resolves once its public API answers. `admin(...args)`
 * runs `kiln-server admin …` with the same environment and resolves with its stdout.
 */
export async function startServeProcess(name, { dataDir, env = {} }) {
  const [port, hostPort] = [await freePort(), await freePort()];
  const origin = `http://127.0.0.1:${port}`;
  const serverEnv = {
    ...process.env,
    KILN_DATA_DIR: dataDir,
    KILN_LISTEN: `127.0.0.1:${port}`,
    KILN_PUBLIC_URL: origin,
    KILN_HOST_LISTEN: `127.0.0.1:${hostPort}`,
    KILN_LOCAL_HOST: "off",
    KILN_CANARY_INTERVAL_SECONDS: "0",
    KILN_ANOMALY_INTERVAL_SECONDS: "0",
    KILN_DOGFOOD_AUDIT_INTERVAL_SECONDS: "0",
    KILN_LOG_LEVEL: "warn",
    ...env,
  };
  const child = spawn(process.execPath, [dist("src/main.js"), "serve"], {
    env: serverEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited: ${output}`);
    try {
      const res = await fetch(`${origin}/api/openapi.json`);
      if (res.ok) break;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const admin = async (...args) =>
    (await promisify(execFile)(process.execPath, [dist("src/main.js"), "admin", ...args], { env: serverEnv })).stdout;
  return {
    name,
    origin,
    hostEndpoint: `https://127.0.0.1:${hostPort}`,
    dataDir,
    admin,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
