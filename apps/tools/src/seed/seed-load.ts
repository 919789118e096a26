import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import type { EventStore, EventToAppend, Position } from '#event-store';
import { comparePositions, matchesFilter, PostgresEventStore, PostgresSnapshotStore } from '#event-store';
import { advanceCheckpoint, ensureCheckpoint, readCheckpoint, ZERO } from '#event-store/projections';
import type { PayoutMethod } from '#domain';
import { tronAddressOf } from '#domain';
import { currentLedgerFoldVersion, ledgerSnapshotOf } from '#ledger';
import { LEDGER_SNAPSHOT_EVERY } from '#payments/ledger';
import { PayoutAddress, PayoutAddresses, ProjectSettings, Registry, WEBHOOK_EVENTS } from '#payments/merchants';
import type { LaggingProjection } from '#payments/observability';
import { PAYOUT_OUTCOMES, REFUND_OUTCOMES } from '#payments/flows';
import { PAYMENTS_TO_LEDGER, PAYMENTS_TO_LEDGER_FILTER, PAYOUT_OUTCOMES_FILTER, REFUND_OUTCOMES_FILTER } from '#payments/reactors';
import { DEFAULT_WEBHOOK_RETENTION_DAYS, moveOutboxReach, retentionHorizon, WEBHOOK_OUTBOX, WEBHOOK_OUTBOX_FILTER } from '#payments/webhooks';
import type { Clock } from '#platform/clock';
import type { SecretBox } from '#platform/secrets';
import { HistoryBatch, HistoryGenerator, HistoryTerms, SeedMerchant } from './history';
import { Random } from './random';

export interface SeedLoadOptions {
  /** About this many events are written (the history stops starting new flows there). */
  readonly events: number;
  /** The same seed gives the same history. */
  readonly seed?: string;
  /** Simulated time of the first invoice (default 2025-01-01T00:00:00Z). */
  readonly start?: Date;
  /** Simulated days the invoices are spread over (default 30). */
  readonly days?: number;
  /** Merchant accounts (default: one per 2,500 events, from 3 to 400). */
  readonly merchants?: number;
  /** Events generated before they are written (default 20,000). */
  readonly batchEvents?: number;
  /** Streams appended at once (default 16). */
  readonly concurrency?: number;
  readonly onProgress?: (progress: SeedProgress) => void;
}

export interface SeedProgress {
  readonly eventsWritten: number;
  /** Of the requested number of events (may pass 1 a little). */
  readonly fraction: number;
  readonly done: boolean;
}

export interface SeedLoadResult {
  readonly eventsWritten: number;
  readonly appends: number;
  readonly seconds: number;
  readonly merchants: number;
  readonly projects: number;
  /** Simulated time span of the history. */
  readonly from: Date;
  readonly until: Date;
  /** Events by type, and refusals by kind. */
  readonly counts: Readonly<Record<string, number>>;
  /** The log's followers left at the head of the history (nothing of it to re-derive), and those left to catch up. */
  readonly followers: { readonly atHead: readonly string[]; readonly toCatchUp: readonly string[] };
}

/**
 * The followers of the log whose whole work on the history the load writes itself, so
 * that it leaves them at its head, as after a gateway that ran along with it: the
 * reactors (the ledger entries of payments, refund and payout outcomes, the invoices'
 * records of refunds; they keep nothing but their checkpoint) and the webhook outbox
 * (the projects have no webhook URL, so nothing to deliver; it records an event for
 * GET /v1/events only within the webhook retention period, see `seedLoad`). The
 * read-model projections are not among them: the projector builds those.
 */
export const FOLLOWED_BY_THE_LOAD: readonly LaggingProjection[] = [
  { name: PAYMENTS_TO_LEDGER, filter: PAYMENTS_TO_LEDGER_FILTER },
  { name: REFUND_OUTCOMES, filter: REFUND_OUTCOMES_FILTER },
  { name: PAYOUT_OUTCOMES, filter: PAYOUT_OUTCOMES_FILTER },
  { name: WEBHOOK_OUTBOX, filter: WEBHOOK_OUTBOX_FILTER },
];

export const DEFAULT_SEED = '1';
export const DEFAULT_START = new Date('2025-01-01T00:00:00.000Z');

