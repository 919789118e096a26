import { types } from 'pg';

const parseAnyTimestamptz = types.getTypeParser(types.builtins.TIMESTAMPTZ) as (text: string) => Date;

/**
 * A `timestamptz` as PostgreSQL prints it with DateStyle ISO
 * (`2025-01-01 00:06:04.373123+00`, `... +05:30`, `... -03`), read without a regular
 * expression: the log's reads parse one per event, and `pg`'s parser (postgres-date)
 * was about 2 s of a million-event rebuild's Node CPU. The same instant as that parser
 * gives, to the millisecond (the digits below a millisecond are dropped, as it drops
 * them); anything else (years before 1000, BC, infinity, another DateStyle) goes to it.
 */
export function parseTimestamptz(text: string): Date {
  const length = text.length;
  if (length < 22 || !fixedFieldsAt(text)) return parseAnyTimestamptz(text);
  const year = digits(text, 0, 4);
  if (year < 1000) return parseAnyTimestamptz(text);
  let i = 19;
  let ms = 0;
  if (text.charCodeAt(i) === 46 /* . */) {
    i++;
    const start = i;
    while (i < length && isDigit(text.charCodeAt(i))) i++;
    if (i === start) return parseAnyTimestamptz(text);
    // The first three digits are the milliseconds; the rest is dropped.
    for (let k = start; k < start + 3; k++) ms = ms * 10 + (k < i ? text.charCodeAt(k) - 48 : 0);
  }
  const sign = text.charCodeAt(i);
  if (sign !== 43 /* + */ && sign !== 45 /* - */) return parseAnyTimestamptz(text);
  // (+|-)HH[:MM[:SS]] and nothing after it.
  const rest = length - i - 1;
  if (rest !== 2 && rest !== 5 && rest !== 8) return parseAnyTimestamptz(text);
  let offsetSeconds = 0;
  for (let part = 0; part * 3 < rest; part++) {
    const at = i + 1 + part * 3;
    if (part > 0 && text.charCodeAt(at - 1) !== 58 /* : */) return parseAnyTimestamptz(text);
    if (!isDigit(text.charCodeAt(at)) || !isDigit(text.charCodeAt(at + 1))) return parseAnyTimestamptz(text);
    offsetSeconds += digits(text, at, 2) * [3600, 60, 1][part]!;
  }
  const utc = Date.UTC(year, digits(text, 5, 2) - 1, digits(text, 8, 2), digits(text, 11, 2), digits(text, 14, 2), digits(text, 17, 2), ms);
  return new Date(utc - (sign === 45 ? -1 : 1) * offsetSeconds * 1000);
}

/** `YYYY-MM-DD HH:MM:SS` in the first 19 characters: digits and separators where they belong. */
function fixedFieldsAt(text: string): boolean {
  for (let k = 0; k < 19; k++) {
    const c = text.charCodeAt(k);
    const expected = k === 4 || k === 7 ? 45 : k === 10 ? 32 : k === 13 || k === 16 ? 58 : -1;
    if (expected === -1 ? !isDigit(c) : c !== expected) return false;
  }
  return true;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let k = at; k < at + count; k++) value = value * 10 + text.charCodeAt(k) - 48;
  return value;
}
