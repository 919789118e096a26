import type { BalancePoint } from '#ledger';
import { formatRubles } from '../pay/payment-page.html';
import { moneyTicks, renderBalancePlot, timeLabel, timeStep, timeTicks } from './balance-plot.svg';

const point = (at: string, entry: number, pending: number, available: number, reserved: number): BalancePoint => ({ at, entry, pending, available, reserved });
const seriesPaths = (svg: string) => [...svg.matchAll(/<path class="series" data-series="(\w+)" d="([^"]+)"/g)].map((m) => ({ series: m[1], d: m[2]! }));

describe('formatRubles (kopecks → rubles, exact)', () => {
  it.each([
    [0, '0,00 ₽'],
    [1, '0,01 ₽'],
    [-1, '-0,01 ₽'],
    [100, '1,00 ₽'],
    [123_456_789, '1 234 567,89 ₽'],
    [-100_000_000_000, '-1 000 000 000,00 ₽'],
    [9_007_199_254_740_991, '90 071 992 547 409,91 ₽'],
  ])('%i kopecks → %s', (kopecks, text) => {
    expect(formatRubles(kopecks).replace(/\u00a0/g, ' ')).toBe(text);
  });
});

describe('moneyTicks (the amount axis, integer kopecks)', () => {
  it('a single value gives one tick', () => {
    expect(moneyTicks(0, 0)).toEqual([0]);
  });
  it('round steps of 1, 2 or 5 × 10^k kopecks covering the range, at most 6 ticks', () => {
    expect(moneyTicks(0, 100)).toEqual([0, 20, 40, 60, 80, 100]);
    expect(moneyTicks(0, 97_000)).toEqual([0, 20_000, 40_000, 60_000, 80_000, 100_000]);
    expect(moneyTicks(-5, 3)).toEqual([-6, -4, -2, 0, 2, 4]);
    expect(moneyTicks(-150_000, 0)).toEqual([-150_000, -100_000, -50_000, 0]);
    expect(moneyTicks(0, 1)).toEqual([0, 1]);
  });
  it('any range: integer ticks, ascending, covering it, at most 6', () => {
    let seed = 20261123;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    console.log('moneyTicks seed 20261123');
    for (let i = 0; i < 2000; i += 1) {
      const a = Math.round((random() - 0.5) * 10 ** Math.floor(random() * 14));
      const b = a + Math.round(random() * 10 ** Math.floor(random() * 14));
      const ticks = moneyTicks(a, b);
      expect(ticks.every((t) => Number.isSafeInteger(t))).toBe(true);
      expect(ticks.length).toBeLessThanOrEqual(6);
      expect(ticks[0]!).toBeLessThanOrEqual(a);
      expect(ticks[ticks.length - 1]!).toBeGreaterThanOrEqual(b);
      for (let k = 1; k < ticks.length; k += 1) expect(ticks[k]!).toBeGreaterThan(ticks[k - 1]!);
    }
  });
  it('refuses a reversed or fractional range', () => {
    expect(() => moneyTicks(5, 1)).toThrow(RangeError);
    expect(() => moneyTicks(0, 1.5)).toThrow(RangeError);
  });
});

describe('timeLabel (UTC)', () => {
  it('the date alone when the ticks are whole days apart; date and time otherwise', () => {
    const t = Date.parse('2026-11-23T20:05:00.000Z');
    expect(timeLabel(t, 86_400_000)).toBe('23.11.2026');
    expect(timeLabel(t, 7 * 86_400_000)).toBe('23.11.2026');
    expect(timeLabel(t, 12 * 3_600_000)).toBe('23.11.2026 20:05');
    expect(timeLabel(t, 3_600_000)).toBe('23.11.2026 20:05');
  });
  it('a span of 2 to 3.5 days ticked every 6 or 12 hours: each label its own, noon not shown as a date', () => {
    for (const [from, to] of [
      ['2026-12-01T01:06:26Z', '2026-12-04T01:07:02Z'],
      ['2026-12-01T00:00:00Z', '2026-12-03T06:00:00Z'],
    ] as const) {
      const t0 = Date.parse(from);
      const t1 = Date.parse(to);
      const step = timeStep(t0, t1);
      expect(step % 86_400_000).not.toBe(0);
      const labels = timeTicks(t0, t1).map((t) => timeLabel(t, step));
      expect(new Set(labels).size).toBe(labels.length);
      expect(labels).toContain('02.12.2026 12:00');
    }
  });
});

