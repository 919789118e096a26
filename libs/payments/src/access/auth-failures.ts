import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** What failed: a merchant's secret key (Bearer), an HMAC request (public id, timestamp, signature), the operator token. */
export type AuthFailureKind = 'secret_key' | 'signature' | 'operator_token';
export const AUTH_FAILURE_KINDS: readonly AuthFailureKind[] = ['secret_key', 'signature', 'operator_token'];

export interface AuthFailureLimits {
  /** Failed authentications one client address may have in a window; past it, its requests are refused before any lookup. */
  readonly perAddress: number;
  /** Failed authentications of every address together in a window; past it, each address that has failed in the window is refused. */
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
  const bare = address.replace(/%.*$/, '');
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
 * Failed authentications, limited per client address and overall; pure, in memory
 * (one per API process), every decision on the `now` passed in (the gateway clock).
 *
 * Fixed windows from an address's first failure. An address past `perAddress`
 * failures in its window is refused until the window ends. Past `overall` failures
 * of all addresses in the process's window, every address that has failed in its
 * own window is refused until the overall window ends, so a flood from many
 * addresses costs at most one lookup per address. An address without failures is
 * never refused: a merchant whose requests authenticate keeps working while others
 * flood. Nothing here touches a key's request limit, which counts only requests
 * whose key or signature holds.
 */
export class AuthFailureLimiter {
  private readonly byClient = new Map<string, Window>();
  private all: Window = { start: 0, failures: 0 };

  constructor(
    private readonly limits: AuthFailureLimits = DEFAULT_AUTH_FAILURE_LIMITS,
    /** The most client addresses remembered at once (expired ones go first, then the oldest). */
    private readonly maxClients = 100_000,
  ) {}

  /** Seconds the client must wait before it may try again, or null when it may go on. */
  refusal(address: string, now: Date): number | null {
    const t = now.getTime();
    const own = this.live(this.byClient.get(clientKeyOf(address)), t);
    if (!own) return null;
    if (own.failures >= this.limits.perAddress) return this.secondsLeft(own, t);
    const all = this.live(this.all, t);
    if (all && all.failures >= this.limits.overall) return this.secondsLeft(all, t);
    return null;
  }

  /** Counts one failed authentication of the client. */
  recordFailure(address: string, now: Date): void {
    const t = now.getTime();
    const key = clientKeyOf(address);
    const own = this.live(this.byClient.get(key), t);
    if (own) own.failures += 1;
    else {
      this.byClient.delete(key);
      this.byClient.set(key, { start: t, failures: 1 });
      this.bound(t);
    }
    const all = this.live(this.all, t);
    if (all) all.failures += 1;
    else this.all = { start: t, failures: 1 };
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
