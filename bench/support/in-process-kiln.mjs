// kiln in the bench's own process, wired as `kiln-server serve` wires it: openStorage on the
// bench's data dir (SQLite, or the PostgreSQL `databaseUrl` names), a LocalBlobStore beside it,
// job notifications, buildApp, and the embedded local host with the sandbox executor under a
// cgroup parent the bench names (the sandbox executor needs root). Requests go through Fastify's
// inject, or over loopback when the app listens.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { dist, requireBuilt } from "./built-packages.mjs";

requireBuilt(dist("src/build-app.js"), dist("src/local-host.js"), dist("src/testing/harness.js"));
const { LocalBlobStore, onboardRepository, openStorage, startJobNotifications } = await import("@kiln/storage");
const { silentLogger, systemClock, TERMINAL_JOB_STATUSES } = await import("@kiln/contract");
const { sandboxIsolation } = await import("@kiln/host");
const { buildApp } = await import(dist("src/build-app.js"));
const { startLocalHost } = await import(dist("src/local-host.js"));
const { bearer, personWithToken } = await import(dist("src/testing/harness.js"));

/**
 * Starts kiln on `dataDir` with an admin member and its token. Where the benches differ:
 * `notifications: false` leaves the job notifications to buildApp and the local host without
 * them (as inner-loop.mjs was measured); `listen` ({ host, port }) serves on a socket, `onApp`
 * sees the app before it is ready or listens (request hooks); `appOptions` and `hostOptions` add
 * to buildApp's and startLocalHost's options.
 */
export async function startInProcessKiln({
  dataDir,
  cgroupParentName,
  databaseUrl,
  notifications: withNotifications = true,
  publicOrigin = "http://kiln.bench",
  appOptions = {},
  hostOptions = {},
  onApp = () => {},
  listen = null,
}) {
  const storage = await openStorage({ dataDir, databaseUrl });
  const blobs = new LocalBlobStore(join(dataDir, "blobs"));
  const notifications = withNotifications
    ? startJobNotifications(storage, { clock: systemClock, log: silentLogger })
    : null;
  const given = notifications === null ? {} : { notifications };
  let wake = () => {};
  const app = buildApp({
    storage,
    blobs,
    clock: systemClock,
    version: "bench",
    publicOrigin,
    wakeScheduler: () => wake(),
    ...given,
    logger: false,
    ...appOptions,
  });
  onApp(app);
  const address = listen === null ? null : await app.listen(listen);
  if (listen === null) await app.ready();
  mkdirSync(join(dataDir, "attempts"));
  const lineageRoot = join(dataDir, "lineages");
  const host = await startLocalHost(
    { storage, blobs, clock: systemClock, log: silentLogger, ...given },
    {
      workRoot: join(dataDir, "attempts"),
      lineageRoot,
      isolation: sandboxIsolation({ cgroupParentName }),
      ...hostOptions,
    },
  );
  wake = host.wake;
  const member = await personWithToken(storage, { role: "admin", now: new Date() });
  const auth = bearer(member.token);

  const get = async (url) => {
    const res = await app.inject({ method: "GET", url, headers: auth });
    if (res.statusCode !== 200) throw new Error(`GET ${url}: ${res.statusCode} ${res.body}`);
    return res.json();
  };

  /** A repository of the member's tenant; a new one's first job starts a cold lineage. */
  const onboard = async (name) => {
    await onboardRepository(storage, { tenantId: member.tenant, name, onboardedBy: "bench" }, new Date());
    return name;
  };

  /**
   * The job once its status is terminal: read again whenever a notice of the job arrives (what
   * `kiln cargo`'s log stream waits on), so no poll interval is measured, and at least every
   * `pollMs` as the fallback.
   */
  async function waitForTerminal(id, pollMs) {
    let changed = false;
    let poke = () => {};
    const unsubscribe = notifications.onJob(id, () => {
      changed = true;
      poke();
    });
    try {
      for (;;) {
        changed = false;
        const job = await get(`/api/jobs/${id}`);
        if (TERMINAL_JOB_STATUSES.has(job.status)) return job;
        if (!changed) {
          await new Promise((resolve) => {
            const timer = setTimeout(resolve, pollMs);
            poke = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
      }
    } finally {
      unsubscribe();
    }
  }

  return {
    storage,
    app,
    address,
    dataDir,
    lineageRoot,
    member,
    auth,
    get,
    onboard,
    waitForTerminal,
    stop: async () => {
      await host.stop();
      await app.close();
      await notifications?.stop();
      await storage.close();
    },
  };
}
