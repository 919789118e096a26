/**
 * parseTimestamptz, the log reads' parser of `created_at`, gives the same instant as
 * `pg`'s own parser (postgres-date) for what PostgreSQL prints in any time zone, and
 * hands what it does not read itself to that parser.
 */
import { types } from 'pg';
import { parseTimestamptz } from '#event-store/postgres';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

const pgParser = types.getTypeParser(types.builtins.TIMESTAMPTZ) as (text: string) => Date | number;
const instant = (value: Date | number) => (value instanceof Date ? value.getTime() : value);

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

describe('parseTimestamptz', () => {
  it('reads what PostgreSQL prints as postgres-date does, in time zones of whole hours, half hours, 45 minutes and local mean time', async () => {
    const rng = seededRandom('timestamptz');
    const client = await db.pool.connect();
    try {
      const differ: string[] = [];
      let compared = 0;
      for (const zone of [
        'UTC',
        'Europe/Moscow',
        'Asia/Kolkata',
        'Asia/Kathmandu',
        'America/St_Johns',
        'America/Sao_Paulo',
        'Pacific/Chatham',
        'Africa/Monrovia',
      ]) {
        await client.query(`SET TIME ZONE ${client.escapeLiteral(zone)}`);
        // Instants from 1000 to 2300 (some before time zones: offsets in seconds), with 0 to 6 digits of fraction.
        const epochs = Array.from({ length: 400 }, () => rng.int(-30_610_224_000, 10_413_792_000));
        const micros = Array.from({ length: 400 }, () => rng.int(0, 999_999) * [1, 10, 1000, 100_000, 1_000_000][rng.int(0, 4)]!);
        const printed = await client.query<[string]>({
          text: `SELECT (to_timestamp(e) + m * interval '1 microsecond')::text FROM unnest($1::bigint[], $2::bigint[]) AS u(e, m)`,
          values: [epochs, micros.map((m) => m % 1_000_000)],
          rowMode: 'array',
        });
        for (const [text] of printed.rows) {
          compared++;
          if (instant(parseTimestamptz(text)) !== instant(pgParser(text))) differ.push(`${zone}: ${text}`);
        }
      }
      expect({ compared, differ }).toEqual({ compared: 3_200, differ: [] });
    } finally {
      await client.query('RESET TIME ZONE');
      client.release();
    }
  });

  it('hands years before 1000, BC, infinity and other shapes to postgres-date', () => {
    for (const text of [
      '0050-06-01 12:00:00+00',
      '0999-12-31 23:59:59.999+03',
      '2000-01-01 00:00:00+00 BC',
      '2025-01-01 00:00:00',
      '2025-01-01T00:00:00Z',
      '2025-01-01 00:00:00.+00',
      '2025-01-01 00:00:00+0',
    ]) {
      expect({ text, instant: instant(parseTimestamptz(text)) }).toEqual({ text, instant: instant(pgParser(text)) });
    }
    expect(parseTimestamptz('infinity')).toBe(Infinity);
    expect(parseTimestamptz('-infinity')).toBe(-Infinity);
  });

  it('reads a value to the millisecond, dropping the digits below it, with its offset', () => {
    expect(parseTimestamptz('2025-01-01 00:06:04.373999+00').toISOString()).toBe('2025-01-01T00:06:04.373Z');
    expect(parseTimestamptz('2025-01-01 03:06:04.5+03').toISOString()).toBe('2025-01-01T00:06:04.500Z');
    expect(parseTimestamptz('2024-12-31 18:36:04-05:30').toISOString()).toBe('2025-01-01T00:06:04.000Z');
    expect(parseTimestamptz('1900-01-01 00:53:28+00:53:28').toISOString()).toBe('1900-01-01T00:00:00.000Z');
  });
});