describe('timeTicks (the time axis, round UTC times)', () => {
  const at = (iso: string) => Date.parse(iso);
  const labels = (t0: string, t1: string) => timeTicks(at(t0), at(t1)).map((t) => new Date(t).toISOString().slice(5, 16));
  it('every 5, 10, 15 or 30 minutes, hours or days, chosen from the span', () => {
    expect(labels('2026-11-23T10:03:17Z', '2026-11-23T10:24:00Z')).toEqual(['11-23T10:05', '11-23T10:10', '11-23T10:15', '11-23T10:20']);
    expect(labels('2026-11-23T10:07:00Z', '2026-11-23T11:11:00Z')).toEqual(['11-23T10:15', '11-23T10:30', '11-23T10:45', '11-23T11:00']);
    expect(labels('2026-11-23T10:07:00Z', '2026-11-23T12:41:00Z')).toEqual(['11-23T10:30', '11-23T11:00', '11-23T11:30', '11-23T12:00', '11-23T12:30']);
    expect(labels('2026-11-23T09:40:00Z', '2026-11-23T20:05:00Z')).toEqual([
      '11-23T10:00',
      '11-23T12:00',
      '11-23T14:00',
      '11-23T16:00',
      '11-23T18:00',
      '11-23T20:00',
    ]);
    expect(labels('2026-11-20T10:00:00Z', '2026-11-25T10:00:00Z')).toEqual(['11-21T00:00', '11-22T00:00', '11-23T00:00', '11-24T00:00', '11-25T00:00']);
  });
  it('no round time within the span: its start alone', () => {
    expect(timeTicks(at('2026-11-23T10:00:05Z'), at('2026-11-23T10:00:40Z'))).toEqual([at('2026-11-23T10:00:05Z')]);
    expect(timeTicks(at('2026-11-23T10:00:05Z'), at('2026-11-23T10:00:05Z'))).toEqual([at('2026-11-23T10:00:05Z')]);
  });
  it('any span: at most 6 ticks, ascending, within it, each a whole number of minutes', () => {
    let seed = 20261127;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    console.log('timeTicks seed 20261127');
    for (let i = 0; i < 2000; i += 1) {
      const t0 = at('2020-01-01T00:00:00Z') + Math.round(random() * 1e11);
      const t1 = t0 + Math.round(random() * 10 ** Math.floor(random() * 12));
      const ticks = timeTicks(t0, t1);
      expect(ticks.length).toBeLessThanOrEqual(6);
      expect(ticks[0]!).toBeGreaterThanOrEqual(t0);
      expect(ticks[ticks.length - 1]!).toBeLessThanOrEqual(t1);
      for (let k = 1; k < ticks.length; k += 1) expect(ticks[k]!).toBeGreaterThan(ticks[k - 1]!);
      if (ticks.length > 1 || ticks[0] !== t0) expect(ticks.every((t) => t % 60_000 === 0)).toBe(true);
    }
  });
});

