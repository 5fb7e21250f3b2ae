// A flood of one tenant's requests from a client process of its own (autocannon, unthrottled), so
// that neither its work nor its scheduling is the measuring process's. Run as a child by
// `floodFromChild`; it imports nothing of kiln, so it starts in moments even on a loaded machine.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { lineReader } from "./line-reader.mjs";

const FLOOD = "KILN_BENCH_FLOOD_CLIENT";

/**
 * Starts the flood's client at nice `nice` and resolves, once it is ready, with `go()`: it floods
 * `path` on `connections` connections for `seconds`, then resolves with autocannon's rate and
 * latencies and when each answer was read (`answered`, ms since the epoch: this machine's clock).
 */
export async function floodFromChild({ url, token, path, seconds, connections, nice }) {
  const child = spawn("nice", ["-n", String(nice), process.execPath, fileURLToPath(import.meta.url)], {
    env: { ...process.env, [FLOOD]: JSON.stringify({ url, token, path, seconds, connections }) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const next = lineReader(child.stdout);
  if ((await next()) !== "ready") throw new Error("the flood's client did not start");
  return {
    go: async () => {
      child.stdin.write("go\n");
      const figures = JSON.parse(await next());
      const [code] = child.exitCode === null ? await once(child, "exit") : [child.exitCode];
      if (code !== 0) throw new Error(`the flood's client exited ${code}`);
      return figures;
    },
  };
}

if (process.env[FLOOD] !== undefined) {
  const { url, token, path, seconds, connections } = JSON.parse(process.env[FLOOD]);
  const next = lineReader(process.stdin);
  process.stdout.write("ready\n");
  await next();
  const answered = [];
  const r = await autocannon({
    url,
    connections,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
    requests: [{ method: "GET", path, onResponse: () => answered.push(performance.timeOrigin + performance.now()) }],
  });
  process.stdout.write(
    `${JSON.stringify({ achieved: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, answered })}\n`,
  );
  process.exit(0);
}
