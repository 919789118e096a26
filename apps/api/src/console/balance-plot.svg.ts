/**
 * The console's plot of a ledger's merchant balances over time: an inline SVG drawn on
 * the server (no script), three step lines (pending, available, reserved) with a
 * legend, a time axis (UTC) and an amount axis in rubles formatted from kopecks
 * exactly. Money stays integer kopecks throughout (the ticks are integers chosen with
 * integer arithmetic); only the pixel coordinates are fractional numbers.
 *
 * Pure: points in, markup out (tests: balance-plot.svg.spec.ts).
 */
import type { BalancePoint, Kopecks } from '#ledger';
import { escapeHtml, formatRubles } from '../pay/payment-page.html';

export const PLOT_SERIES = [
  { key: 'pending', title: 'В ожидании (pending)', color: '#c2410c' },
  { key: 'available', title: 'Доступно (available)', color: '#047857' },
  { key: 'reserved', title: 'В резерве (reserved)', color: '#1d4ed8' },
] as const;
export type PlotSeries = (typeof PLOT_SERIES)[number]['key'];

// The console card's inner width (72rem less its padding): the plot fills it at scale 1.
const WIDTH = 1112;
const HEIGHT = 340;
const LEFT = 120;
const RIGHT = 20;
const TOP = 40;
const BOTTOM = 48;

/** ⌊a / b⌋ for integers, exact (no float division). */
function floorDiv(a: number, b: number): number {
  const remainder = ((a % b) + b) % b;
  return (a - remainder) / b;
}
const ceilDiv = (a: number, b: number): number => -floorDiv(-a, b);

/**
 * Round amounts for an axis over [min, max] kopecks (min ≤ max): the smallest step of
 * 1, 2 or 5 × 10^k kopecks that needs at most `maxTicks` ticks, from the multiple of
 * the step at or below `min` to the one at or above `max`. Integers only.
 */
export function moneyTicks(min: Kopecks, max: Kopecks, maxTicks = 6): Kopecks[] {
  if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min > max) throw new RangeError(`bad axis range ${min}..${max}`);
  if (min === max) return [min];
  for (let power = 1; ; power *= 10) {
    for (const m of [1, 2, 5]) {
      const step = m * power;
      const low = floorDiv(min, step);
      const high = ceilDiv(max, step);
      if (high - low + 1 <= maxTicks) {
        const ticks: Kopecks[] = [];
        for (let k = low; k <= high; k += 1) ticks.push(k * step);
        return ticks;
      }
    }
  }
}

const MINUTE = 60_000;
/** Round steps of the time axis, in ms: minutes, hours, days (each divides the UTC day or is whole days). */
const TIME_STEPS = [
  ...[1, 2, 5, 10, 15, 30].map((m) => m * MINUTE),
  ...[1, 2, 3, 6, 12].map((h) => h * 60 * MINUTE),
  ...[1, 2, 7, 14, 28, 91, 182, 364].map((d) => d * 1440 * MINUTE),
];

/** The step of timeTicks over [t0, t1] ms: the smallest of TIME_STEPS (doubled past the last) giving at most `maxTicks`. */
export function timeStep(t0: number, t1: number, maxTicks = 6): number {
  for (let i = 0; ; i += 1) {
    const step = TIME_STEPS[i] ?? TIME_STEPS[TIME_STEPS.length - 1]! * 2 ** (i - TIME_STEPS.length + 1);
    if (floorDiv(t1, step) - ceilDiv(t0, step) + 1 <= maxTicks) return step;
  }
}

/**
 * Round times for an axis over [t0, t1] ms (UTC): every multiple within it of
 * timeStep(t0, t1); [t0] when no round time falls within it.
 */
export function timeTicks(t0: number, t1: number, maxTicks = 6): number[] {
  const step = timeStep(t0, t1, maxTicks);
  const ticks: number[] = [];
  for (let k = ceilDiv(t0, step); k <= floorDiv(t1, step); k += 1) ticks.push(k * step);
  return ticks.length > 0 ? ticks : [t0];
}

const pad = (n: number) => String(n).padStart(2, '0');

