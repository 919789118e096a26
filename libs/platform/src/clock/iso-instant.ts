// Up to nine fraction digits (nanoseconds): .NET writes 7, Go and Java up to 9. ISO 8601
// bounds them nowhere, but Node's Date misreads ten or more (".0999999999" as .999 s).
const ISO_DATETIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** The instants whose UTC form has a four-digit year: toISOString() writes them back as the API reads them. */
const EARLIEST_INSTANT = Date.parse('0000-01-01T00:00:00.000Z');
const LATEST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * What is wrong with `text` as an instant, or null: `format`, not an ISO 8601 date and
 * time (with its offset) of a real calendar moment (`Date` alone reads 2031-02-30 as
 * 2 March and 24:00 as the next day); `range`, one outside 0000-01-01T00:00:00Z ..
 * 9999-12-31T23:59:59.999Z in UTC (0000-01-01T00:00+03:00 would be echoed as -000001-...).
 */
export function calendarInstantProblem(text: string): 'format' | 'range' | null {
  const match = ISO_DATETIME.exec(text);
  if (!match) return 'format';
  const [year, month, day, hour] = match.slice(1, 5).map(Number) as [number, number, number, number];
  const leapYear = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0); // not Date.UTC: it reads years 0..99 as 1900..1999
  const daysInMonth = month === 2 ? (leapYear ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;
  const instant = new Date(text).getTime();
  if (!(month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && !Number.isNaN(instant))) return 'format';
  return instant < EARLIEST_INSTANT || instant > LATEST_INSTANT ? 'range' : null;
}

/**
 * Whether `text` is an ISO 8601 date and time of a real calendar moment within the years
 * 0000..9999 in UTC (calendarInstantProblem). The API's `from`/`to`/`asOf` and the
 * commands' `--from`/`--to` take only these.
 */
export function isCalendarInstant(text: string): boolean {
  return calendarInstantProblem(text) === null;
}
