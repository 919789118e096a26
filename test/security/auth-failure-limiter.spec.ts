/**
 * The failed-authentication limits (libs/payments/src/access/auth-failures.ts), pure: per
 * client address and overall, fixed one-minute windows on the clock passed in.
 */
import { AuthFailureLimiter, clientKeyOf } from '#payments/access';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);

describe('AuthFailureLimiter', () => {
  const limits = { perAddress: 20, overall: 100, windowSeconds: 60 };

  it('refuses an address past 20 failures until its window ends, with the seconds left', () => {
    const limiter = new AuthFailureLimiter(limits);
    for (let i = 0; i < 20; i++) {
      expect(limiter.refusal('203.0.113.7', at(0))).toBeNull();
      limiter.recordFailure('203.0.113.7', at(0));
    }
    expect(limiter.refusal('203.0.113.7', at(0))).toBe(60);
    expect(limiter.refusal('203.0.113.7', at(59.5))).toBe(1);
    expect(limiter.refusal('203.0.113.7', at(60))).toBeNull();
    // Another address is not touched.
    expect(limiter.refusal('203.0.113.8', at(1))).toBeNull();
  });

  it('past the overall limit refuses every address that failed in the window, never one without failures', () => {
    const limiter = new AuthFailureLimiter(limits);
    for (let a = 0; a < 50; a++) {
      limiter.recordFailure(`198.51.100.${a}`, at(10));
      limiter.recordFailure(`198.51.100.${a}`, at(10));
    }
    // 100 failures overall, 2 per address: each failed address now waits for the overall window (from t=10 s).
    expect(limiter.refusal('198.51.100.1', at(20))).toBe(50);
    expect(limiter.refusal('198.51.100.49', at(20))).toBe(50);
    // A merchant whose requests authenticate is never refused.
    expect(limiter.refusal('192.0.2.77', at(20))).toBeNull();
    // Its first failure still gets a lookup; then it is refused too.
    limiter.recordFailure('192.0.2.77', at(20));
    expect(limiter.refusal('192.0.2.77', at(20))).toBe(50);
    // When the overall window ends, the addresses' own windows decide again.
    expect(limiter.refusal('198.51.100.1', at(70))).toBeNull();
  });

  it('below the overall limit an address with a few failures goes on', () => {
    const limiter = new AuthFailureLimiter(limits);
    for (let i = 0; i < 19; i++) limiter.recordFailure('203.0.113.9', at(0));
    expect(limiter.refusal('203.0.113.9', at(1))).toBeNull();
  });

  it('counts an IPv6 client by its /64 and an IPv4-mapped one as IPv4', () => {
    expect(clientKeyOf('2001:db8:1:2:aaaa::1')).toBe(clientKeyOf('2001:db8:1:2:ffff::9'));
    expect(clientKeyOf('2001:db8:1:2::1')).not.toBe(clientKeyOf('2001:db8:1:3::1'));
    expect(clientKeyOf('::ffff:192.0.2.1')).toBe('192.0.2.1');
    const limiter = new AuthFailureLimiter(limits);
    for (let i = 0; i < 20; i++) limiter.recordFailure(`2001:db8:1:2::${i.toString(16)}`, at(0));
    expect(limiter.refusal('2001:db8:1:2:dead:beef:0:1', at(1))).toBe(59);
    expect(limiter.refusal('2001:db8:1:3::1', at(1))).toBeNull();
  });

  it('remembers a bounded number of addresses (expired ones first, then the oldest)', () => {
    const limiter = new AuthFailureLimiter(limits, 100);
    for (let i = 0; i < 150; i++) limiter.recordFailure(`10.0.${Math.floor(i / 250)}.${i % 250}`, at(0));
    expect(limiter.trackedClients).toBe(100);
    for (let i = 0; i < 100; i++) limiter.recordFailure(`10.1.0.${i}`, at(61));
    expect(limiter.trackedClients).toBe(100);
  });
});
