import { DatabaseOutageLog } from '#platform/database';
import type { Logger } from '#platform/logging';

/**
 * Runs `tick` every `intervalMs`, never two at once; a failing tick is logged (at
 * error level; the database away, once per outage: DatabaseOutageLog) and the next one
 * runs as usual. Ticks read the gateway clock, so with CLOCK=manual an advance is
 * acted on within one interval.
 */
export class PeriodicWorker {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;
  private readonly outage: DatabaseOutageLog;

  constructor(
    readonly name: string,
    private readonly intervalMs: number,
    private readonly tick: () => Promise<number>,
    private readonly log: Logger,
    /** A tick that did this much work goes again at once: more is probably waiting. */
    private readonly fullBatch = 100,
  ) {
    this.outage = new DatabaseOutageLog(log, `worker ${name}`, { fields: { worker: name } });
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick()
        .then((done) => {
          this.outage.succeeded();
          if (done > 0) this.log.info({ worker: this.name, done }, 'worker tick');
          // Work left over: go again at once.
          this.schedule(done >= this.fullBatch ? 0 : this.intervalMs);
        })
        .catch((error) => {
          if (!this.outage.failed(error)) this.log.error({ err: error, worker: this.name }, 'worker tick failed');
          this.schedule(this.intervalMs);
        });
    }, delay);
  }
}
