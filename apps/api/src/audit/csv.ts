/** One CSV record (RFC 4180): a field with a comma, quote, CR or LF is quoted, quotes doubled; CRLF ends it. */
export function csvRecord(fields: readonly (string | number | null | undefined)[]): string {
  return (
    fields
      .map((value) => {
        const text = value === null || value === undefined ? '' : String(value);
        return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
      })
      .join(',') + '\r\n'
  );
}

export const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8';

/** An instant in a file name: ISO 8601 basic (`20261201T093000Z`; milliseconds only when not zero). */
export const fileStamp = (d: Date) =>
  d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.000Z$/, 'Z');

/** Content-Disposition of a CSV download named `name` (ASCII only: ids, modes and stamps). */
export const csvAttachment = (name: string) => `attachment; filename="${name}.csv"`;

/** Whether the client asked for CSV: `format=csv`, or no `format` and an Accept header naming text/csv. */
export function wantsCsv(format: string | undefined, accept: string | undefined): boolean {
  if (format !== undefined) return format === 'csv';
  return (accept ?? '').split(',').some((part) => part.split(';')[0]!.trim().toLowerCase() === 'text/csv');
}