/** A time-axis label, UTC: the date alone when the ticks are whole days apart, else the date and the time. */
export function timeLabel(ms: number, stepMs: number): string {
  const d = new Date(ms);
  const date = `${pad(d.getUTCDate())}.${pad(d.getUTCMonth() + 1)}.${d.getUTCFullYear()}`;
  return stepMs % 86_400_000 === 0 ? date : `${date} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
}

const px = (n: number) => String(Math.round(n * 10) / 10);

/** The plot of the points (in entry order) as an `<svg>` element; a note instead of lines for a ledger without entries. */
export function renderBalancePlot(points: readonly BalancePoint[], title: string): string {
  const plotLeft = LEFT;
  const plotRight = WIDTH - RIGHT;
  const plotTop = TOP;
  const plotBottom = HEIGHT - BOTTOM;
  const open = `<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-labelledby="plot-title"><title id="plot-title">${escapeHtml(title)}</title>`;
  const legend = PLOT_SERIES.map(
    (s, i) =>
      `<g class="legend-item"><rect x="${plotLeft + i * 230}" y="10" width="14" height="14" fill="${s.color}"/><text x="${plotLeft + i * 230 + 20}" y="22" font-size="13" fill="#1b2330">${escapeHtml(s.title)}</text></g>`,
  ).join('');
  if (points.length === 0) {
    return `${open}${legend}<text x="${WIDTH / 2}" y="${HEIGHT / 2}" text-anchor="middle" font-size="15" fill="#667085">Проводок нет: баланс не менялся</text></svg>`;
  }

  // Amount axis: always includes zero.
  let low = 0;
  let high = 0;
  for (const p of points) {
    for (const s of PLOT_SERIES) {
      low = Math.min(low, p[s.key]);
      high = Math.max(high, p[s.key]);
    }
  }
  if (low === high) high = low + 100;
  const ticks = moneyTicks(low, high);
  const yMin = ticks[0]!;
  const yMax = ticks[ticks.length - 1]!;
  const y = (v: Kopecks) => plotBottom - ((v - yMin) / (yMax - yMin)) * (plotBottom - plotTop);

  // Time axis: entries concurrently decided may carry times a little out of order; the line never goes back.
  const times: number[] = [];
  for (const p of points) times.push(Math.max(Date.parse(p.at), times[times.length - 1] ?? -Infinity));
  const t0 = times[0]!;
  const t1 = times[times.length - 1]!;
  const span = t1 - t0;
  // The last point stands a little in from the right edge, so its step shows.
  const xSpanEnd = plotRight - 20;
  const x = (t: number) => (span === 0 ? plotLeft + 20 : plotLeft + 20 + ((t - t0) / span) * (xSpanEnd - plotLeft - 20));

  const grid = ticks
    .map(
      (v) =>
        `<line x1="${plotLeft}" x2="${plotRight}" y1="${px(y(v))}" y2="${px(y(v))}" stroke="${v === 0 ? '#667085' : '#e4e7ec'}" stroke-width="1"/>` +
        `<text x="${plotLeft - 8}" y="${px(y(v) + 4)}" text-anchor="end" font-size="12" fill="#475467">${escapeHtml(formatRubles(v))}</text>`,
    )
    .join('');
  const step = timeStep(t0, t1);
  const axis =
    `<line x1="${plotLeft}" x2="${plotLeft}" y1="${plotTop}" y2="${plotBottom}" stroke="#667085" stroke-width="1"/>` +
    timeTicks(t0, t1)
      .map(
        (t) =>
          `<line x1="${px(x(t))}" x2="${px(x(t))}" y1="${plotBottom}" y2="${plotBottom + 5}" stroke="#667085"/>` +
          // A label near the right edge ends at its tick, so it stays inside the plot.
          `<text x="${px(x(t))}" y="${plotBottom + 20}" text-anchor="${x(t) > WIDTH - 70 ? 'end' : 'middle'}" font-size="12" fill="#475467">${escapeHtml(timeLabel(t, step))}</text>`,
      )
      .join('') +
    `<text x="${plotRight}" y="${HEIGHT - 6}" text-anchor="end" font-size="11" fill="#667085">время UTC</text>`;

  const lines = PLOT_SERIES.map((s) => {
    let d = `M${px(x(times[0]!))} ${px(y(points[0]![s.key]))}`;
    for (let i = 1; i < points.length; i += 1) d += ` H${px(x(times[i]!))} V${px(y(points[i]![s.key]))}`;
    d += ` H${px(plotRight)}`;
    const last = points[points.length - 1]![s.key];
    return `<path class="series" data-series="${s.key}" d="${d}" fill="none" stroke="${s.color}" stroke-width="2"><title>${escapeHtml(`${s.title}: ${formatRubles(last)}`)}</title></path>`;
  }).join('');
  return `${open}${legend}${grid}${axis}${lines}</svg>`;
}
