/**
 * Every process manager replayed from checkpoint zero on PostgreSQL, with the real
 * projector process: `seed:load` writes a realistic history of one busy merchant
 * (its live ledger grows well past the window of 2,000 recent causes), the projector
 * follows it to the head (its process managers meet every payment and outcome the
 * history already posted), then every process manager's checkpoint is reset to zero
 * (as after PostgreSQL, which holds the checkpoints, is restored from a backup) and
 * the projector runs again. Each ledger keeps exactly its entries and balances, and
 * `ledger:verify` passes.
 *
 * PostgreSQL's globally unique event ids would stop a repeated entry by themselves,
 * so the test also requires that the store never had to: the projector logs (and
 * counts) every repeat that only the store stopped. The same replay on a store that
 * does not stop them (as EventStoreDB) is test/ledger/process-manager-replay.spec.ts.
 */
import { comparePositions, PostgresEventStore } from '#event-store';
import { foldLedger, LEDGER_CATEGORY, LedgerEvent, LedgerState, RECENT_CAUSES_KEPT } from '#ledger';
import { allProjections } from '#payments/read-models';
import { RunningProcess, startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { visibleHead } from '../support/project-to-head';

/** With one merchant, its live ledger gets some 2,500 entries. */
const EVENTS = 8_000;
/** What the projector logs when the event store, not the ledger, stopped a repeat (libs/metrics). */
const STOPPED_ONLY_BY_THE_STORE = 'the event store refused a repeat';

describe('every process manager replayed from checkpoint zero (PostgreSQL, real projector)', () => {
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

  const env = () => ({ DATABASE_URL: db.url });
  const logSize = async () => Number((await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);

  /** Every ledger of the log: its entries and its balances. */
  async function ledgers(): Promise<Map<string, { entries: number; balances: LedgerState['balances'] }>> {
    const names = (
      await db.pool.query<{ stream_name: string }>(`SELECT DISTINCT stream_name FROM events WHERE stream_name LIKE '${LEDGER_CATEGORY}-%' ORDER BY 1`)
    ).rows.map((r) => r.stream_name);
    const out = new Map<string, { entries: number; balances: LedgerState['balances'] }>();
    for (const name of names) {
      const entries = (await store.readStream(name)).map((e) => ({ type: 'LedgerEntryPosted', data: e.data }) as LedgerEvent);
      out.set(name, { entries: entries.length, balances: foldLedger(entries).balances });
    }
    return out;
  }

  /** The projector, run until every checkpoint is at the head of the log, then stopped. */
  async function projectToTheHead(): Promise<RunningProcess> {
    const projector = startProcess('projector', { ...env(), PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    const [, running] = await projector.waitForOutput(/running (\d+) projections/);
    const deadline = Date.now() + 150_000;
    for (;;) {
      const head = (await visibleHead(db.pool, store))!;
      const rows = (
        await db.pool.query<{ commit_position: string; prepare_position: string }>('SELECT commit_position, prepare_position FROM projection_checkpoints')
      ).rows;
      const behind = rows.filter((r) => comparePositions({ commit: BigInt(r.commit_position), prepare: BigInt(r.prepare_position) }, head) < 0);
      if (rows.length >= Number(running) && behind.length === 0) break;
      if (Date.now() > deadline) throw new Error(`the projector did not catch up; output:\n${projector.output()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(await projector.kill()).toBe(0);
    return projector;
  }

  it('posts nothing twice: identical entry counts and balances, and ledger:verify passes', async () => {
    const seed = startProcess('seed-load', env(), ['--events', String(EVENTS), '--seed', 'pm-replay-pg', '--merchants', '1']);
    expect(await seed.exited).toBe(0);
    const seeded = await logSize();
    const before = await ledgers();
    expect(Math.max(...[...before.values()].map((l) => l.entries))).toBeGreaterThan(RECENT_CAUSES_KEPT + 200);

    // The projector's process managers meet the whole history (a replay of what seed:load posted).
    const first = await projectToTheHead();
    expect(first.output()).not.toContain(STOPPED_ONLY_BY_THE_STORE);
    expect(await logSize()).toBe(seeded);
    expect(await ledgers()).toEqual(before);

    // Every process manager's checkpoint back to zero: every checkpoint that is not a read model's nor the webhook outbox's.
    const readModels = new Set([...allProjections.map((p) => p.name), 'webhook_outbox']);
    const checkpoints = (await db.pool.query<{ projection: string }>('SELECT projection FROM projection_checkpoints ORDER BY 1')).rows.map((r) => r.projection);
    const processManagers = checkpoints.filter((name) => !readModels.has(name));
    expect(processManagers).toEqual(['payments_to_ledger', 'payout_outcomes', 'refund_outcomes']);
    const reset = await db.pool.query('UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0 WHERE projection = ANY($1)', [
      processManagers,
    ]);
    expect(reset.rowCount).toBe(processManagers.length);

    const second = await projectToTheHead();
    expect(second.output()).not.toContain(STOPPED_ONLY_BY_THE_STORE);
    expect(await logSize()).toBe(seeded);
    expect(await ledgers()).toEqual(before);

    const verify = startProcess('ledger-verify', env());
    expect(await verify.exited).toBe(0);
    expect(verify.output()).toContain('OK: every entry balances');
  }, 300_000);
});
