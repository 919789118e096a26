/** A table of figures, as a section hands it back to the runner. */
export interface Table {
  readonly title: string;
  readonly headers: readonly string[];
  readonly rows: readonly (readonly (string | number)[])[];
  /** The key figures of this table, for the one summary table printed at the end. */
  readonly summary?: readonly SummaryRow[];
}

/** One line of the summary table. */
export interface SummaryRow {
  readonly measure: string;
  readonly figure: string;
  readonly p50?: string;
  readonly p99?: string;
  readonly baseline?: string;
  readonly ratio?: string;
}

export const SUMMARY_HEADERS = ['measure', 'figure', 'p50 ms', 'p99 ms', 'baseline', 'ratio'] as const;

export const summaryCells = (r: SummaryRow): string[] => [r.measure, r.figure, r.p50 ?? '-', r.p99 ?? '-', r.baseline ?? '-', r.ratio ?? '-'];

const NUMBER = /^-?[\d.,]+%?$|^NaN$|^-$/;

/**
 * Prints a title line and columns separated by two spaces, e.g.
 *
 *     Event store (PostgreSQL) appends
 *     writers  events/s  p50 ms  p99 ms
 *           1      1234    0.70    1.90
 *
 * A column of numbers is right-aligned, any other column left-aligned.
 */
export function formatTable(title: string, headers: readonly string[], rows: Table['rows']): string {
  const body = rows.map((row) => headers.map((_, column) => String(row[column] ?? '')));
  const cells = [headers.map(String), ...body];
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => row[column]!.length)));
  const numeric = headers.map((_, column) => body.every((row) => row[column] === '' || NUMBER.test(row[column]!)));
  const lines = cells.map((row) =>
    widths
      .map((width, column) => (numeric[column] ? row[column]!.padStart(width) : row[column]!.padEnd(width)))
      .join('  ')
      .trimEnd(),
  );
  return [title, ...lines].join('\n');
}

export function printTable(title: string, headers: readonly string[], rows: Table['rows']): void {
  process.stdout.write(`${formatTable(title, headers, rows)}\n\n`);
}

/** Whole numbers, no separators: 12345. */
export const integer = (n: number): string => Math.round(n).toString();

/** Fixed decimals: 0.70. */
export const fixed =
  (digits: number) =>
  (n: number): string =>
    n.toFixed(digits);
