/**
 * Large batches (a rebuild's pages) write rows that cannot exist yet by COPY (decision
 * 0095): the invoices and payouts folds their new rows, the ledger its entries (inside
 * a savepoint, falling back to the upsert when an entry id is taken) and postings, the
 * stream catalog the streams a batch begins (in a savepoint too).
 * Whatever the batches, the tables must equal what small batches (the upserts alone)
 * leave. (How COPY encodes the values: test/projections/copy-binary.spec.ts.)
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { matchesFilter, PostgresEventStore, RecordedEvent } from '#event-store';
import { rebuildProjectionsTogether, resetForRebuild } from '#event-store/projections';
import { inTransaction } from '#platform/database';
import { loadConfig } from '#payments/composition';
import {
  allProjections,
  FOLD_COPY_MIN_ROWS,
  invoicesProjection,
  LEDGER_COPY_MIN_ENTRIES,
  ledgerProjection,
  readModelChecksums,
  streamCatalogProjection,
  TableChecksum,
} from '#payments/read-models';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { seedLoad } from '../../apps/tools/src/seed/seed-load';
import { projectToHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

let db: TestDatabase;
let store: PostgresEventStore;
/** The read models as small batches (below the COPY thresholds) build them. */
let smallBatches: TableChecksum[];
/** The invoices' and payouts' stored rows (json text) as small batches (the upsert) write them. */
let smallBatchItems: Record<string, string>;

/** Each table's `item` as stored, the text itself (not its value), row by row in id order. */
async function storedItemTexts(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const table of ['invoices', 'payouts']) {
    const r = await db.pool.query<{ texts: string }>(`SELECT coalesce(string_agg(item::text, E'\n' ORDER BY id), '') AS texts FROM ${table}`);
    out[table] = r.rows[0]!.texts;
  }
  return out;
}

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  const rng = seededRandom('rebuild by COPY');
  await seedLoad(
    { pool: db.pool, store, terms: loadConfig({}), secrets: new SecretBox(fixedKeys([randomBytes(32)])) },
    { events: 5_000, seed: String(rng.int(0, 1_000_000_000)), days: rng.int(5, 10) },
  );
  // Batches of fewer events than either threshold: never a COPY.
  const small = rng.int(1, Math.min(FOLD_COPY_MIN_ROWS, LEDGER_COPY_MIN_ENTRIES) - 1);
  for (const projection of allProjections) await projectToHead(db.pool, store, projection, small);
  smallBatches = await readModelChecksums(db.pool);
  smallBatchItems = await storedItemTexts();
}, 120_000);
afterAll(async () => {
  await store.close();
  await db.drop();
});

