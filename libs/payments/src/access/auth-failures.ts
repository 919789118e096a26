import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** What failed: a merchant's secret key (Bearer), an HMAC request (public id, timestamp, signature), the operator token. */
export type AuthFailureKind = 'secret_key' | 'signature' | 'operator_token';
export const AUTH_FAILURE_KINDS: readonly AuthFailureKind[] = ['secret_key', 'signature', 'operator_token'];

export interface AuthFailureLimits {
  /** Failed authentications one client address may have in a window answered 401; the next ones get 429. */
  readonly perAddress: number;
  /** Failed authentications of every address together in a window answered 401; past it every failure gets 429. */
  readonly overall: number;
  readonly windowSeconds: number;
}

/** The window of the failure limits: one minute. */
export const AUTH_FAILURE_WINDOW_SECONDS = 60;

/** The defaults: 20 failures per client address and 300 overall per minute, per API process. */
export const DEFAULT_AUTH_FAILURE_LIMITS: AuthFailureLimits = { perAddress: 20, overall: 300, windowSeconds: AUTH_FAILURE_WINDOW_SECONDS };

/**
 * The client a failure is counted for: an IPv4 address (also when written IPv4-mapped),
 * or the /64 of an IPv6 address (one subscriber usually holds a whole /64, so counting
 * single IPv6 addresses would count nothing).
 */
export function clientKeyOf(address: string): string {
  const bare = address.split('%', 1)[0]!;
  if (isIP(bare) === 0) return address;
  let parsed = ipaddr.parse(bare);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (!v6.isIPv4MappedAddress())
      return `${v6.parts
        .slice(0, 4)
        .map((p) => p.toString(16))
        .join(':')}::/64`;
    parsed = v6.toIPv4Address();
  }
  return parsed.toString();
}

interface Window {
  start: number;
  failures: number;
}

/**
 * Failed authentications, counted per client address and overall; pure, in memory
 * (one per API process), every decision on the `now` passed in (the gateway clock).
 *
 * Only failures are limited: `fail` is called once an attempt is known to fail, and
 * answers whether that failure is still within the limits (401) or past them (429,
 * with the seconds to wait). Nothing here can refuse a request whose credential
 * holds, whatever its address or everyone else did. Counting and judging happen in
 * one synchronous step, so concurrent failures are judged exactly in the order they
 * are counted. Fixed windows from an address's first failure (and from the first
 * failure of all, for the overall count).
 */
export class AuthFailureLimiter {
  private readonly byClient = new Map<string, Window>();
  private all: Window = { start: 0, failures: 0 };

  constructor(
    private readonly limits: AuthFailureLimits = DEFAULT_AUTH_FAILURE_LIMITS,
    /** The most client addresses remembered at once (expired ones go first, then the oldest). */
    private readonly maxClients = 100_000,
  ) {}

  /** Counts one failed authentication of the client; answers null within the limits, else the seconds to wait. */
  fail(address: string, now: Date): number | null {
    return this.refusal(address, now)?.seconds ?? null;
  }

  /**
   * As fail, saying which limit refuses: the client's own (`address`), or only the
   * overall one (`overall`: this client is within its own, everyone's failures are not).
   */
  refusal(address: string, now: Date): { readonly seconds: number; readonly by: 'address' | 'overall' } | null {
    const t = now.getTime();
    const key = clientKeyOf(address);
    let own = this.live(this.byClient.get(key), t);
    if (own) own.failures += 1;
    else {
      own = { start: t, failures: 1 };
      this.byClient.delete(key);
      this.byClient.set(key, own);
      this.bound(t);
    }
    let all = this.live(this.all, t);
    if (!all) all = this.all = { start: t, failures: 0 };
    all.failures += 1;
    const waits: number[] = [];
    if (own.failures > this.limits.perAddress) waits.push(this.secondsLeft(own, t));
    if (all.failures > this.limits.overall) waits.push(this.secondsLeft(all, t));
    return waits.length === 0 ? null : { seconds: Math.max(...waits), by: own.failures > this.limits.perAddress ? 'address' : 'overall' };
  }

  /** Client addresses remembered now (for tests of the bound). */
  get trackedClients(): number {
    return this.byClient.size;
  }

  private live(w: Window | undefined, t: number): Window | null {
    return w && w.failures > 0 && t >= w.start && t < w.start + this.limits.windowSeconds * 1000 ? w : null;
  }

  private secondsLeft(w: Window, t: number): number {
    return Math.max(1, Math.ceil((w.start + this.limits.windowSeconds * 1000 - t) / 1000));
  }

  private bound(t: number): void {
    if (this.byClient.size <= this.maxClients) return;
    for (const [key, w] of this.byClient) if (!this.live(w, t)) this.byClient.delete(key);
    // Still too many live ones: forget the oldest windows (Map keeps insertion order).
    for (const key of this.byClient.keys()) {
      if (this.byClient.size <= this.maxClients) break;
      this.byClient.delete(key);
    }
  }
}
