import { Agent, errors, request } from 'undici';

/** What one HTTP attempt ended with: a status, or no answer. */
export type AttemptOutcome = number | 'network error' | 'timeout';

/**
 * Every attempt the load made, by the phase it ended in, and every retry by its
 * cause: the figures of the report.
 */
export class Traffic {
  phase = 'setup';
  /** phase → outcome → attempts. */
  readonly attempts = new Map<string, Map<AttemptOutcome, number>>();
  /** cause (429, 500, 503, network error, timeout) → retries. */
  readonly retries = new Map<string, number>();

  record(outcome: AttemptOutcome): void {
    const byOutcome = this.attempts.get(this.phase) ?? new Map<AttemptOutcome, number>();
    byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
    this.attempts.set(this.phase, byOutcome);
  }

  retried(cause: AttemptOutcome): void {
    this.retries.set(String(cause), (this.retries.get(String(cause)) ?? 0) + 1);
  }

  /** Attempts of a phase that ended in a 5xx or without an answer (a reset connection, a timeout). */
  failuresIn(phase: string): { readonly serverErrors: number; readonly noAnswer: number } {
    let serverErrors = 0;
    let noAnswer = 0;
    for (const [outcome, count] of this.attempts.get(phase) ?? []) {
      if (typeof outcome === 'number') {
        if (outcome >= 500) serverErrors += count;
      } else noAnswer += count;
    }
    return { serverErrors, noAnswer };
  }

  total(phase: string): number {
    let sum = 0;
    for (const count of (this.attempts.get(phase) ?? new Map()).values()) sum += count;
    return sum;
  }
}

// Bodies are whatever the gateway sent; the load reads the fields it needs.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

/** The last answer of a request after its retries. */
export interface Answer {
  /** The last status; null when the last attempt had no answer. */
  readonly status: number | null;
  readonly body: Json;
  /** An earlier attempt may have reached the gateway without its answer reaching us (5xx, reset, timeout). */
  readonly ambiguous: boolean;
  /** Why it is not a success, when it is not. */
  readonly reason: string | null;
}

export interface SendOptions {
  readonly token: string;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

/** The spec's retry guidance: at most 5 retries of 500, 503, a network error or a timeout, from 250 ms, doubling. */
export const MAX_RETRIES = 5;
export const FIRST_DELAY_MS = 250;
/** 429 is retried after its Retry-After; a bound so that a broken limit cannot loop forever. */
const MAX_RATE_LIMITED = 20;
const ATTEMPT_TIMEOUT_MS = 15_000;

/**
 * A merchant's (or the operator's) HTTP client that follows the spec's retry rules:
 * 429 after Retry-After; 500, 503, network errors and timeouts with a delay growing
 * from 250 ms, at most 5 times; nothing else is retried (a 4xx is an answer; a 502
 * or 504 is not in the spec's list, so a client that follows it gives up).
 */
export class SpecClient {
  private readonly agent = new Agent({ connections: 64, headersTimeout: ATTEMPT_TIMEOUT_MS, bodyTimeout: ATTEMPT_TIMEOUT_MS });

  constructor(
    private readonly baseUrl: string,
    private readonly traffic: Traffic,
  ) {}

  async send(method: 'GET' | 'POST', path: string, options: SendOptions): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${options.token}`, ...(options.headers ?? {}) };
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    if (body !== undefined) headers['content-type'] = 'application/json';
    let transient = 0;
    let limited = 0;
    let ambiguous = false;
    for (;;) {
      const attempt = await this.attempt(method, path, headers, body);
      this.traffic.record(attempt.outcome);
      const { outcome } = attempt;
      if (typeof outcome === 'number' && outcome < 300) return { status: outcome, body: attempt.body, ambiguous, reason: null };
      if (outcome === 429) {
        if (++limited > MAX_RATE_LIMITED) return { status: 429, body: attempt.body, ambiguous, reason: `429 more than ${MAX_RATE_LIMITED} times` };
        this.traffic.retried(429);
        const seconds = Number(attempt.retryAfter ?? '1');
        await sleep((Number.isFinite(seconds) && seconds >= 0 ? seconds : 1) * 1000);
        continue;
      }
      const retryable = outcome === 500 || outcome === 503 || outcome === 'network error' || outcome === 'timeout';
      if (!retryable) {
        return { status: outcome as number, body: attempt.body, ambiguous, reason: `${outcome} ${errorCode(attempt.body)}`.trim() };
      }
      ambiguous = true;
      if (transient >= MAX_RETRIES) {
        return {
          status: typeof outcome === 'number' ? outcome : null,
          body: attempt.body,
          ambiguous,
          reason: `${outcome} after ${MAX_RETRIES} retries`,
        };
      }
      this.traffic.retried(outcome);
      await sleep(FIRST_DELAY_MS * 2 ** transient);
      transient += 1;
    }
  }

  private async attempt(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
  ): Promise<{ outcome: AttemptOutcome; body: Json; retryAfter?: string }> {
    try {
      const response = await request(`${this.baseUrl}${path}`, { method, headers, body, dispatcher: this.agent });
      const text = await response.body.text();
      let parsed: Json = text;
      try {
        parsed = text === '' ? null : JSON.parse(text);
      } catch {
        parsed = text;
      }
      const retryAfter = response.headers['retry-after'];
      return { outcome: response.statusCode, body: parsed, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter };
    } catch (error) {
      const timedOut = error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError;
      return { outcome: timedOut ? 'timeout' : 'network error', body: { error: String((error as Error).message) } };
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

const errorCode = (body: Json): string => (body && typeof body === 'object' && body.error?.code ? String(body.error.code) : '');

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
