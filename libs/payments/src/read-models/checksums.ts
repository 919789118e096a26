import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { copyTextOut, inTransaction } from '#platform/database';
import { Position, visibleLogHead } from '#event-store';
import { readCheckpoint } from '#event-store/projections';
import { lockReadModelTables, quoteIdentifier as quote, READ_MODEL_TABLES } from './table-locks';

/** One read-model table's content, summed up. */
export interface TableChecksum {
  readonly table: string;
  readonly rows: number;
  /** md5 over the rows' md5s, in primary-key order. */
  readonly md5: string;
}

interface Column {
  readonly name: string;
  readonly identity: boolean;
  readonly json: boolean;
}

/**
 * A checksum of each read-model table, to compare a live read model with a rebuilt
 * one (or two replicas). Every column counts except the values of identity columns
 * (such as `invoices.seq`, the order of arrival): a rebuild numbers rows again from
 * where the sequence stood, so the numbers differ, but the order they define must
 * not. Such a column is replaced by the row's rank in its order. A `json` column counts
 * as its value (its `jsonb` text: key order and spaces aside, decision 0095). Rows are taken in
 * primary-key order, values as PostgreSQL prints them in UTC, and all tables are
 * read in one snapshot.
 */
export async function readModelChecksums(pool: Pool, tables: readonly string[] = READ_MODEL_TABLES): Promise<TableChecksum[]> {
  return inTransaction(
    pool,
    async (client) => {
      await lockReadModelTables(client, tables);
      return checksumsInSnapshot(client, tables);
    },
    { isolation: 'REPEATABLE READ', readOnly: true },
  );
}

/** Where a projection's read model stands in the log. */
export interface ReadModelStanding {
  readonly projection: string;
  /** Its checkpoint (0/0 when it has none). */
  readonly position: Position;
  readonly rebuilding: boolean;
}

/** The checksums and where each projection stands, with the head of the log: all of one snapshot. */
export interface ReadModelsSnapshot {
  /** null: an empty log. */
  readonly head: Position | null;
  readonly checksums: readonly TableChecksum[];
  readonly standings: readonly ReadModelStanding[];
}

/**
 * readModelChecksums, and in the same snapshot each projection's checkpoint and the
 * visible head of the log, so that the positions printed are those of the checksums and
 * no read model is ever past the head. `head`: the log kept elsewhere (EventStoreDB),
 * its head read after the snapshot (no read model can be past a head read later);
 * without, the log is in this database and its head is read in the snapshot.
 */
export async function readModelsInOneSnapshot(
  pool: Pool,
  projections: readonly string[],
  tables: readonly string[] = READ_MODEL_TABLES,
  head?: () => Promise<Position | null>,
): Promise<ReadModelsSnapshot> {
  const read = await inTransaction(
    pool,
    async (client) => {
      await lockReadModelTables(client, tables);
      // The first statement takes the snapshot: the head and the checkpoints before the tables.
      const inSnapshot = head ? null : await visibleLogHead(client);
      const standings: ReadModelStanding[] = [];
      for (const projection of projections) {
        const row = await readCheckpoint(client, projection);
        standings.push({ projection, position: row?.position ?? { commit: 0n, prepare: 0n }, rebuilding: row?.rebuildStartedAt != null });
      }
      return { head: inSnapshot, standings, checksums: await checksumsInSnapshot(client, tables) };
    },
    { isolation: 'REPEATABLE READ', readOnly: true },
  );
  return head ? { ...read, head: await head() } : read;
}

async function checksumsInSnapshot(client: PoolClient, tables: readonly string[]): Promise<TableChecksum[]> {
  await client.query(`SET LOCAL TIME ZONE 'UTC'`);
  await client.query(`SET LOCAL DateStyle = 'ISO, YMD'`);
  await client.query(`SET LOCAL IntervalStyle = 'postgres'`);
  await client.query('SET LOCAL extra_float_digits = 3');
  const out: TableChecksum[] = [];
  for (const table of tables) {
    const { digest: rowDigest, from: rowsFrom, order } = await rowDigests(client, table);
    // md5 of the rows' md5s joined in key order, hashed here as they stream: joined in the
    // server (string_agg) the text passed PostgreSQL's 1 GB limit at 33.5 million rows.
    const digest = createHash('md5');
    let rows = 0;
    const select = `SELECT ${rowDigest} FROM ${rowsFrom} ORDER BY ${order}`;
    for await (const chunk of copyTextOut(client, select)) {
      let from = 0;
      for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, from)) {
        digest.update(chunk.subarray(from, newline));
        rows += 1;
        from = newline + 1;
      }
      digest.update(chunk.subarray(from));
    }
    out.push({ table, rows, md5: digest.digest('hex') });
  }
  return out;
}

/**
 * How a table's rows are checksummed: `digest`, each row's md5 (its identity columns as
 * their rank, json as jsonb), over `from`, in `order` (the primary key, else every other
 * column). The table's checksum is the md5 of these digests joined in that order.
 */
export async function rowDigests(client: Pick<PoolClient, 'query'>, table: string): Promise<{ digest: string; from: string; order: string }> {
  const columns = (
    await client.query<{ name: string; identity: string; type: string }>(
      `SELECT column_name AS name, is_identity AS identity, data_type AS type FROM information_schema.columns
           WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`,
      [table],
    )
  ).rows.map((r): Column => ({ name: r.name, identity: r.identity === 'YES', json: r.type === 'json' }));
  if (columns.length === 0) throw new Error(`no read-model table ${table}`);
  const key = (
    await client.query<{ name: string }>(
      `SELECT a.attname AS name FROM pg_index i
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
           WHERE i.indrelid = $1::regclass AND i.indisprimary
           ORDER BY array_position(i.indkey::int2[], a.attnum)`,
      [quote(table)],
    )
  ).rows.map((r) => r.name);
  const order = (key.length > 0 ? key : columns.filter((c) => !c.identity).map((c) => c.name)).map(quote).join(', ');
  const ranks = columns.filter((c) => c.identity).map((c) => `rank() OVER (ORDER BY ${quote(c.name)}) AS ${quote(`${c.name}_rank`)}`);
  const values = columns.map((c) => (c.identity ? quote(`${c.name}_rank`) : c.json ? `${quote(c.name)}::jsonb` : quote(c.name))).join(', ');
  return {
    digest: `md5(ROW(${values})::text)`,
    from: `(SELECT t.*${ranks.map((r) => `, ${r}`).join('')} FROM ${quote(table)} t) t`,
    order,
  };
}

/** One line per table: name, rows, md5 (what `npm run read-models:checksum` prints). */
export function formatChecksums(checksums: readonly TableChecksum[]): string {
  const width = Math.max(...checksums.map((c) => c.table.length));
  const rowsWidth = Math.max(...checksums.map((c) => String(c.rows).length));
  return checksums.map((c) => `${c.table.padEnd(width)}  ${String(c.rows).padStart(rowsWidth)}  ${c.md5}`).join('\n');
}
