/**
 * `seed:load` leaves the history as after normal use: the reactors (the process
 * managers posting to the ledger) and the webhook outbox at the head it wrote, since
 * it wrote their work itself. A gateway started on it then has nothing to re-derive:
 * its reactors are caught up and its finance reports answer without a write.
 */
import { comparePositions, PostgresEventStore } from '#event-store';
import { readCheckpointPositions } from '#event-store/projections';
import { REACTOR_NAMES } from '#payments/reactors';
import { allProjections } from '#payments/read-models';
import { WEBHOOK_OUTBOX } from '#payments/webhooks';
import { FOLLOWED_BY_THE_LOAD } from '../../apps/tools/src/seed/seed-load';
import { startGateway, startProcess } from '../support/gateway-process';
import { poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

type Report = { checked: { paidInvoices: number; entries: number }; differences: unknown[] };

const ADMIN_TOKEN = 'seed-load-followers-operator-token-0123456789';

describe('seed:load then start', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let summary = '';

  beforeAll(async () => {
    db = await createTestDatabase();
    store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
    const seed = startProcess('seed-load', { DATABASE_URL: db.url }, ['--events', '3000', '--seed', 'followers', '--days', '3']);
    expect({ code: await seed.exited, output: seed.output() }).toEqual({ code: 0, output: expect.stringContaining('seeded ') });
    expect(seed.output()).toContain(`at the head of the history (nothing to re-derive): ${[...REACTOR_NAMES, WEBHOOK_OUTBOX].join(', ')}`);
    summary = seed.output();
  }, 120_000);
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  // "reserved 463 (paid 376, rejected 44, cancelled 39)" left out the payouts still open at the end of the history.
  it('its payout line adds up: the reserved are paid, rejected, cancelled or still open, as the log has them', async () => {
    const line = /payouts requested \d+: reserved (\d+) \(paid (\d+), rejected (\d+), cancelled (\d+), still open (\d+)\)/.exec(summary);
    expect(line).not.toBeNull();
    const [reserved, paid, rejected, cancelled, open] = line!.slice(1).map(Number) as [number, number, number, number, number];
    expect(paid + rejected + cancelled + open).toBe(reserved);
    const settled = await db.pool.query<{ n: number }>(
      `SELECT count(DISTINCT stream_name)::int AS n FROM events WHERE event_type IN ('PayoutPaid', 'PayoutRejected', 'PayoutCancelled')`,
    );
    const reservedStreams = await db.pool.query<{ n: number }>(`SELECT count(DISTINCT stream_name)::int AS n FROM events WHERE event_type = 'PayoutReserved'`);
    expect(open).toBe(reservedStreams.rows[0]!.n - settled.rows[0]!.n);
  });

  it('leaves every reactor and the webhook outbox at the head of the log it wrote', async () => {
    expect(FOLLOWED_BY_THE_LOAD.map((f) => f.name)).toEqual([...REACTOR_NAMES, WEBHOOK_OUTBOX]);
    const stored = await readCheckpointPositions(db.pool, [...REACTOR_NAMES, WEBHOOK_OUTBOX]);
    // The visible head: an older writing transaction still open on the server (another suite's database: xids are the
    // server's) hides the last events, or all of them, for a while.
    const head = await poll(
      () => store.headPosition(),
      (h) => h !== null && [...stored.values()].every((p) => comparePositions(p, h) <= 0),
      'the head of the log it wrote to be visible',
      60_000,
    );
    for (const name of [...REACTOR_NAMES, WEBHOOK_OUTBOX]) {
      expect({ name, at: comparePositions(stored.get(name)!, head!) }).toEqual({ name, at: 0 });
    }
  });

  it('a gateway started on it answers the finance reports, its reactors caught up, and re-derives nothing', async () => {
    const events = async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events')).rows[0]!.n;
    const seeded = await events();
    const gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    try {
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
      // The reactors have nothing to catch up on: no event after their stored checkpoints, as the gateway reports them.
      const ready = (await (await fetch(`${gateway.baseUrl}/health/ready`, { headers: auth })).json()) as {
        projections: { projection: string; lag: number | null }[];
      };
      for (const name of [...REACTOR_NAMES, WEBHOOK_OUTBOX]) {
        expect(ready.projections.find((p) => p.projection === name)).toMatchObject({ lag: 0 });
      }
      // The read models are built from the log (the projector's work, not the load's); once they are, the report has
      // nothing left for the reactors to post (a report waits at most 5 s for them, then answers 503).
      const readModels = allProjections.map((p) => p.name);
      await poll(
        async () => ((await (await fetch(`${gateway.baseUrl}/health/ready`, { headers: auth })).json()) as typeof ready).projections,
        (projections) => projections.filter((p) => readModels.includes(p.projection)).every((p) => p.lag === 0),
        'the read models built',
        60_000,
      );
      // A 503 with Retry-After is what the report answers while an older writing transaction on the server (another
      // suite's: xids are the server's) hides the log's last events for more than its 5 s; the client asks again, as told.
      const reply = await poll(
        async () => {
          const r = await fetch(`${gateway.baseUrl}/admin/v1/audit/reconciliation?from=2024-12-01T00:00:00Z&to=2025-03-01T00:00:00Z`, { headers: auth });
          return { status: r.status, retryAfter: r.headers.get('retry-after'), body: (await r.json()) as Report };
        },
        (r) => !(r.status === 503 && r.retryAfter === '1'),
        'the report to be final',
        60_000,
      );
      expect(reply.status).toBe(200);
      expect(reply.body.differences).toEqual([]);
      expect(reply.body.checked.paidInvoices).toBeGreaterThan(50);
      expect(await events()).toBe(seeded);
    } finally {
      await gateway.kill();
    }
  }, 120_000);
});
