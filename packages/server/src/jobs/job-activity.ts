/**
 * An in-process hint that a job's log or status just changed, so a log stream reads again at
 * once instead of at its next poll: with the embedded host, `kiln cargo` sees a job's last
 * lines and its end within milliseconds rather than up to one poll interval (200 ms) later.
 * Only a hint: streams still poll, since another process (a second server on the same
 * PostgreSQL, a remote host) may have written what they read.
 */
export class JobActivity {
  private readonly listeners = new Map<string, Set<() => void>>();
  private readonly everyJob = new Set<(jobId: string) => void>();

  /** Calls `listener` whenever any job changes in this process (the check run reporter); returns the unsubscribe. */
  subscribeAll(listener: (jobId: string) => void): () => void {
    this.everyJob.add(listener);
    return () => {
      this.everyJob.delete(listener);
    };
  }

  /** Calls `listener` whenever `jobId` changes in this process; returns the unsubscribe. */
  subscribe(jobId: string, listener: () => void): () => void {
    let set = this.listeners.get(jobId);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(jobId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(jobId);
    };
  }

  notify(jobId: string): void {
    for (const listener of this.listeners.get(jobId) ?? []) listener();
    for (const listener of this.everyJob) listener(jobId);
  }
}

/** The process's one JobActivity: the in-process host protocol notifies, streams subscribe. */
export const jobActivity = new JobActivity();
