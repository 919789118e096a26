/**
 * Replay and audit on a seeded log: `seed:load` writes a realistic history straight
 * into the store, the projector builds the read models and runs its process managers
 * and workers over it (which find nothing left to do), `projections:rebuild` builds
 * the read models again from position zero and they equal the live ones table by
 * table (`read-models:checksum`), and `ledger:verify` passes. In process: the history
 * is the same for the same seed.
 */
import { comparePositions, PostgresEventStore } from '#event-store';
import { formatChecksums, readModelChecksums } from '#payments/read-models';
import type { PayoutAddress, Project } from '#payments/merchants';
import { WEBHOOK_EVENTS } from '#payments/merchants';
import { DEFAULT_PAYOUT_TERMS } from '#domain';
import { HistoryGenerator, SeedMerchant, SeedWrite } from '../../apps/tools/src/seed/history';
import { Random } from '../../apps/tools/src/seed/random';
import { startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { visibleHead } from '../support/project-to-head';

const EVENTS = 20_000;

describe('replay and audit on a seeded log', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  const logSize = async () => Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
  const statuses = async (table: 'invoices' | 'refunds' | 'payouts') =>
    (await db.pool.query<{ status: string }>(`SELECT DISTINCT status FROM ${table} ORDER BY status`)).rows.map((r) => r.status);

  /** Every checkpoint of the projector (it prints how many projections it runs) at the head of the log. */
  async function waitUntilCaughtUp(projections: number, output: () => string): Promise<void> {
    const deadline = Date.now() + 90_000;
    for (;;) {
      const head = (await visibleHead(db.pool, store))!;
      const rows = (
        await db.pool.query<{ commit_position: string; prepare_position: string }>('SELECT commit_position, prepare_position FROM projection_checkpoints')
      ).rows;
      const behind = rows.filter((r) => comparePositions({ commit: BigInt(r.commit_position), prepare: BigInt(r.prepare_position) }, head) < 0);
      if (rows.length >= projections && behind.length === 0) return;
      if (Date.now() > deadline) throw new Error(`the projector did not catch up; output:\n${output()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('rebuilds read models equal to the live ones, and the ledgers verify', async () => {
    const env = { DATABASE_URL: db.url };

    // 1. The history, straight into the store.
    const seed = startProcess('seed-load', env, ['--events', String(EVENTS), '--seed', 'replay']);
    expect(await seed.exited).toBe(0);
    const written = /seeded (\d+) events in \d+ appends in [\d.]+ s \((\d+) events\/s\)/.exec(seed.output());
    expect(written).not.toBeNull();
    expect(Number(written![2])).toBeGreaterThan(0);
    const seeded = await logSize();
    expect(seeded).toBe(Number(written![1]));
    expect(seeded).toBeGreaterThanOrEqual(EVENTS * 0.98);
    expect(seeded).toBeLessThanOrEqual(EVENTS * 1.02);

    // 2. The projector follows the log to its head: read models, process managers, workers.
    const projector = startProcess('projector', { ...env, PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    const [, running] = await projector.waitForOutput(/running (\d+) projections/);
    await waitUntilCaughtUp(Number(running), projector.output);
    // Another load now would race the process managers: refused, nothing written.
    const refused = startProcess('seed-load', env, ['--events', '100']);
    expect(await refused.exited).toBe(2);
    expect(refused.output()).toContain('a projector is running on this database');
    // A second look after the workers had time to tick: the history left them nothing to do
    // (no payment, hold, refund or payout half-done), and the process managers' repeats posted nothing.
    await new Promise((r) => setTimeout(r, 1_500));
    await waitUntilCaughtUp(Number(running), projector.output);
    expect(await projector.kill()).toBe(0);
    expect(await logSize()).toBe(seeded);

    // The read models hold the whole variety of the history.
    expect(await statuses('invoices')).toEqual(expect.arrayContaining(['paid', 'failed', 'expired', 'partially_refunded', 'refunded']));
    expect(await statuses('refunds')).toEqual(expect.arrayContaining(['succeeded', 'failed', 'refused']));
    expect(await statuses('payouts')).toEqual(expect.arrayContaining(['paid', 'rejected', 'cancelled', 'refused']));
    const live = await readModelChecksums(db.pool);
    // Every table filled, but no hold left open: the history released each one when due.
    expect(live.filter((t) => t.rows === 0).map((t) => t.table)).toEqual(['ledger_open_holds']);
    const firstSeq = async () => (await db.pool.query<{ seq: string }>('SELECT min(seq) AS seq FROM invoices')).rows[0]!.seq;
    const liveFirstSeq = await firstSeq();

    // The command prints the same lines.
    const checksum = startProcess('read-models-checksum', env);
    expect(await checksum.exited).toBe(0);
    expect(checksum.output()).toContain(formatChecksums(live));

    // 3. Rebuilt from position zero: equal, table by table; throughput per projection printed,
    // then the run's in log events: the log's events, each once, never a sum over the projections.
    const rebuild = startProcess('rebuild', env);
    expect(await rebuild.exited).toBe(0);
    // The gateway is stopped: no serving process could read a table being emptied, so no wait.
    expect(rebuild.output()).toContain('no serving process is connected to the database: nothing to wait for');
    expect(rebuild.output()).toMatch(/throughput:\n\s+projection\s+events\s+seconds\s+events\/s\n/);
    for (const name of ['stream_catalog', 'ledger', 'invoices', 'refunds', 'payouts']) {
      expect(rebuild.output()).toMatch(new RegExp(`\\n\\s+${name}\\s+\\d+\\s+[\\d.]+\\s+\\d+\\n`));
    }
    expect(rebuild.output()).not.toMatch(/\n\s+all\s+\d+/);
    const run = /\nthe log: (\d+) events from position zero in ([\d.]+) s, (\d+) log events\/s\n/.exec(rebuild.output());
    expect(run).not.toBeNull();
    expect(Number(run![1])).toBe(seeded);
    // The rate is those events over the run's seconds (printed to a tenth: up to 0.05 s off).
    const [seconds, rate] = [Number(run![2]), Number(run![3])];
    expect(Math.abs(rate * seconds - seeded)).toBeLessThanOrEqual(rate * 0.05 + 1);
    expect(rebuild.output()).toContain(`rebuilt stream_catalog: ${seeded} events`);
    const rebuilt = await readModelChecksums(db.pool);
    expect(rebuilt).toEqual(live);
    // ...although the rebuilt rows were numbered again (identity columns count by their order only).
    expect(await firstSeq()).not.toBe(liveFirstSeq);

    // 4. The ledgers replayed from the log keep every invariant and equal the read model.
    const verify = startProcess('ledger-verify', env);
    expect(await verify.exited).toBe(0);
    expect(verify.output()).toContain('OK: every entry balances');
  }, 150_000);

  it('a checksum tells a changed order of arrival, or a changed value', async () => {
    const before = await readModelChecksums(db.pool, ['invoices', 'payouts']);
    // The first invoice to arrive arrives again, last: the same rows, in another order.
    await db.pool.query(
      `WITH moved AS (DELETE FROM invoices WHERE seq = (SELECT min(seq) FROM invoices) RETURNING *)
       INSERT INTO invoices (id, project_id, account_id, mode, order_id, status, amount, method, created_at, expires_at, paid_at, net_amount, fee_amount, available_at, item, last_revision)
       SELECT id, project_id, account_id, mode, order_id, status, amount, method, created_at, expires_at, paid_at, net_amount, fee_amount, available_at, item, last_revision FROM moved`,
    );
    const reordered = await readModelChecksums(db.pool, ['invoices', 'payouts']);
    expect(reordered[0]!.rows).toBe(before[0]!.rows);
    expect(reordered[0]!.md5).not.toBe(before[0]!.md5);
    expect(reordered[1]).toEqual(before[1]);
    await db.pool.query(`UPDATE payouts SET status = 'paid' WHERE id = (SELECT min(id) FROM payouts WHERE status = 'rejected')`);
    expect((await readModelChecksums(db.pool, ['payouts']))[0]!.md5).not.toBe(before[1]!.md5);
  });
});

describe('the seeded history', () => {
  const project = (id: string, accountId: string, holdHours: number): Project => ({
    id,
    accountId,
    name: 'Магазин',
    status: 'active',
    webhookUrl: null,
    webhookEvents: [...WEBHOOK_EVENTS],
    usdtEnabled: true,
    holdHours,
    methodOverrides: {},
    customerFeeShare: 100,
    sealedWebhookSecret: 'sealed:v1:x',
    idNamespace: `${id.slice(0, 24)}${'0'.repeat(12)}`,
    createdAt: new Date(0),
    updatedAt: new Date(0),
  });
  const address = (id: number, accountId: string): PayoutAddress => ({
    id,
    accountId,
    method: 'sbp',
    account: `+7900000000${id}`,
    bank: null,
    label: null,
    status: 'confirmed',
    confirmedAt: new Date(0),
    createdAt: new Date(0),
  });
  const merchants: SeedMerchant[] = [0, 1, 2].map((i) => {
    const accountId = `0000000${i}-0000-4000-8000-000000000000`;
    return {
      index: i,
      accountId,
      projects: [project(`1000000${i}-0000-4000-8000-000000000000`, accountId, i === 2 ? 0 : 24)],
      payoutAddresses: [address(i + 1, accountId)],
      weight: 1 / (i + 1),
    };
  });

  function generate(seed: string, target: number): SeedWrite[] {
    const generator = new HistoryGenerator(
      merchants,
      { refundProcessingSeconds: 10, payoutTerms: DEFAULT_PAYOUT_TERMS, usdtRubRate: 9_500 },
      { targetEvents: target, start: new Date('2025-01-01T00:00:00Z'), days: 30 },
      new Random(seed),
    );
    let nextPayoutId = 1;
    const writes: SeedWrite[] = [];
    while (!generator.done) {
      if (generator.needsPayoutIds) generator.supplyPayoutIds([nextPayoutId++, nextPayoutId++, nextPayoutId++, nextPayoutId++]);
      generator.generate(1_000);
      writes.push(...generator.takeBatch(500).writes);
    }
    return writes;
  }

  it('is the same for the same seed, another for another seed, and stops at about the requested size', () => {
    const a = generate('same', 8_000);
    expect(generate('same', 8_000)).toEqual(a);
    expect(generate('other', 8_000)).not.toEqual(a);
    expect(a.length).toBeGreaterThanOrEqual(8_000 * 0.98);
    expect(a.length).toBeLessThanOrEqual(8_000 * 1.02);
    // Each stream's revisions run 0, 1, 2, ... in the order of the writes.
    const last = new Map<string, bigint>();
    for (const w of a) {
      expect(w.revision).toBe((last.get(w.streamName) ?? -1n) + 1n);
      last.set(w.streamName, w.revision);
    }
    expect(new Set(a.map((w) => w.event.id)).size).toBe(a.length);
  });

  it.each(['spread', 'another'])('spreads the invoices over the days asked for, whatever events an invoice brings (seed %s)', (seed) => {
    const created = generate(seed, 8_000)
      .filter((w) => w.event.type === 'InvoiceCreated')
      .map((w) => Date.parse((w.event.data as { createdAt: string }).createdAt));
    const daysAfterStart = (at: number) => (at - Date.parse('2025-01-01T00:00:00Z')) / 86_400_000;
    // The last one near the end of the 30 days, never past it (a history past the gateway's clock is dated in its future).
    expect(daysAfterStart(Math.max(...created))).toBeLessThanOrEqual(30);
    expect(daysAfterStart(Math.max(...created))).toBeGreaterThan(28.5);
  });
});
