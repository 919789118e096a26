/**
 * A rebuild's pages write their new rows by COPY in binary format (copyRowsInto,
 * decision 0095): each value in its column type's binary form. What goes in must come
 * back from PostgreSQL as it went in, for every type the read models use, whatever
 * the chunk a value falls on; a value its column's type does not take is refused with
 * the column named, the COPY abandoned (nothing of it stored) and the connection left
 * usable. (That each read model declares its columns' types right: rebuild-copy.spec.ts,
 * where what COPY writes sums as what the upserts write.)
 */
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { copyBinaryChunks, CopyColumn, copyRowsInto, copyRowsUnlessTaken, CopyValue, inTransaction } from '#platform/database';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const EVERY_TYPE: CopyColumn[] = [
  { name: 'n', type: 'integer' },
  { name: 't', type: 'text' },
  { name: 'u', type: 'uuid' },
  { name: 's', type: 'smallint' },
  { name: 'b', type: 'bigint' },
  { name: 'at', type: 'timestamptz' },
  { name: 'j', type: 'json' },
  { name: 'jb', type: 'jsonb' },
  { name: 'f', type: 'boolean' },
];
const CREATE_EVERY_TYPE = `CREATE TEMP TABLE copied (n integer, t text, u uuid, s smallint, b bigint, at timestamptz, j json, jb jsonb, f boolean) ON COMMIT DROP`;

const ODD_TEXT = [
  'tab\there',
  'new\nline',
  'cr\rlf\r\n',
  'back\\slash',
  '\\N',
  'кириллица ✓ 𝄞',
  '',
  ' lead and trail ',
  'quote " and \' ',
  'nul-free \u0001\u007f',
];

