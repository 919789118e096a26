import { Injectable } from '@nestjs/common';

/** Reports built whole in the serving process at once, per process (docs/audit-log.md, "Signed statements"). */
export const REPORT_BUILDS = 2;

/** The request's log, where a report that waits for its turn says so. */
export interface RequestLog {
  info(fields: object, message: string): void;
}

/**
 * At most `size` holders at once; the others wait in order of arrival. A turn is given
 * back by calling what `take` answered (once; a second call does nothing).
 */
export class Turns {
  private busy = 0;
  private readonly queue: (() => void)[] = [];

  constructor(private readonly size: number) {}

  /** Whether a `take` now would wait. */
  get full(): boolean {
    return this.busy >= this.size;
  }

  async take(): Promise<() => void> {
    if (this.busy < this.size) this.busy++;
    else await new Promise<void>((resolve) => this.queue.push(resolve)); // the turn passes on with `busy` unchanged
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.queue.shift();
      if (next) next();
      else this.busy--;
    };
  }
}

/**
 * The reports a request builds whole in this process, reading as much as a ledger holds
 * (a signed statement, a balance replayed from the log): at most REPORT_BUILDS at once,
 * the others wait their turn in order of arrival, so that a few of them cannot take the
 * process's memory nor its database connections. Other requests never wait for them.
 */
@Injectable()
export class ReportBuilds {
  private readonly turns = new Turns(REPORT_BUILDS);

  async inTurn<T>(log: RequestLog | undefined, fields: object, build: () => Promise<T>): Promise<T> {
    if (this.turns.full) log?.info(fields, `report: waiting for its turn (${REPORT_BUILDS} are built at a time)`);
    const done = await this.turns.take();
    try {
      return await build();
    } finally {
      done();
    }
  }
}
