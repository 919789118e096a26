// Up to nine fraction digits (nanoseconds): .NET writes 7, Go and Java up to 9. ISO 8601
// bounds them nowhere, but Node's Date misreads ten or more (".0999999999" as .999 s).
const ISO_DATETIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Whether `text` is an ISO 8601 date and time (with its offset) that names a real
 * calendar moment: `Date` alone reads 2031-02-30 as 2 March and 24:00 as the next day.
 * The API's `from`/`to`/`asOf` and the commands' `--from`/`--to` take only these.
 */
export function isCalendarInstant(text: string): boolean {
  const match = ISO_DATETIME.exec(text);
  if (!match) return false;
  const [year, month, day, hour] = match.slice(1, 5).map(Number) as [number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && !Number.isNaN(new Date(text).getTime());
}
