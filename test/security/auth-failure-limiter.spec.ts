/**
 * The failed-authentication limits (libs/payments/src/access/auth-failures.ts), pure: per
 * client address and overall, fixed one-minute windows on the clock passed in. Only
 * failures reach the limiter; it answers whether each one is within the limits (null:
 * 401) or past them (the seconds to wait: 429).
 */
import { AuthFailureLimiter, clientKeyOf } from '#payments/access';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);

describe('AuthFailureLimiter', () => {
  const limits = { perAddress: 20, overall: 100, windowSeconds: 60 };

  it("an address's first 20 failures in its window are within the limit, the next ones wait until the window ends", () => {
    const limiter = new AuthFailureLimiter(limits);
    for (let i = 0; i < 20; i++) expect(limiter.fail('203.0.113.7', at(0))).toBeNull();
    expect(limiter.fail('203.0.113.7', at(0))).toBe(60);
    expect(limiter.fail('203.0.113.7', at(59.5))).toBe(1);
    // A new window: the count starts again.
    expect(limiter.fail('203.0.113.7', at(60))).toBeNull();
    // Another address is not touched.
    expect(limiter.fail('203.0.113.8', at(1))).toBeNull();
  });

  it('past the overall limit every failure waits for the overall window, from any address', () => {
    const limiter = new AuthFailureLimiter(limits);
    for (let a = 0; a < 50; a++) {
      expect(limiter.fail(`198.51.100.${a}`, at(10))).toBeNull();
      expect(limiter.fail(`198.51.100.${a}`, at(10))).toBeNull();
    }
    // 100 failures overall, 2 per address: the 101st, wherever it comes from, waits for the overall window (from t=10 s).
    expect(limiter.fail('198.51.100.1', at(20))).toBe(50);
    expect(limiter.fail('192.0.2.77', at(20))).toBe(50);
    // Said as the overall limit's: that address is within its own.
    expect(limiter.refusal('192.0.2.78', at(20))).toEqual({ seconds: 50, by: 'overall' });
    // When the overall window ends, the addresses' own windows decide again.
    expect(limiter.fail('198.51.100.2', at(70))).toBeNull();
  });

  it('the longer of the two waits when an address is past both limits', () => {
    const limiter = new AuthFailureLimiter({ perAddress: 5, overall: 10, windowSeconds: 60 });
    for (let i = 0; i < 5; i++) limiter.fail('203.0.113.1', at(0));
    for (let i = 0; i < 5; i++) limiter.fail('203.0.113.2', at(30));
    // 203.0.113.2: its own window (from 30 s) ends at 90, the overall one (from 0) at 60.
    expect(limiter.fail('203.0.113.2', at(31))).toBe(59);
    expect(limiter.refusal('203.0.113.2', at(32))).toEqual({ seconds: 58, by: 'address' });
  });

  it('counts an IPv6 client by its /64 and an IPv4-mapped one as IPv4', () => {
    expect(clientKeyOf('2001:db8:1:2:aaaa::1')).toBe(clientKeyOf('2001:db8:1:2:ffff::9'));
    expect(clientKeyOf('2001:db8:1:2::1')).not.toBe(clientKeyOf('2001:db8:1:3::1'));
    expect(clientKeyOf('::ffff:192.0.2.1')).toBe('192.0.2.1');
    const limiter = new AuthFailureLimiter(limits);
    for (let i = 0; i < 20; i++) expect(limiter.fail(`2001:db8:1:2::${i.toString(16)}`, at(0))).toBeNull();
    expect(limiter.fail('2001:db8:1:2:dead:beef:0:1', at(1))).toBe(59);
    expect(limiter.fail('2001:db8:1:3::1', at(1))).toBeNull();
  });

  it('remembers a bounded number of addresses (expired ones first, then the oldest)', () => {
    const limiter = new AuthFailureLimiter(limits, 100);
    for (let i = 0; i < 150; i++) limiter.fail(`10.0.${Math.floor(i / 250)}.${i % 250}`, at(0));
    expect(limiter.trackedClients).toBe(100);
    for (let i = 0; i < 100; i++) limiter.fail(`10.1.0.${i}`, at(61));
    expect(limiter.trackedClients).toBe(100);
  });
});