describe('a rebuild that writes its pages by COPY', () => {
  it('leaves the read models small batches leave, in one page and in pages that mix new and stored rows', async () => {
    const rng = seededRandom('rebuild by COPY, page size');
    // The whole log in one page: every new row of the history by COPY.
    const all = await rebuildProjectionsTogether(db.pool, store, allProjections, { batchSize: 50_000 });
    expect(all.projections.find((p) => p.projection === 'invoices')!.eventsApplied).toBeGreaterThan(BigInt(FOLD_COPY_MIN_ROWS));
    expect(await readModelChecksums(db.pool)).toEqual(smallBatches);
    // Pages large enough for COPY, small enough that invoices, payouts and holds carry over from page to page.
    const batchSize = rng.int(1_000, 2_500);
    await rebuildProjectionsTogether(db.pool, store, allProjections, { batchSize });
    expect({ batchSize, tables: await readModelChecksums(db.pool) }).toEqual({ batchSize, tables: smallBatches });
  });

  it('a large batch applied again changes nothing; one whose entries are partly stored writes only the others (savepoint fallback)', async () => {
    const events = (await store.readAll({ maxCount: 100_000 })).filter((e) => matchesFilter(ledgerProjection.filter, e));
    expect(events.length).toBeGreaterThan(2 * LEDGER_COPY_MIN_ENTRIES);
    await resetForRebuild(db.pool, [ledgerProjection], { keepIndexes: true });
    // The first part of the history (by COPY: a large batch), then all of it in one large batch, then all of it again.
    const part = LEDGER_COPY_MIN_ENTRIES + Math.floor((events.length - LEDGER_COPY_MIN_ENTRIES) / 2);
    await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, events.slice(0, part), undefined));
    await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, events, undefined));
    await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, events, undefined));
    const ledgerTables = [...ledgerProjection.tables];
    expect(await readModelChecksums(db.pool, ledgerTables)).toEqual(smallBatches.filter((t) => ledgerTables.includes(t.table)));
  });

  it('the stream catalog: a large batch of begun streams applied again changes nothing (savepoint fallback)', async () => {
    const events = await store.readAll({ maxCount: 100_000 });
    const tables = [...streamCatalogProjection.tables];
    await resetForRebuild(db.pool, [streamCatalogProjection], { keepIndexes: true });
    await inTransaction(db.pool, (tx) => streamCatalogProjection.apply(tx, events.slice(0, Math.floor(events.length / 2)), undefined));
    await inTransaction(db.pool, (tx) => streamCatalogProjection.apply(tx, events, undefined));
    await inTransaction(db.pool, (tx) => streamCatalogProjection.apply(tx, events, undefined));
    expect(await readModelChecksums(db.pool, tables)).toEqual(smallBatches.filter((t) => tables.includes(t.table)));
  });

  it('the invoices fold: a large batch applied again changes nothing, and new rows keep their order of arrival behind stored ones', async () => {
    for (const projection of [invoicesProjection]) {
      const events = (await store.readAll({ maxCount: 100_000 })).filter((e) => matchesFilter(projection.filter, e));
      expect({ projection: projection.name, many: events.length > FOLD_COPY_MIN_ROWS }).toEqual({ projection: projection.name, many: true });
      await resetForRebuild(db.pool, [projection], { keepIndexes: true });
      const half = Math.floor(events.length / 2);
      await inTransaction(db.pool, (tx) => projection.apply(tx, events.slice(0, half)));
      await inTransaction(db.pool, (tx) => projection.apply(tx, events));
      await inTransaction(db.pool, (tx) => projection.apply(tx, events));
      const tables = [...projection.tables];
      expect({ projection: projection.name, tables: await readModelChecksums(db.pool, tables) }).toEqual({
        projection: projection.name,
        tables: smallBatches.filter((t) => tables.includes(t.table)),
      });
    }
  });
});

describe('read-model rows stored as json (decision 0095)', () => {
  it('invoices and payouts keep item as json, the very text JSON.stringify wrote, the same by COPY as by the upsert', async () => {
    const types = await db.pool.query<{ table_name: string; data_type: string }>(
      `SELECT table_name, data_type FROM information_schema.columns
       WHERE table_schema = current_schema() AND table_name IN ('invoices', 'payouts') AND column_name = 'item' ORDER BY table_name`,
    );
    expect(types.rows).toEqual([
      { table_name: 'invoices', data_type: 'json' },
      { table_name: 'payouts', data_type: 'json' },
    ]);
    // Small batches wrote every row by the upsert: the text is JSON.stringify's (no spaces, keys in the row's order).
    expect(smallBatchItems.invoices!.length).toBeGreaterThan(0);
    expect(smallBatchItems.payouts!.length).toBeGreaterThan(0);
    for (const table of ['invoices', 'payouts']) {
      for (const text of smallBatchItems[table]!.split('\n')) expect(JSON.stringify(JSON.parse(text))).toBe(text);
    }
    // One page for the whole log: every new row by COPY, byte for byte the same texts.
    await rebuildProjectionsTogether(db.pool, store, allProjections, { batchSize: 50_000 });
    expect(await storedItemTexts()).toEqual(smallBatchItems);
  });

  it('a checksum counts a json item as its value: the same table as jsonb, or converted back in place, sums the same', async () => {
    const before = await readModelChecksums(db.pool, ['invoices', 'payouts']);
    await db.pool.query('ALTER TABLE invoices ALTER COLUMN item TYPE jsonb USING item::jsonb');
    await db.pool.query('ALTER TABLE payouts ALTER COLUMN item TYPE jsonb USING item::jsonb');
    expect(await readModelChecksums(db.pool, ['invoices', 'payouts'])).toEqual(before);
    // What the migration does to a table written before it (jsonb's text: spaces, keys sorted): another text, the same sums.
    await db.pool.query('ALTER TABLE invoices ALTER COLUMN item TYPE json USING item::json');
    await db.pool.query('ALTER TABLE payouts ALTER COLUMN item TYPE json USING item::json');
    expect(await storedItemTexts()).not.toEqual(smallBatchItems);
    expect(await readModelChecksums(db.pool, ['invoices', 'payouts'])).toEqual(before);
    // A changed value still changes the sum.
    await db.pool.query(`UPDATE invoices SET item = jsonb_set(item::jsonb, '{status}', '"changed"') WHERE seq = (SELECT min(seq) FROM invoices)`);
    expect((await readModelChecksums(db.pool, ['invoices']))[0]!.md5).not.toBe(before[0]!.md5);
    await rebuildProjectionsTogether(db.pool, store, allProjections);
    expect(await storedItemTexts()).toEqual(smallBatchItems);
  });
});

