import type { Position } from '../event-store';
import { comparePositions } from '../event-store';

/**
 * Wakes subscriptions when the global log grows. Appends made by this process wake
 * them at once; appends by other processes are seen by one shared poll of the log
 * head, which runs only while somebody waits. (LISTEN/NOTIFY is not used: NOTIFY
 * takes a database-wide lock at commit and would serialise every append.)
 *
 * No wake-up is lost between a subscriber's read and its wait: every wake-up moves
 * `generation`, a subscriber reads it before it reads the log and passes it to
 * `wait`, and a wait whose generation has moved since returns at once. (Without
 * that, an append committed while the subscriber was reading, or a poll that saw the
 * log grow then, woke nobody, and the subscriber slept its whole maximum wait.)
 */
export class LogTailSignal {
  private readonly waiters = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;
  private lastHead: Position | null = null;
  private closed = false;
  private wakeUps = 0;

  constructor(
    private readonly readHead: () => Promise<Position | null>,
    private readonly pollIntervalMs: number,
  ) {}

  /** How many wake-ups there have been: read it before reading the log, then pass it to `wait`. */
  get generation(): number {
    return this.wakeUps;
  }

  /** Called after a local append committed. */
  notify(): void {
    this.wakeUps++;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  /**
   * Resolves when the log may have grown since `seen` (a `generation` read before the
   * caller last read the log: at once if it has moved already), or after maxWaitMs.
   * Without `seen`, waits for the next wake-up (a plain back-off that close() cuts short).
   */
  wait(maxWaitMs: number, seen?: number): Promise<void> {
    if (this.closed || (seen !== undefined && seen !== this.wakeUps)) return Promise.resolve();
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