/**
 * Writes a realistic history (see history.ts) straight into the event store: each
 * batch is appended stream by stream with the exact expected revision (many events
 * per append), the ledger snapshots LedgerBook would have taken are saved, and the
 * payout orderIds are claimed as PayoutService claims them. Merchant accounts,
 * projects and confirmed payout details are created through the Registry first.
 *
 * Meant for a gateway whose projector is stopped (a load, like a restore): a running
 * projector's process managers would post the same ledger entries concurrently and
 * make the appends conflict, so the load refuses to start while one holds its locks.
 *
 * The same seed gives the same history: merchants, projects and their settings,
 * amounts, times, outcomes, event ids. The ids the database hands out differ from
 * one database to another: accounts and projects (random UUIDs of the Registry, and
 * with them invoice ids, which derive from the project), payout details and payout
 * ids (sequences).
 */
export async function seedLoad(
  deps: {
    readonly pool: Pool;
    readonly store: EventStore;
    readonly terms: HistoryTerms;
    readonly secrets: SecretBox;
    /** The gateway's clock and WEBHOOK_RETENTION_DAYS: which events the outbox would still record (default: now, 30 days). */
    readonly clock?: Clock;
    readonly webhookRetentionDays?: number;
  },
  options: SeedLoadOptions,
): Promise<SeedLoadResult> {
  const started = Date.now();
  const target = options.events;
  if (!Number.isSafeInteger(target) || target < 1) throw new RangeError('events must be a positive integer');
  const rng = new Random(options.seed ?? DEFAULT_SEED);
  const start = options.start ?? DEFAULT_START;
  const merchantCount = options.merchants ?? Math.min(400, Math.max(3, Math.round(target / 2_500)));
  const batchEvents = options.batchEvents ?? 20_000;
  const concurrency = options.concurrency ?? 16;

  const running = await runningProjections(deps.pool);
  if (running > 0) {
    throw new SeedRefusedError(
      `a projector is running on this database (${running} projection lock(s) held): stop it first, or its process managers would write the same ledger entries as the load`,
    );
  }

  // Followers with nothing of the log before the load left to handle: those the load can leave at its head.
  const caughtUp = new Set<string>();
  for (const follower of FOLLOWED_BY_THE_LOAD) if (!(await hasEventsLeft(deps.pool, deps.store, follower))) caughtUp.add(follower.name);

  const merchants = await createMerchants(deps.pool, deps.secrets, rng, merchantCount, start);
  const generator = new HistoryGenerator(merchants, deps.terms, { targetEvents: target, start, days: options.days ?? 30 }, rng);
  const snapshots = new PostgresSnapshotStore(deps.pool);

  let written = 0;
  let appends = 0;
  const last: { position: Position | null } = { position: null };
  let flushing: Promise<void> = Promise.resolve();
  const report = (done: boolean) => options.onProgress?.({ eventsWritten: written, fraction: written / target, done });

  while (!generator.done) {
    // Generate the next batch in slices, letting the appends of the previous one run in between.
    let generated = 0;
    while (generated < batchEvents && !generator.done) {
      if (generator.needsPayoutIds) generator.supplyPayoutIds(await nextPayoutIds(deps.pool, 64));
      const before = generator.emitted;
      generator.generate(Math.min(500, batchEvents - generated));
      generated += generator.emitted - before;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const batch = generator.takeBatch(LEDGER_SNAPSHOT_EVERY);
    await flushing;
    flushing = writeBatch(deps, snapshots, batch, concurrency, last).then((n) => {
      appends += n;
      written += batch.writes.length;
      report(false);
    });
    flushing.catch(() => undefined); // awaited before the next batch; not an unhandled rejection meanwhile
  }
  await flushing;
  // As after any bulk load: fresh planner statistics for whoever reads the log next.
  await deps.pool.query('ANALYZE events, event_streams');

  // The history is written whole (each flow with its ledger entries): the followers that would only re-derive it start
  // after it. The outbox would still record (GET /v1/events) the events within the retention period: if the history
  // reaches into it, the outbox is left to do so. A follower behind before the load is left to catch up on everything.
  const recent =
    generator.clock.getTime() >= retentionHorizon(deps.clock?.now() ?? new Date(), deps.webhookRetentionDays ?? DEFAULT_WEBHOOK_RETENTION_DAYS).getTime();
  // Its past is the outbox's too, as after a gateway that ran along with it (an event older than the retention period
  // is not recorded again: webhook_outbox_reach); unless the outbox was behind before the load: then what it never
  // reached, the load's events with it, is all left for it to record.
  if (last.position !== null && caughtUp.has(WEBHOOK_OUTBOX)) await moveOutboxReach(deps.pool, last.position);
  const atHead: string[] = [];
  const toCatchUp: string[] = [];
  for (const { name } of FOLLOWED_BY_THE_LOAD) {
    if (last.position === null || !caughtUp.has(name) || (name === WEBHOOK_OUTBOX && recent)) {
      toCatchUp.push(name);
      continue;
    }
    await ensureCheckpoint(deps.pool, name);
    const from = (await readCheckpoint(deps.pool, name))?.position ?? ZERO;
    if (comparePositions(from, last.position) < 0) await advanceCheckpoint(deps.pool, name, from, last.position, 0);
    atHead.push(name);
  }
  report(true);

  return {
    eventsWritten: written,
    appends,
    seconds: (Date.now() - started) / 1000,
    merchants: merchants.length,
    projects: merchants.reduce((n, m) => n + m.projects.length, 0),
    from: start,
    until: generator.clock,
    counts: generator.summary(),
    followers: { atHead, toCatchUp },
  };
}

/**
 * Whether an event the follower takes (its filter) is in the log after its checkpoint, by the adapter's log order and
 * visibility rule. Not the lag count, which on PostgreSQL counts every event: a checkpoint a little behind events the
 * follower skips (they move it only now and then) is no work left.
 */
export async function hasEventsLeft(pool: Pool, store: EventStore, follower: LaggingProjection): Promise<boolean> {
  const at = (await readCheckpoint(pool, follower.name))?.position ?? ZERO;
  if (!(store instanceof PostgresEventStore)) {
    // Another store keeps the log elsewhere: a page of it after the checkpoint, the filter applied; a full page
    // without one the follower takes is counted as work left (the rest is not read).
    const page = await store.readAll({ after: at.commit === 0n && at.prepare === 0n ? 'start' : at, maxCount: 1_000 });
    return page.length === 1_000 || page.some((e) => matchesFilter(follower.filter, e));
  }
  const r = await pool.query<{ left: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM events e
       WHERE (e.transaction_id, e.global_position) > ($1::text::xid8, $2::bigint) AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
         AND EXISTS (SELECT 1 FROM unnest($3::text[]) p WHERE starts_with(e.event_type, p))
         AND EXISTS (SELECT 1 FROM unnest($4::text[]) p WHERE starts_with(e.stream_name, p))) AS left`,
    [at.commit.toString(), at.prepare.toString(), follower.filter?.eventTypePrefixes ?? [''], follower.filter?.streamNamePrefixes ?? ['']],
  );
  return r.rows[0]!.left;
}

/** The load was not started: nothing was written. */
export class SeedRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SeedRefusedError';
  }
}

/** Projections some process runs on this database: the advisory locks of ProjectionRunner (namespace 48213). */
async function runningProjections(pool: Pool): Promise<number> {
  const result = await pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_locks
     WHERE locktype = 'advisory' AND classid = 48213 AND objsubid = 2 AND granted
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  return Number(result.rows[0]!.n);
}

/** Appends a batch, one append per stream in the order of each stream's first event; returns the number of appends. */
async function writeBatch(
  deps: { readonly pool: Pool; readonly store: EventStore },
  snapshots: PostgresSnapshotStore,
  batch: HistoryBatch,
  concurrency: number,
  last: { position: Position | null },
): Promise<number> {
  const streams = new Map<string, { first: bigint; events: EventToAppend[] }>();
  for (const write of batch.writes) {
    let stream = streams.get(write.streamName);
    if (!stream) {
      stream = { first: write.revision, events: [] };
      streams.set(write.streamName, stream);
    }
    stream.events.push(write.event);
  }
  const queue = [...streams.entries()];
  let next = 0;
  const worker = async () => {
    while (next < queue.length) {
      const [name, stream] = queue[next++]!;
      const result = await deps.store.appendToStream(name, stream.events, {
        expectedRevision: stream.first === 0n ? 'no_stream' : stream.first - 1n,
      });
      if (last.position === null || comparePositions(result.position, last.position) > 0) last.position = result.position;
      const expected = stream.first + BigInt(stream.events.length) - 1n;
      if (result.nextExpectedRevision !== expected) {
        throw new Error(`seed: ${name} is at revision ${result.nextExpectedRevision} after the append, expected ${expected}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, worker));

  await Promise.all(batch.snapshots.map((s) => snapshots.save(s.streamName, s.revision, currentLedgerFoldVersion(), ledgerSnapshotOf(s.state))));
  if (batch.claims.length > 0) {
    await deps.pool.query(
      `INSERT INTO payout_order_ids (account_id, order_id, payout_id)
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) ON CONFLICT DO NOTHING`,
      [batch.claims.map((c) => c.accountId), batch.claims.map((c) => c.orderId), batch.claims.map((c) => c.payoutId)],
    );
  }
  return queue.length;
}

