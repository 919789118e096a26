import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

/**
 * A value of a row written by COPY: null (SQL NULL), a string, a number or bigint, a
 * Date (as its ISO instant), or an object or array (written as its JSON text, for a
 * json/jsonb column).
 */
export type CopyValue = string | number | bigint | Date | object | null;

/** Characters of a value that COPY's text format reads as something else. */
const SPECIAL = /[\\\t\n\r]/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** A string in COPY's text format: most have none of the four characters, and are found so by indexOf (no regular expression). */
function escapeText(text: string): string {
  if (text.indexOf('\\') < 0 && text.indexOf('\n') < 0 && text.indexOf('\t') < 0 && text.indexOf('\r') < 0) return text;
  return text.replace(SPECIAL, (c) => ESCAPES[c]!);
}

/** One value in COPY's text format (PostgreSQL docs, "COPY", File Formats: Text Format). */
export function copyTextValue(value: CopyValue): string {
  if (value === null) return '\\N';
  switch (typeof value) {
    case 'string':
      return escapeText(value);
    case 'number':
      if (!Number.isFinite(value)) throw new Error(`COPY: ${value} is not a finite number`);
      return String(value);
    case 'bigint':
      return value.toString();
    default: {
      if (value instanceof Date) return value.toISOString();
      // JSON text holds no raw tab, newline or carriage return (JSON.stringify writes them
      // as escapes, with a backslash): only its backslashes need doubling.
      const json = JSON.stringify(value);
      return json.indexOf('\\') < 0 ? json : json.replaceAll('\\', '\\\\');
    }
  }
}

/** About how many bytes of rows go to the server per chunk. */
const CHUNK_BYTES = 256 * 1024;

/**
 * `rows` in COPY's text format as chunks of bytes (each about CHUNK_BYTES; a row may go on
 * in the next chunk: COPY's data messages need not follow rows):
 * every value is encoded (UTF-8) straight into the chunk it goes in, where the rows were
 * built as strings (each line, then each chunk, concatenated) and encoded again by the
 * stream. The bytes are those of copyTextValue's text, a tab between values and a
 * newline after each row.
 */
export function* copyTextChunks(rows: Iterable<readonly CopyValue[]>): Generator<Buffer> {
  let chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  let at = 0;
  for (const row of rows) {
    if (row.length === 0) {
      if (at === chunk.length) {
        yield chunk;
        chunk = Buffer.allocUnsafe(CHUNK_BYTES);
        at = 0;
      }
      chunk[at++] = 0x0a;
    }
    for (let i = 0; i < row.length; i++) {
      const text = copyTextValue(row[i]!);
      // UTF-8 takes at most 3 bytes per UTF-16 unit; one byte more for the tab or newline.
      const most = text.length * 3 + 1;
      if (at + most > chunk.length) {
        if (at > 0) yield chunk.subarray(0, at);
        // A new chunk (the stream may still hold the last one): larger for a value that does not fit in one.
        chunk = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, most));
        at = 0;
      }
      at += chunk.write(text, at, 'utf8');
      chunk[at++] = i === row.length - 1 ? 0x0a : 0x09;
    }
  }
  if (at > 0) yield chunk.subarray(0, at);
}

/**
 * Inserts `rows` into `table` by `COPY ... FROM STDIN` (text format) on the caller's
 * connection, inside the caller's transaction: no ON CONFLICT, so a row whose key is
 * taken fails the statement (23505) and with it the transaction. For rows that cannot
 * exist yet: PostgreSQL inserts them several to a heap page and reads each value with
 * its column type's input function, without parsing a JSON document of the rows
 * first. Columns left out take their defaults (an identity column numbers the rows in
 * the order given). Returns the number of rows copied.
 */
export async function copyRowsInto(client: PoolClient, table: string, columns: readonly string[], rows: Iterable<readonly CopyValue[]>): Promise<number> {
  const sink = client.query(copyFrom(`COPY ${table} (${columns.join(', ')}) FROM STDIN`));
  await pipeline(Readable.from(copyTextChunks(rows), { objectMode: false }), sink);
  return sink.rowCount;
}

/**
 * copyRowsInto for rows that cannot exist yet but for a batch applied again: inside a
 * savepoint, so that a taken key (23505) undoes this COPY alone and the caller goes on
 * its slower way (an upsert) in the same transaction. Returns whether the rows were
 * copied. Any other error fails the statement and the transaction as usual.
 */
export async function copyRowsUnlessTaken(
  client: PoolClient,
  table: string,
  columns: readonly string[],
  rows: Iterable<readonly CopyValue[]>,
): Promise<boolean> {
  await client.query('SAVEPOINT copy_rows_unless_taken');
  try {
    await copyRowsInto(client, table, columns, rows);
  } catch (error) {
    if ((error as { code?: unknown }).code !== '23505') throw error;
    await client.query('ROLLBACK TO SAVEPOINT copy_rows_unless_taken');
    return false;
  }
  await client.query('RELEASE SAVEPOINT copy_rows_unless_taken');
  return true;
}
