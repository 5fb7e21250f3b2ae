/**
 * The one session each test process keeps to a PostgreSQL cluster to make and drop its test
 * databases (test-databases.ts). A session of its own per statement cost the cluster a new
 * process and its start twice per test database, about 56 of the 146 ms of CPU a test database
 * cost it (docs/benchmarks.md, bench/test-databases.mjs).
 */
import pg from "pg";

/** The session this process keeps to each cluster. */
const adminSessions = new Map<string, Promise<AdminSession>>();

/** Runs `statement` on this process's session to the cluster (opened on first use). */
export async function administer(clusterUrl: string, statement: string): Promise<void> {
  let session = adminSessions.get(clusterUrl);
  if (session === undefined) {
    session = AdminSession.open(clusterUrl);
    session.catch(() => adminSessions.delete(clusterUrl));
    adminSessions.set(clusterUrl, session);
  }
  await (await session).run(statement);
}

/**
 * One session to the cluster's `postgres` database, holding the process open only while a
 * statement runs on it: a test file's process ends when its tests do, with this session still open.
 * A session the server ended is opened again on the next statement.
 */
class AdminSession {
  private constructor(
    private readonly clusterUrl: string,
    private client: pg.Client,
    private broken = false,
  ) {}

  static async open(clusterUrl: string): Promise<AdminSession> {
    return new AdminSession(clusterUrl, await AdminSession.connect(clusterUrl));
  }

  private static async connect(clusterUrl: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: clusterUrl });
    await client.connect();
    // An idle session the server ends (the cluster stopping) must not end the process with an
    // unhandled 'error': the next statement finds the session broken and opens another.
    client.on("error", () => {});
    AdminSession.socketOf(client)?.unref();
    return client;
  }

  private static socketOf(client: pg.Client): { ref(): void; unref(): void } | undefined {
    return (client as unknown as { connection?: { stream?: { ref(): void; unref(): void } } }).connection?.stream;
  }

  private queue: Promise<unknown> = Promise.resolve();

  /** Runs statements one after another: a pg.Client runs one at a time anyway. */
  run(statement: string): Promise<void> {
    const next = this.queue.then(() => this.runNow(statement));
    this.queue = next.catch(() => {});
    return next;
  }

  private async runNow(statement: string): Promise<void> {
    if (this.broken) {
      this.client = await AdminSession.connect(this.clusterUrl);
      this.broken = false;
    }
    const socket = AdminSession.socketOf(this.client);
    socket?.ref();
    try {
      await this.client.query(statement);
    } catch (error) {
      // A statement's own error leaves the session usable; a lost connection does not.
      if ((error as { code?: string }).code === undefined) this.broken = true;
      throw error;
    } finally {
      socket?.unref();
    }
  }
}