describe('open holds by COPY', () => {
  /** A payment_recorded entry of account `a` (test mode) that opens a hold on `invoiceId`, as the log carries it. */
  const payment = (n: number, a: string, invoiceId: string, amount: number): RecordedEvent => ({
    id: randomUUID(),
    type: 'LedgerEntryPosted',
    streamName: `ledger-test_${a}`,
    revision: BigInt(n),
    data: {
      entryId: randomUUID(),
      kind: 'payment_recorded',
      cause: `payment:${invoiceId}:${n}`,
      postings: [
        { account: 'clearing', amount: -amount },
        { account: 'pending', amount },
      ],
      occurredAt: new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString(),
      hold: { invoiceId, amount, releaseAt: new Date(Date.UTC(2026, 0, 2) + n * 1000).toISOString() },
    },
    metadata: {},
    position: { commit: BigInt(n + 1), prepare: BigInt(n + 1) },
    createdAt: new Date(Date.UTC(2026, 0, 1) + n * 1000),
  });
  const holds = async () =>
    (
      await db.pool.query<{ n: string; md5: string }>(
        `SELECT count(*) AS n, md5(string_agg(concat_ws(' ', account_id, mode, invoice_id, amount, release_at), ',' ORDER BY invoice_id)) AS md5 FROM ledger_open_holds`,
      )
    ).rows[0]!;

  it('a large batch inserts its opened holds by COPY; a hold still open opened again keeps the first (the COPY undone, the INSERT skips it)', async () => {
    const account = randomUUID();
    const invoices = Array.from({ length: LEDGER_COPY_MIN_ENTRIES + 44 }, () => randomUUID());
    // First batch: every hold new. Second: each opened again (other entries, other amounts) with new ones after them.
    const first = invoices.map((invoice, i) => payment(i, account, invoice, 1000 + i));
    const more = Array.from({ length: LEDGER_COPY_MIN_ENTRIES }, () => randomUUID());
    const second = [...invoices, ...more].map((invoice, i) => payment(first.length + i, account, invoice, 5000 + i));

    // The same entries in small batches: the INSERT alone.
    await resetForRebuild(db.pool, [ledgerProjection], { keepIndexes: true });
    const all = [...first, ...second];
    for (let i = 0; i < all.length; i += 10) await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, all.slice(i, i + 10), undefined));
    const bySmallBatches = await holds();
    const ledgerTables = [...ledgerProjection.tables];
    const smallTables = await readModelChecksums(db.pool, ledgerTables);

    await resetForRebuild(db.pool, [ledgerProjection], { keepIndexes: true });
    await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, first, undefined));
    expect(Number((await db.pool.query('SELECT count(*) AS n FROM ledger_open_holds')).rows[0].n)).toBe(invoices.length);
    await inTransaction(db.pool, (tx) => ledgerProjection.apply(tx, second, undefined));
    expect(await holds()).toEqual(bySmallBatches);
    expect(await readModelChecksums(db.pool, ledgerTables)).toEqual(smallTables);
    // The first opening counts: the amounts of the first batch, then the new ones.
    const amounts = await db.pool.query<{ invoice_id: string; amount: string }>('SELECT invoice_id, amount FROM ledger_open_holds');
    const byInvoice = new Map(amounts.rows.map((r) => [r.invoice_id, Number(r.amount)]));
    expect(invoices.map((i) => byInvoice.get(i))).toEqual(invoices.map((_, i) => 1000 + i));
    expect(more.map((i) => byInvoice.get(i))).toEqual(more.map((_, i) => 5000 + invoices.length + i));
  });
});
