/** No turn: the line was full, the wait ran out, or the waiter left (its signal was aborted). */
export type NoTurn = 'full' | 'waited' | 'gone';

/** Bounds of Turns; one left out is none. */
export interface TurnBounds {
  /** Turns held at once in all. */
  readonly size?: number;
  /** Turns held at once per key (a take without a key has `size` alone). */
  readonly perKey?: number;
  /** Waiters at once in all, and per key. */
  readonly waiting?: number;
  readonly waitingPerKey?: number;
  /** How long a waiter waits at most. */
  readonly waitMs: number;
}

interface Waiter {
  readonly arrived: number;
  readonly end: (outcome: 'turn' | NoTurn) => void;
}

interface Line {
  readonly key: string | undefined;
  held: number;
  readonly waiting: Waiter[];
}

/**
 * Turns handed out in order of arrival: at most `size` held at once, `perKey` of them to
 * one key (a merchant account: one cannot take every turn); the others wait, first come
 * first served among those that may take one, at most `waiting` in all and
 * `waitingPerKey` per key, each at most `waitMs`, and one whose signal is aborted gives its
 * place up. A turn is given back by calling what `take` answered (once; a second call does
 * nothing). A key with no holder and nobody waiting has no entry.
 */
export class Turns {
  private busy = 0;
  private waiters = 0;
  private arrivals = 0;
  private readonly lines = new Map<string | undefined, Line>();

  constructor(private readonly bounds: TurnBounds) {}

  /** Whether every turn is taken. */
  get full(): boolean {
    return this.busy >= (this.bounds.size ?? Infinity);
  }

  /** Keys with a holder or a waiter (the others are forgotten). */
  get keys(): number {
    return this.lines.size;
  }

  /** Whether a `take` by `key` now would wait. */
  wouldWait(key?: string): boolean {
    return !this.mayTake(this.lines.get(key) ?? { key, held: 0, waiting: [] });
  }

  /** `waits` is called when the turn is not free at once and the taker will wait for it. */
  async take(key?: string, leave?: AbortSignal, waits?: () => void): Promise<(() => void) | NoTurn> {
    let line = this.lines.get(key);
    if (!line) this.lines.set(key, (line = { key, held: 0, waiting: [] }));
    const own = line;
    if (this.mayTake(own)) this.hold(own);
    else {
      const outcome = await this.wait(own, leave, waits);
      if (outcome !== 'turn') {
        this.forget(own);
        return outcome;
      }
    }
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const wasFull = this.full;
      this.busy--;
      own.held--;
      // Only the freed key's waiters may take it, unless every turn in all was taken.
      this.passOn(wasFull ? [...this.lines.values()] : [own]);
      this.forget(own);
    };
  }

  private wait(line: Line, leave: AbortSignal | undefined, waits: (() => void) | undefined): Promise<'turn' | NoTurn> | NoTurn {
    if (this.waiters >= (this.bounds.waiting ?? Infinity) || line.waiting.length >= (this.bounds.waitingPerKey ?? Infinity)) return 'full';
    if (leave?.aborted) return 'gone';
    waits?.();
    return new Promise((resolve) => {
      const waiter: Waiter = {
        arrived: this.arrivals++,
        end: (outcome) => {
          clearTimeout(timer);
          leave?.removeEventListener('abort', left);
          const at = line.waiting.indexOf(waiter);
          if (at >= 0) {
            line.waiting.splice(at, 1);
            this.waiters--;
          }
          resolve(outcome);
        },
      };
      const left = () => waiter.end('gone');
      const timer = setTimeout(() => waiter.end('waited'), this.bounds.waitMs);
      leave?.addEventListener('abort', left, { once: true });
      line.waiting.push(waiter);
      this.waiters++;
    });
  }

  private mayTake(line: Line): boolean {
    return !this.full && (line.key === undefined || line.held < (this.bounds.perKey ?? Infinity));
  }

  private hold(line: Line): void {
    this.busy++;
    line.held++;
  }

  /** Free turns to the first waiters (of these lines) that may take one. */
  private passOn(lines: readonly Line[]): void {
    for (;;) {
      let next: Line | undefined;
      for (const line of lines)
        if (line.waiting.length > 0 && this.mayTake(line) && (!next || line.waiting[0]!.arrived < next.waiting[0]!.arrived)) next = line;
      if (!next) return;
      this.hold(next);
      next.waiting[0]!.end('turn');
    }
  }

  private forget(line: Line): void {
    if (this.lines.get(line.key) === line && line.held === 0 && line.waiting.length === 0) this.lines.delete(line.key);
  }
}