async function nextPayoutIds(pool: Pool, count: number): Promise<number[]> {
  const result = await pool.query<{ id: string }>(`SELECT nextval('payout_ids') AS id FROM generate_series(1, $1)`, [count]);
  return result.rows.map((r) => Number(r.id));
}

interface MerchantPlan {
  readonly index: number;
  readonly projects: readonly ProjectSettings[];
  readonly addresses: readonly { method: PayoutMethod; account: string; bank: string | null; label: string }[];
  readonly weight: number;
}

/** Accounts, projects and confirmed payout details, through the Registry; planned from the seed first. */
async function createMerchants(pool: Pool, secrets: SecretBox, rng: Random, count: number, now: Date): Promise<SeedMerchant[]> {
  const plans: MerchantPlan[] = [];
  for (let index = 0; index < count; index++) {
    const projectCount = Number(rng.weighted({ '1': 70, '2': 25, '3': 5 }));
    const projects: ProjectSettings[] = [];
    for (let p = 0; p < projectCount; p++) {
      projects.push({
        name: `Магазин ${index + 1}.${p + 1}`,
        status: 'active',
        webhookUrl: null,
        webhookEvents: [...WEBHOOK_EVENTS],
        usdtEnabled: rng.chance(0.35),
        holdHours: Number(rng.weighted({ '24': 70, '0': 15, '72': 15 })),
        methodOverrides: rng.chance(0.2) ? { card: { feePct: 25_000 } } : {},
        customerFeeShare: Number(rng.weighted({ '100': 70, '0': 20, '50': 10 })),
      });
    }
    const addresses: MerchantPlan['addresses'][number][] = [
      { method: 'sbp', account: `+79${rng.token('0123456789', 9)}`, bank: rng.pick(['Сбербанк', 'Т-Банк', 'Альфа-Банк', 'ВТБ']), label: 'Расчётная карта' },
    ];
    if (rng.chance(0.4))
      addresses.push({
        method: 'usdt_trc20',
        account: tronAddressOf(createHash('sha256').update(rng.token(BASE58, 33)).digest().subarray(0, 20)),
        bank: null,
        label: 'TRON',
      });
    if (rng.chance(0.2)) addresses.push({ method: 'usdt_bep20', account: `0x${rng.token('0123456789abcdef', 40)}`, bank: null, label: 'BSC' });
    // A few merchants take most of the payments (Zipf-like).
    plans.push({ index, projects, addresses, weight: 1 / Math.pow(index + 1, 0.8) });
  }

  const registry = new Registry(pool, secrets);
  const payoutAddresses = new PayoutAddresses(pool);
  const merchants: SeedMerchant[] = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < plans.length) {
      const plan = plans[next++]!;
      const account = await registry.createAccount(`Мерчант ${plan.index + 1}`, `merchant-${plan.index + 1}@example.com`, now);
      const projects = [];
      for (const settings of plan.projects) projects.push((await registry.createProject(account.id, settings, now)).project);
      const confirmed: PayoutAddress[] = [];
      for (const detail of plan.addresses) {
        const { address } = await payoutAddresses.add(account.id, detail, now);
        confirmed.push((await payoutAddresses.confirm(address.id, now))!);
      }
      merchants[plan.index] = { index: plan.index, accountId: account.id, projects, payoutAddresses: confirmed, weight: plan.weight };
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, count) }, worker));
  return merchants;
}

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
