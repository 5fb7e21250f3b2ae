/**
 * The dialect's part of notifications: one process's listening end for notices that writers
 * commit (`pg_notify(channel, payload)` inside their transaction, see job-notices.ts). What a
 * waiter does with them — subscriptions, reconnecting, reporting — is job-notifications.ts.
 */
export interface NoticeHandlers {
  /** A notice committed by any writer of the database (this process's included). */
  readonly onNotice: (channel: string, payload: string) => void;
  /**
   * The connection is gone (the server restarted, the backend was terminated, the network
   * failed): notices committed from now on are not delivered until a new `listen` succeeds.
   * Called at most once per connection, never after `close()`.
   */
  readonly onLost: (error: Error) => void;
}

export interface NoticeConnection {
  /** The PostgreSQL backend holding the LISTEN (an operator finds it in pg_stat_activity); null on SQLite. */
  readonly backendPid: number | null;
  /** Stops listening and releases the connection; `onLost` is not called for it. */
  close(): Promise<void>;
}
