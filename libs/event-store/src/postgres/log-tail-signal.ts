import type { Position } from '../event-store';
import { comparePositions } from '../event-store';

/**
 * Wakes subscriptions when the global log grows. Appends made by this process wake
 * them at once; appends by other processes are seen by one shared poll of the log
 * head, which runs only while somebody waits. (LISTEN/NOTIFY is not used: NOTIFY
 * takes a database-wide lock at commit and would serialise every append.)
 */
export class LogTailSignal {
  private readonly waiters = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;
  private lastHead: Position | null = null;
  private closed = false;

  constructor(
    private readonly readHead: () => Promise<Position | null>,
    private readonly pollIntervalMs: number,
  ) {}

  /** Called after a local append committed. */
  notify(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  /** Resolves when the log may have grown, or after maxWaitMs. */
  wait(maxWaitMs: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.waiters;
      const done = () => {
        clearTimeout(timeout);
        waiters.delete(done);
        resolve();
      };
      const timeout = setTimeout(done, maxWaitMs);
      timeout.unref();
      waiters.add(done);
      this.schedulePoll();
    });
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.notify();
  }

  private schedulePoll(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => void this.poll(), this.pollIntervalMs);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    try {
      const head = await this.readHead();
      const grew = head !== null && (this.lastHead === null || comparePositions(head, this.lastHead) > 0);
      this.lastHead = head;
      if (grew) this.notify();
    } catch {
      // the database is unreachable for now: keep polling, subscriptions retry on their own
    } finally {
      this.timer = null;
      if (this.waiters.size > 0) this.schedulePoll();
    }
  }
}
