import type { Pool, PoolClient } from 'pg';
import { to as copyTo } from 'pg-copy-streams';

/** The signature that opens COPY's binary format (PostgreSQL docs, "COPY", Binary Format), read and written alike. */
export const COPY_BINARY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** PostgreSQL's epoch (2000-01-01 UTC), which binary timestamps count microseconds from, in Unix milliseconds. */
export const POSTGRES_EPOCH_MS = 946_684_800_000;
/** Signature, flags (int32), length of the header extension (int32). */
const HEADER_BYTES = COPY_BINARY_SIGNATURE.length + 8;

/**
 * Rows of `COPY ... TO STDOUT (FORMAT binary)`, decoded from the chunks the server's
 * stream arrives in (a row may be cut anywhere between two chunks): each row's fields
 * as places in a buffer (`row.bytes`, from `row.starts[i]` to `row.ends[i]`; a NULL
 * field has start -1), valid until the next call of `next`. The caller reads the
 * fields it needs in the binary form of their types (text and bytea: their bytes;
 * bigint and xid8: 8 bytes, big-endian). Nothing is copied but the part of a row cut
 * off at the end of a chunk.
 */
export class BinaryCopyRows {
  readonly starts: Int32Array;
  readonly ends: Int32Array;
  /** The buffer the current row's fields are in. */
  bytes: Buffer = Buffer.alloc(0);
  private at = 0;
  private headerRead = false;
  private trailerRead = false;

  constructor(private readonly fields: number) {
    this.starts = new Int32Array(fields);
    this.ends = new Int32Array(fields);
  }

  /** True once the format's trailer (the end of the rows) has been read. */
  get ended(): boolean {
    return this.trailerRead;
  }

  /** Bytes of the last chunk not yet decoded (the beginning of a row cut off by its end). */
  get pending(): number {
    return this.bytes.length - this.at;
  }

  /** The next chunk of the stream: to be called when `next` has answered false. */
  push(chunk: Buffer): void {
    if (this.trailerRead && chunk.length > 0) throw new Error('COPY binary: data after the trailer');
    this.bytes = this.at < this.bytes.length ? Buffer.concat([this.bytes.subarray(this.at), chunk]) : chunk;
    this.at = 0;
  }

  /** Decodes the next whole row into starts/ends; false when the chunks pushed so far hold no whole row more (or the trailer was read). */
  next(): boolean {
    const bytes = this.bytes;
    if (!this.headerRead) {
      if (bytes.length - this.at < HEADER_BYTES) return false;
      if (!bytes.subarray(this.at, this.at + COPY_BINARY_SIGNATURE.length).equals(COPY_BINARY_SIGNATURE))
        throw new Error('COPY binary: not the binary format signature');
      const extension = bytes.readInt32BE(this.at + COPY_BINARY_SIGNATURE.length + 4);
      if (bytes.length - this.at < HEADER_BYTES + extension) return false;
      this.at += HEADER_BYTES + extension;
      this.headerRead = true;
    }
    if (this.trailerRead) return false;
    let p = this.at;
    if (bytes.length - p < 2) return false;
    const count = bytes.readInt16BE(p);
    if (count === -1) {
      this.trailerRead = true;
      this.at = p + 2;
      return false;
    }
    if (count !== this.fields) throw new Error(`COPY binary: a row of ${count} fields where ${this.fields} were expected`);
    p += 2;
    const { starts, ends } = this;
    for (let i = 0; i < count; i++) {
      if (bytes.length - p < 4) return false;
      const length = bytes.readInt32BE(p);
      p += 4;
      if (length === -1) {
        starts[i] = -1;
        ends[i] = -1;
        continue;
      }
      if (length < -1) throw new Error(`COPY binary: a field of length ${length}`);
      if (bytes.length - p < length) return false;
      starts[i] = p;
      ends[i] = p + length;
      p += length;
    }
    this.at = p;
    return true;
  }

  /** The current row's i-th field as UTF-8 text (text columns), or null. */
  text(i: number): string | null {
    const start = this.starts[i]!;
    return start < 0 ? null : this.bytes.toString('utf8', start, this.ends[i]!);
  }

  /**
   * The current row's i-th field, an 8-byte integer (`unsigned` for xid8), as a number
   * when it is a safe integer; else null (read it with `integerText`).
   */
  safeInteger(i: number, unsigned = false): number | null {
    const start = this.starts[i]!;
    if (start < 0 || this.ends[i]! - start !== 8) throw new Error(`COPY binary: field ${i} is not an 8-byte integer`);
    const high = unsigned ? this.bytes.readUInt32BE(start) : this.bytes.readInt32BE(start);
    // Safe (|value| < 2^53) when the high word is within [-2^21, 2^21), but for -2^53 itself.
    if (high >= 2_097_152 || high < -2_097_152) return null;
    const value = high * 4_294_967_296 + this.bytes.readUInt32BE(start + 4);
    return Number.isSafeInteger(value) ? value : null;
  }

  /** The current row's i-th field, an 8-byte integer, as decimal text (`unsigned` for xid8). */
  integerText(i: number, unsigned: boolean): string {
    const start = this.starts[i]!;
    return (unsigned ? this.bytes.readBigUInt64BE(start) : this.bytes.readBigInt64BE(start)).toString();
  }
}

/**
 * Runs `COPY (<select>) TO STDOUT (FORMAT binary)` on a connection of `pool` and hands
 * each row to `onRow` as it arrives (the rows decoded in `rows`, read in place): one
 * statement, one snapshot, the server producing rows while Node takes them, held back
 * only by TCP when Node falls behind (memory: a chunk or two). `onRow` may answer a
 * promise (to wait for whoever takes the rows); the stream is not read meanwhile.
 * `settings` (e.g. `enable_sort = off`) hold for the statement only: it then runs in a
 * read-only transaction with them as `SET LOCAL`. A read stopped halfway (an error of
 * `onRow`, or of the stream) leaves its COPY running on the server: the connection is
 * closed, not returned to the pool. COPY takes no parameters: `select` must carry its
 * values as literals the caller has checked.
 */
export async function readBinaryCopy(
  pool: Pool,
  select: string,
  fields: number,
  onRow: (rows: BinaryCopyRows) => void | Promise<void>,
  settings: readonly string[] = [],
): Promise<void> {
  const client = await pool.connect();
  let failed: Error | undefined;
  try {
    if (settings.length > 0) {
      await client.query('BEGIN READ ONLY');
      for (const setting of settings) await client.query(`SET LOCAL ${setting}`);
    }
    const rows = new BinaryCopyRows(fields);
    const stream = client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT binary)`));
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      rows.push(chunk);
      while (rows.next()) {
        const waited = onRow(rows);
        if (waited) await waited;
      }
    }
    if (!rows.ended || rows.pending > 0) throw new Error('COPY binary: the stream ended before its trailer');
    if (settings.length > 0) await client.query('COMMIT');
  } catch (error) {
    failed = error as Error;
    throw error;
  } finally {
    client.release(failed);
  }
}

/**
 * The text-format COPY of `select` on `client`, in its transaction and snapshot, as its
 * chunks arrive (lines cut anywhere between chunks). A read stopped halfway leaves the
 * client unusable: the caller ends its transaction with an error.
 */
export function copyTextOut(client: PoolClient, select: string): AsyncIterable<Buffer> {
  return client.query(copyTo(`COPY (${select}) TO STDOUT`)) as unknown as AsyncIterable<Buffer>;
}
