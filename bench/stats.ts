/** Milliseconds on a monotonic clock, with sub-microsecond resolution. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Starts a stopwatch; the returned function gives the milliseconds elapsed since. */
export function startTimer(): () => number {
  const start = process.hrtime.bigint();
  return () => Number(process.hrtime.bigint() - start) / 1e6;
}

/**
 * Percentiles (nearest rank) of a set of samples, e.g. percentiles(latencies, [50, 99]).
 * NaN for an empty set.
 */
export function percentiles(samples: readonly number[], ps: readonly number[]): number[] {
  const sorted = Float64Array.from(samples).sort();
  return ps.map((p) => {
    if (sorted.length === 0) return Number.NaN;
    const rank = Math.ceil((p / 100) * sorted.length);
    return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