/** The bytes of one value in COPY's binary format, written plainly: the oracle for copyBinaryChunks. */
function referenceField(type: CopyColumn['type'], value: CopyValue): Buffer {
  if (value === null) return Buffer.from([0xff, 0xff, 0xff, 0xff]);
  let body: Buffer;
  switch (type) {
    case 'text':
      body = Buffer.from(value as string, 'utf8');
      break;
    case 'json':
      body = Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8');
      break;
    case 'jsonb':
      body = Buffer.concat([Buffer.from([1]), Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8')]);
      break;
    case 'uuid':
      body = Buffer.from((value as string).replaceAll('-', ''), 'hex');
      break;
    case 'bigint':
      body = Buffer.alloc(8);
      body.writeBigInt64BE(BigInt(value as number | bigint | string));
      break;
    case 'timestamptz':
      body = Buffer.alloc(8);
      body.writeBigInt64BE(BigInt((value as Date).getTime() - Date.UTC(2000, 0, 1)) * 1000n);
      break;
    default:
      throw new Error(`no reference for ${type}`);
  }
  const length = Buffer.alloc(4);
  length.writeInt32BE(body.length);
  return Buffer.concat([length, body]);
}

describe('COPY in binary format', () => {
  it('every type comes back from PostgreSQL as it went in, in chunks of many rows', async () => {
    const rng = seededRandom('copy binary round trip');
    const rows: CopyValue[][] = [];
    /** Each timestamp as given, to be read by PostgreSQL's own parser for comparison. */
    const stamps: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const uuid = randomUUID();
      const ms = Date.UTC(2026, 0, 1) + rng.int(-1e12, 1e12);
      const variant = i % 5;
      const iso = new Date(ms).toISOString();
      // A Date; an ISO string as toISOString writes it; with six decimals; with an offset; without decimals.
      const stamp: Date | string =
        variant === 0
          ? new Date(ms)
          : variant === 1
            ? iso
            : variant === 2
              ? iso.replace('Z', `${rng.int(0, 999).toString().padStart(3, '0')}Z`)
              : variant === 3
                ? iso.replace('Z', i % 2 === 0 ? '+05:30' : '-11:00')
                : `${iso.slice(0, 19)}Z`;
      // Now and then a leap day and the turn of a century (2000 leap, 2100 not: its March 1st).
      const given =
        i % 1000 === 7 ? '2024-02-29T23:59:59.999Z' : i % 1000 === 8 ? '2000-02-29T00:00:00.000Z' : i % 1000 === 9 ? '2100-03-01T00:00:00.000Z' : stamp;
      stamps.push(given instanceof Date ? given.toISOString() : given);
      const text = ODD_TEXT[i % ODD_TEXT.length]!;
      rows.push([
        i,
        i % 7 === 0 ? null : text,
        i % 3 === 0 ? uuid.toUpperCase() : i % 3 === 1 ? uuid.replaceAll('-', '') : uuid,
        [0, 32_767, -32_768, rng.int(-32_768, 32_767)][i % 4]!,
        [BigInt(rng.int(-1e9, 1e9)) * 1_000_000_000n, 9_223_372_036_854_775_807n, -9_223_372_036_854_775_808n, rng.int(-1e15, 1e15), String(-i)][i % 5]!,
        given,
        i % 11 === 0 ? `{"raw": "json text as given", "i": ${i}}` : { text, i, nested: { list: [i, null, 'x\\y"z'] } },
        { text, i },
        i % 2 === 0,
      ]);
    }
    // The rows are read back in the transaction and checked after it: checking thousands
    // of rows inside it kept the session idle in its transaction past the serving limit (10 s) on a loaded machine.
    const back = await inTransaction(db.pool, async (tx) => {
      await tx.query(CREATE_EVERY_TYPE);
      await tx.query('CREATE TEMP TABLE stamps (n integer, given text) ON COMMIT DROP');
      expect(await copyRowsInto(tx, 'copied', EVERY_TYPE, rows)).toBe(rows.length);
      await tx.query('INSERT INTO stamps SELECT * FROM unnest($1::int[], $2::text[])', [rows.map((_, i) => i), stamps]);
      return tx.query<{ n: number; t: string | null; u: string; s: number; b: string; j: string; jb: unknown; f: boolean; same_instant: boolean }>(
        `SELECT c.n, c.t, c.u::text AS u, c.s, c.b::text AS b, c.j::text AS j, c.jb, c.f, c.at = s.given::timestamptz AS same_instant
         FROM copied c JOIN stamps s USING (n) ORDER BY c.n`,
      );
    });
    expect(back.rows).toHaveLength(rows.length);
    back.rows.forEach((r, i) => {
      const row = rows[i]!;
      const given = row[2] as string;
      expect([r.n, r.t, r.u, r.s, r.b, r.f, r.same_instant]).toEqual([
        i,
        row[1],
        given.length === 32 ? given.replace(/(.{8})(.{4})(.{4})(.{4})(.{12})/, '$1-$2-$3-$4-$5').toLowerCase() : given.toLowerCase(),
        row[3],
        String(row[4]),
        row[8],
        true,
      ]);
      // json keeps the very text; jsonb the value.
      expect(r.j).toBe(typeof row[6] === 'string' ? row[6] : JSON.stringify(row[6]));
      expect(r.jb).toEqual(row[7]);
    });
  });

  it('gives the same bytes whatever the chunk a value falls on, values larger than a chunk included', () => {
    // The types the reference encoder writes: t, u, b, at, j, jb.
    const columns = EVERY_TYPE.filter((c) => ['text', 'uuid', 'bigint', 'timestamptz', 'json', 'jsonb'].includes(c.type));
    expect(columns.map((c) => c.name)).toEqual(['t', 'u', 'b', 'at', 'j', 'jb']);
    const big = 'ж'.repeat(200_000);
    const rows: CopyValue[][] = [];
    for (let i = 0; i < 3_000; i++) {
      rows.push([
        i === 1_000 ? big : `row ${i}\t\\\n€ 𝄞`,
        randomUUID(),
        BigInt(i) * 10_000_000_000n,
        new Date(1_700_000_000_000 + i),
        i === 2_000 ? { big } : { a: `x\\y"${i}` },
        i % 4 === 0 ? null : [i],
      ]);
    }
    const chunks = [...copyBinaryChunks(columns, rows)];
    expect(chunks.length).toBeGreaterThan(2);
    const header = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
    const reference = Buffer.concat([
      header,
      Buffer.alloc(8),
      ...rows.flatMap((row) => [Buffer.from([0, columns.length]), ...row.map((v, i) => referenceField(columns[i]!.type, v))]),
      Buffer.from([0xff, 0xff]),
    ]);
    expect(Buffer.concat(chunks).equals(reference)).toBe(true);
    // No rows: the header and the trailer alone.
    expect(Buffer.concat([...copyBinaryChunks(columns, [])]).equals(Buffer.concat([header, Buffer.alloc(8), Buffer.from([0xff, 0xff])]))).toBe(true);
  });

  it.each<[string, CopyColumn, unknown]>([
    ['a number for text', { name: 'label', type: 'text' }, 42],
    ['a UUID with a letter past f', { name: 'id', type: 'uuid' }, 'g0000000-0000-0000-0000-000000000000'],
    ['a UUID with its hyphens misplaced', { name: 'id', type: 'uuid' }, '000000000-000-0000-0000-000000000000'],
    ['a UUID too short', { name: 'id', type: 'uuid' }, '1234'],
    ['a fraction for bigint', { name: 'amount', type: 'bigint' }, 1.5],
    ['a number past 2^53 for bigint', { name: 'amount', type: 'bigint' }, 2 ** 53],
    ['a bigint past 2^63', { name: 'amount', type: 'bigint' }, 2n ** 63n],
    ['a decimal string for bigint', { name: 'amount', type: 'bigint' }, '12.5'],
    ['40000 for smallint', { name: 'ordinal', type: 'smallint' }, 40_000],
    ['a string for integer', { name: 'n', type: 'integer' }, '7'],
    ['an invalid Date', { name: 'at', type: 'timestamptz' }, new Date(Number.NaN)],
    ['February 30th', { name: 'at', type: 'timestamptz' }, '2026-02-30T00:00:00Z'],
    ['February 29th of a common year, as toISOString writes', { name: 'at', type: 'timestamptz' }, '2026-02-29T00:00:00.000Z'],
    ['month 13, as toISOString writes', { name: 'at', type: 'timestamptz' }, '2026-13-01T00:00:00.000Z'],
    ['hour 24, as toISOString writes', { name: 'at', type: 'timestamptz' }, '2026-01-01T24:00:00.000Z'],
    ['a letter among the digits, as toISOString writes', { name: 'at', type: 'timestamptz' }, '2026-01-0xT00:00:00.000Z'],
    ['a letter among the milliseconds', { name: 'at', type: 'timestamptz' }, '2026-01-01T00:00:00.0a0Z'],
    ['a timestamp without its offset', { name: 'at', type: 'timestamptz' }, '2026-01-01T00:00:00'],
    ['a timestamp with a space for T', { name: 'at', type: 'timestamptz' }, '2026-01-01 00:00:00Z'],
    ['a number for json', { name: 'state', type: 'json' }, 5],
    ['a string for boolean', { name: 'flag', type: 'boolean' }, 'true'],
  ])('refuses %s, naming the column; nothing of the COPY is stored and the connection goes on', async (_what, column, value) => {
    const client: PoolClient = await db.pool.connect();
    try {
      await client.query(`CREATE TEMP TABLE refused (ok text, x ${column.type === 'uuid' ? 'uuid' : column.type})`);
      const rows: CopyValue[][] = Array.from({ length: 5_000 }, (_, i) => [`row ${i}`, null]);
      rows.push(['the bad one', value as CopyValue]);
      await client.query('BEGIN');
      await expect(
        copyRowsInto(
          client,
          'refused',
          [
            { name: 'ok', type: 'text' },
            { ...column, name: 'x' },
          ],
          rows,
        ),
      ).rejects.toThrow(new RegExp(`column x \\(${column.type}\\) takes`));
      await client.query('ROLLBACK');
      expect((await client.query('SELECT count(*)::int AS n FROM refused')).rows[0].n).toBe(0);
      // A COPY after it on the same connection goes through.
      expect(await copyRowsInto(client, 'refused', [{ name: 'ok', type: 'text' }], [['after']])).toBe(1);
    } finally {
      await client.query('DROP TABLE IF EXISTS refused');
      client.release();
    }
  });

  it('refuses a row of the wrong length', () => {
    expect(() => [...copyBinaryChunks([{ name: 'a', type: 'text' }], [['x', 'y']])]).toThrow(/a row of 2 values for 1 columns/);
  });

  it('a taken key undoes copyRowsUnlessTaken alone: the transaction goes on with what it wrote before', async () => {
    await inTransaction(db.pool, async (tx) => {
      await tx.query('CREATE TEMP TABLE keyed (id uuid PRIMARY KEY, note text) ON COMMIT DROP');
      const taken = randomUUID();
      await tx.query(`INSERT INTO keyed VALUES ($1, 'first')`, [taken]);
      const columns: CopyColumn[] = [
        { name: 'id', type: 'uuid' },
        { name: 'note', type: 'text' },
      ];
      expect(
        await copyRowsUnlessTaken(tx, 'keyed', columns, [
          [randomUUID(), 'new'],
          [taken, 'again'],
        ]),
      ).toBe(false);
      expect(await copyRowsUnlessTaken(tx, 'keyed', columns, [[randomUUID(), 'copied']])).toBe(true);
      const notes = await tx.query<{ note: string }>('SELECT note FROM keyed ORDER BY note');
      expect(notes.rows.map((r) => r.note)).toEqual(['copied', 'first']);
    });
  });
});