describe('renderBalancePlot (inline SVG, three step lines)', () => {
  it('an empty history: the legend and a note, no lines', () => {
    const svg = renderBalancePlot([], 'Баланс');
    expect(svg).toMatch(/^<svg [^>]*viewBox="0 0 1112 340"/);
    expect(seriesPaths(svg)).toEqual([]);
    expect(svg).toContain('Проводок нет');
    expect(svg).toContain('В ожидании (pending)');
  });

  it('one entry: three horizontal lines, an axis from 0 with the amount in rubles', () => {
    const svg = renderBalancePlot([point('2026-11-23T10:00:00.000Z', 1, 97_000, 0, 0)], 'Баланс');
    const paths = seriesPaths(svg);
    expect(paths.map((p) => p.series)).toEqual(['pending', 'available', 'reserved']);
    for (const p of paths) expect(p.d).toMatch(/^M[\d.]+ [\d.]+ H[\d.]+$/);
    expect(svg.replace(/\u00a0/g, ' ')).toContain('>1 000,00 ₽<');
    expect(svg.replace(/\u00a0/g, ' ')).toContain('>0,00 ₽<');
    expect(svg).toContain('23.11.2026 10:00');
  });

  it('many entries: a step per point, never going back in time, values at their heights', () => {
    const points = [
      point('2026-11-20T10:00:00.000Z', 1, 100, 0, 0),
      point('2026-11-22T10:00:00.000Z', 2, 0, 100, 0),
      // Decided concurrently: a little earlier than the one before it.
      point('2026-11-22T09:59:59.000Z', 3, 0, 50, 50),
      point('2026-11-25T10:00:00.000Z', 4, 0, 0, 0),
    ];
    const svg = renderBalancePlot(points, 'Баланс');
    const pending = seriesPaths(svg).find((p) => p.series === 'pending')!.d;
    const steps = [...pending.matchAll(/H([\d.]+) V([\d.]+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
    expect(steps).toHaveLength(3);
    const xs = [Number(/^M([\d.]+)/.exec(pending)![1]), ...steps.map((s) => s[0]!)];
    for (let i = 1; i < xs.length; i += 1) expect(xs[i]!).toBeGreaterThanOrEqual(xs[i - 1]!);
    // pending 100 → 0: the later steps sit lower on the screen (higher y) than the first point.
    expect(steps[0]![1]).toBeGreaterThan(Number(/^M[\d.]+ ([\d.]+)/.exec(pending)![1]));
    // The time axis: a tick at each UTC midnight within the span.
    expect([...svg.matchAll(/>(\d\d\.11\.2026)</g)].map((m) => m[1])).toEqual(['21.11.2026', '22.11.2026', '23.11.2026', '24.11.2026', '25.11.2026']);
  });

  it('three days of history: 12-hour ticks labelled with their time, no date twice', () => {
    const svg = renderBalancePlot([point('2026-12-01T01:06:26.000Z', 1, 100, 0, 0), point('2026-12-04T01:07:02.000Z', 2, 0, 100, 0)], 'Баланс');
    expect([...svg.matchAll(/>(\d\d\.12\.2026[^<]*)</g)].map((m) => m[1])).toEqual([
      '01.12.2026 12:00',
      '02.12.2026 00:00',
      '02.12.2026 12:00',
      '03.12.2026 00:00',
      '03.12.2026 12:00',
      '04.12.2026 00:00',
    ]);
  });

  it('negative and zero values: the axis reaches below zero and the zero line is drawn', () => {
    const svg = renderBalancePlot([point('2026-11-23T10:00:00.000Z', 1, 0, -250, 0), point('2026-11-23T11:00:00.000Z', 2, 0, 0, 0)], 'Баланс');
    const text = svg.replace(/\u00a0/g, ' ');
    expect(text).toContain('>-2,50 ₽<');
    // The zero line is drawn darker than the other grid lines.
    expect(text).toMatch(/stroke="#667085" stroke-width="1"\/><text [^>]*>0,00 ₽</);
    expect(seriesPaths(svg)).toHaveLength(3);
  });

  it('escapes the title', () => {
    expect(renderBalancePlot([], '<script>"x"</script>')).toContain('<title id="plot-title">&lt;script&gt;&quot;x&quot;&lt;/script&gt;</title>');
  });
});
