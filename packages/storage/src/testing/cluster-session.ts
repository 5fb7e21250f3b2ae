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
 * A session the server ended is opened again by the next statement.
 */
class AdminSession {
  private client: pg.Client | null = null;

  private constructor(private readonly clusterUrl: string) {}

  static async open(clusterUrl: string): Promise<AdminSession> {
    const session = new AdminSession(clusterUrl);
    await session.connect();
    return session;
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.clusterUrl });
    await client.connect();
    // A session the server ends while idle (a restart, the cluster stopping) is dropped here and
    // opened again by the next statement, rather than failing it or ending the process with an
    // unhandled 'error'.
    const lost = () => {
      if (this.client === client) this.client = null;
    };
    client.on("error", lost);
    client.on("end", lost);
    AdminSession.socketOf(client)?.unref();
    this.client = client;
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
    const client = this.client ?? (await this.connect());
    const socket = AdminSession.socketOf(client);
    socket?.ref();
    try {
      await client.query(statement);
    } finally {
      socket?.unref();
    }
  }
}
