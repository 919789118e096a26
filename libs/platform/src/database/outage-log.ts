import type { Logger } from '../logging';
import { isDatabaseNotReached } from './pool';

/** How often a poller says again that the database is still not reached. */
export const OUTAGE_RETOLD_EVERY_MS = 60_000;

/**
 * A failure that is the database being away (refused, unreachable, the connection lost,
 * the server starting or stopping), itself or as the cause it wraps (an append whose answer
 * was lost with its connection): isDatabaseNotReached, but for a role, password or
 * database the server refuses, which is a configuration error and stays one.
 */
export function isDatabaseAway(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (!isDatabaseNotReached(e)) continue;
    const code = (e as { code?: unknown }).code;
    return !(typeof code === 'string' && (/^28/.test(code) || code === '3D000'));
  }
  return false;
}

/**
 * What one poller (a periodic worker, a projection runner, the webhook dispatcher) logs
 * while the database is away: a round that fails for that (isDatabaseAway) is told at
 * warn level without its stack when the outage starts, then once every
 * OUTAGE_RETOLD_EVERY_MS with how many rounds failed since it started; the first round
 * that works again says the database is back (info). Whatever else fails is the
 * caller's to log at error level. Without this, every poller wrote a stack trace every
 * 100 ms for as long as the outage lasted.
 */
export interface OutageLogOptions {
  /** Fields every line carries (the worker's or projection's name). */
  readonly fields?: Readonly<Record<string, unknown>>;
  readonly retoldEveryMs?: number;
  /** What the caller does meanwhile, as the lines say it (default: retrying). */
  readonly meanwhile?: string;
  /** A failure after a quiet retoldEveryMs starts a new outage: for a caller never told that one ended (requests). */
  readonly quietEndsOutage?: boolean;
}

export class DatabaseOutageLog {
  private failures = 0;
  private since = 0;
  private toldAt = 0;
  private lastFailureAt = 0;
  private readonly fields: Readonly<Record<string, unknown>>;
  private readonly retoldEveryMs: number;

  constructor(
    private readonly log: Logger,
    /** Who polls, as the lines say it ("worker hold-release"). */
    private readonly poller: string,
    private readonly options: OutageLogOptions = {},
  ) {
    this.fields = options.fields ?? {};
    this.retoldEveryMs = options.retoldEveryMs ?? OUTAGE_RETOLD_EVERY_MS;
  }

  /** A failed round: true when it was the database away (told or counted here), false for the caller to log. `told`: fields of the line if one is told. */
  failed(error: unknown, told: Readonly<Record<string, unknown>> = {}): boolean {
    if (!isDatabaseAway(error)) return false;
    const now = performance.now();
    if (this.options.quietEndsOutage && this.failures > 0 && now - this.lastFailureAt >= this.retoldEveryMs) this.failures = 0;
    if (this.failures === 0) this.since = now;
    this.failures++;
    this.lastFailureAt = now;
    if (this.failures === 1 || now - this.toldAt >= this.retoldEveryMs) {
      this.toldAt = now;
      this.log.warn(
        {
          ...told,
          ...this.fields,
          reason: (error as Error).message || String((error as { code?: unknown }).code),
          failures: this.failures,
          awayMs: Math.round(now - this.since),
        },
        `${this.poller}: the database is not reached; ${this.options.meanwhile ?? 'retrying'} (said again once a minute while it lasts)`,
      );
    }
    return true;
  }

  /** A round that worked: after an outage, says the database is reached again. */
  succeeded(): void {
    if (this.failures === 0) return;
    this.log.info(
      { ...this.fields, failures: this.failures, awayMs: Math.round(performance.now() - this.since) },
      `${this.poller}: the database is reached again`,
    );
    this.failures = 0;
  }
}
