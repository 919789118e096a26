/**
 * The one clock every time rule reads: invoice expiry, holds, rate limits, webhook
 * retries, duplicate windows, signature windows. Nothing else may call Date.now()
 * for a business decision.
 */
export interface Clock {
  now(): Date;
}

/** Injection token for the gateway's clock. */
export const CLOCK = Symbol('Clock');

export class SystemClock implements Clock {
  readonly manual = false;
  now(): Date {
    return new Date();
  }
}

/**
 * CLOCK=manual: real time plus an offset the operator advances. The offset lives
 * in the database (see ManualClockSync) so that the API and projector processes
 * agree on what time it is.
 */
export class ManualClock implements Clock {
  readonly manual = true;
  private offsetMs = 0;

  constructor(private readonly realNow: () => number = Date.now) {}

  now(): Date {
    return new Date(this.realNow() + this.offsetMs);
  }

  get offsetMilliseconds(): number {
    return this.offsetMs;
  }

  /** Moves the offset forward only: time never runs backwards. */
  setOffset(offsetMs: number): void {
    if (!Number.isSafeInteger(offsetMs)) throw new RangeError('clock offset must be an integer of milliseconds');
    if (offsetMs > this.offsetMs) this.offsetMs = offsetMs;
  }
}

export type GatewayClock = SystemClock | ManualClock;
