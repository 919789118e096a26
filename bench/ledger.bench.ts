import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createPool } from '#platform/database';
import { EventToAppend, ExpectedRevision, PostgresEventStore, PostgresSnapshotStore } from '#event-store';
import {
  causeOf,
  decide,
  evolve,
  initialLedgerState,
  LedgerCommand,
  LedgerEvent,
  LedgerId,
  ledgerEntryId,
  LedgerState,
  ledgerStreamName,
  stateViolations,
} from '#ledger';
import { currentLedgerFoldVersion, ledgerSnapshotOf } from '#ledger';
import { LEDGER_SNAPSHOT_EVERY, LedgerBook, LedgerRequest } from '#payments/ledger';
import { PostgresLedgerCauseIndex } from '#payments/ledger';
import type { BenchContext, BenchSection } from './run';
import { nowMs, percentiles, startTimer } from './stats';
import { fixed, Table } from './table';

/**
 * Ledger command latency against the length of the ledger's history: LedgerBook.post
 * on a merchant ledger with a short history (100 entries) and a long one (1,000,000;
 * 100,000 with --quick). The design goal is that the long one stays within 1.5× of the
 * short one (a snapshot every 500 entries bounds what a command reads); this section
 * only prints the figures and the ratio, it asserts nothing.
 *
 *   1. Seeding: a realistic history (payments with a hold, their holds released later,
 *      payouts and refunds reserved then settled or released) is decided and folded in
 *      memory with the pure `decide` + `evolve`, in chunks of 500 entries appended
 *      straight to the ledger's stream with the exact expected revision (the next chunk
 *      is built while the previous one is being written). Same event ids, type, data
 *      and metadata as LedgerBook.post writes.
 *   2. The snapshot LedgerBook would have written: it snapshots after every 500th entry
 *      (revisions 499, 999, ...), so the seeded ledger gets exactly that last snapshot
 *      (of 1,000,000 entries: at revision 999,999, the last one; of 100 entries: none),
 *      with currentLedgerFoldVersion() and the state folded up to that revision (and its digest).
 *   3. The ledger read model's entries (`ledger_entries`, the cause index a ledger longer
 *      than the window of recent causes looks new causes up in), derived from the seeded
 *      stream in one INSERT ... SELECT, as the ledger projection would have written them.
 *   4. VACUUM (ANALYZE) of the event-store tables and ledger_entries and a CHECKPOINT, as
 *      autovacuum and the checkpointer would have done by then, so both ledgers see
 *      fresh statistics.
 *   5. Measurement: a warm-up, then commands one at a time through LedgerBook.post (with
 *      the gateway's cause index), alternating the two ledgers (and which goes first) so
 *      that both see the same server conditions. Commands cross snapshot boundaries
 *      (every 500 entries) as in production: those pay for writing the snapshot too.
 *      Every command of the long ledger has a new cause the window cannot answer: it
 *      pays one indexed lookup, plus reading from the stream the entries the index does
 *      not hold yet (no projector runs during the bench: after 2,000 commands the index
 *      trails the window's start by up to a hundred entries).
 */
export const ledgerBench: BenchSection = {
  name: 'ledger',
  description: 'LedgerBook.post latency: a ledger with 100 vs 1,000,000 prior journal entries',
  run,
};

interface Settings {
  /** Prior entries of the short and of the long ledger. */
  readonly shortHistory: number;
  readonly longHistory: number;
  /** Commands per ledger before measuring, then measured. */
  readonly warmup: number;
  readonly commands: number;
}

const FULL: Settings = { shortHistory: 100, longHistory: 1_000_000, warmup: 100, commands: 2_000 };
const QUICK: Settings = { shortHistory: 100, longHistory: 100_000, warmup: 100, commands: 300 };

/** Entries per append while seeding. */
const SEED_CHUNK = 500;
/** The seeded histories end at this instant; the measured commands come after it. */
const HISTORY_END = Date.parse('2026-11-01T00:00:00.000Z');
/** Time between two seeded entries: 1,000,000 entries span about eleven months. */
const SEED_STEP_MS = 29_000;

const TITLE = 'Ledger command latency (LedgerBook.post, PostgreSQL; history seeded with the snapshot LedgerBook writes every 500 entries)';

interface SeededLedger {
  readonly ledger: LedgerId;
  readonly entries: number;
  /** Revision of the seeded snapshot; null when LedgerBook would not have taken one yet. */
  readonly snapshotRevision: bigint | null;
  readonly state: LedgerState;
}

async function run(context: BenchContext): Promise<Table[]> {
  const settings = context.quick ? QUICK : FULL;
  const pool = createPool(context.databaseUrl, { max: 4, applicationName: 'gateway-bench' });
  const store = new PostgresEventStore(pool);
  try {
    const short = await seedLedger(store, pool, settings.shortHistory, context.progress);
    const long = await seedLedger(store, pool, settings.longHistory, context.progress);

    context.progress('ledger: the cause index (ledger_entries) of the seeded ledgers');
    for (const seeded of [short, long]) await indexSeededLedger(pool, seeded.ledger, seeded.entries);

    context.progress('ledger: VACUUM (ANALYZE) events, event_streams, aggregate_snapshots, ledger_entries; CHECKPOINT');
    const maintenance = startTimer();
    await pool.query('VACUUM (ANALYZE) events, event_streams, aggregate_snapshots, ledger_entries');
    // Allowed to superusers (and pg_checkpoint) only: start measuring from a quiet disk.
    await pool.query('CHECKPOINT').catch(() => undefined);
    context.progress(`ledger: maintenance took ${(maintenance() / 1000).toFixed(1)} s`);

    context.progress(`ledger: ${settings.warmup} warm-up + ${settings.commands} measured commands per ledger, alternating the two ledgers`);
    const lookups = new Map<string, { lookups: number; readFromStream: number }>();
    const book = new LedgerBook(store, new PostgresSnapshotStore(pool), {
      causes: new PostgresLedgerCauseIndex(pool),
      observer: {
        causeLookedUp: (streamName, _found, read) => {
          const seen = lookups.get(streamName) ?? { lookups: 0, readFromStream: 0 };
          lookups.set(streamName, { lookups: seen.lookups + 1, readFromStream: seen.readFromStream + read });
        },
      },
    });
    const { latencies, snapshotsTaken } = await measure(book, [short, long], settings, context.progress);
    const lookupsOf = (seeded: SeededLedger) => lookups.get(ledgerStreamName(seeded.ledger)) ?? { lookups: 0, readFromStream: 0 };

    const ms = fixed(2);
    const [shortP50, shortP99] = percentiles(latencies[0]!, [50, 99]) as [number, number];
    const [longP50, longP99] = percentiles(latencies[1]!, [50, 99]) as [number, number];
    const row = (seeded: SeededLedger, p50: number, p99: number, samples: number, snapshots: number) => [
      seeded.entries,
      samples,
      ms(p50),
      ms(p99),
      seeded.snapshotRevision === null ? '-' : seeded.snapshotRevision.toString(),
      snapshots,
      lookupsOf(seeded).lookups,
      lookupsOf(seeded).readFromStream,
    ];
    const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
    return [
      {
        title: TITLE,
        // snapshot rev: the seeded snapshot's revision (- : none, as LedgerBook takes its
        // first after 500 entries); snapshots taken: by the measured commands themselves;
        // cause lookups: commands (warm-up included) whose cause only the log could answer;
        // read from stream: entries those lookups read beyond what the cause index held.
        headers: ['prior entries', 'commands', 'p50 ms', 'p99 ms', 'snapshot rev', 'snapshots taken', 'cause lookups', 'read from stream'],
        rows: [row(short, shortP50, shortP99, latencies[0]!.length, snapshotsTaken[0]!), row(long, longP50, longP99, latencies[1]!.length, snapshotsTaken[1]!)],
      },
      {
        title: `Ledger command latency, ratio of ${long.entries} to ${short.entries} prior entries (target: at most 1.50x; not asserted)`,
        headers: ['ratio', 'p50', 'p99'],
        rows: [[`${long.entries} / ${short.entries}`, ratio(longP50, shortP50), ratio(longP99, shortP99)]],
        summary: [
          { measure: `ledger command, ${short.entries} prior entries`, figure: `${latencies[0]!.length} commands`, p50: ms(shortP50), p99: ms(shortP99) },
          {
            measure: `ledger command, ${long.entries} prior entries`,
            figure: `${latencies[1]!.length} commands`,
            p50: ms(longP50),
            p99: ms(longP99),
            ratio: `${ratio(longP50, shortP50)} p50, ${ratio(longP99, shortP99)} p99`,
          },
        ],
      },
    ];
  } finally {
    await store.close();
    await pool.end();
  }
}

// ---------------------------------------------------------------------------------
// Seeding

/**
 * The ledger read model's entries of a seeded ledger, derived from its stream in the
 * database (what the ledger projection would have written to ledger_entries; the
 * postings and balances are not needed here). This is the cause index.
 */
async function indexSeededLedger(pool: Pool, ledger: LedgerId, entries: number): Promise<void> {
  // In ranges of revisions: each statement stays well within the pool's statement timeout.
  for (let from = 0; from < entries; from += INDEX_CHUNK) {
    await pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       SELECT (data->>'entryId')::uuid, $2, $3, stream_revision, data->>'kind', data->>'cause', (data->>'occurredAt')::timestamptz,
              global_position || '/' || global_position
       FROM events WHERE stream_name = $1 AND stream_revision >= $4 AND stream_revision < $5 ORDER BY stream_revision
       ON CONFLICT (entry_id) DO NOTHING`,
      [ledgerStreamName(ledger), ledger.accountId, ledger.mode, from, from + INDEX_CHUNK],
    );
  }
}

/** Entries of the cause index written per statement. */
const INDEX_CHUNK = 50_000;

/**
 * A merchant's day-to-day, as ledger commands: payments held for a while (each hold
 * released once due and once a few dozen are open, as a daily release would), a
 * payout of most of the available balance every ~40 entries, settled a few entries
 * later with a fee, and a refund every ~17 entries, settled (or, one in ten, released
 * as failed) a few entries later. Open holds stay around 20, open reservations at 0-2.
 */
class MerchantHistory {
  private step = 0;
  private clock: number;
  private readonly openHolds: { readonly invoiceId: string; readonly releaseAt: number }[] = [];
  private holdHead = 0;
  private readonly openReservations: { readonly id: string; readonly purpose: 'payout' | 'refund'; readonly dueStep: number; readonly amount: number }[] = [];
  private refunds = 0;

  constructor(startAt: number) {
    this.clock = startAt;
  }

  static readonly OPEN_HOLDS = 20;
  static readonly HOLD_STEPS = 30;

  next(state: LedgerState): LedgerRequest {
    const step = this.step++;
    this.clock += SEED_STEP_MS;
    const at = new Date(this.clock).toISOString();

    const reservation = this.openReservations[0];
    if (reservation && reservation.dueStep <= step) {
      this.openReservations.shift();
      if (reservation.purpose === 'refund' && this.refunds % 10 === 0) {
        return { type: 'ReleaseReservation', reservationId: reservation.id, at };
      }
      const feeAmount = reservation.purpose === 'payout' ? Math.min(5_000, Math.floor(reservation.amount / 100)) : undefined;
      return { type: 'SettleReservation', reservationId: reservation.id, feeAmount, at };
    }

    const oldestHold = this.openHolds[this.holdHead];
    if (oldestHold && this.openHolds.length - this.holdHead >= MerchantHistory.OPEN_HOLDS && oldestHold.releaseAt <= this.clock) {
      this.holdHead++;
      if (this.holdHead > 1_000) {
        this.openHolds.splice(0, this.holdHead);
        this.holdHead = 0;
      }
      return { type: 'ReleaseHold', invoiceId: oldestHold.invoiceId, at };
    }

    const available = state.balances.available;
    if (step % 40 === 0 && available >= 100) {
      const amount = Math.floor(available * 0.9);
      const id = `payout-${randomUUID()}`;
      this.openReservations.push({ id, purpose: 'payout', dueStep: step + 3, amount });
      return { type: 'ReserveFunds', reservationId: id, purpose: 'payout', amount, at };
    }
    if (step % 17 === 0 && available >= 100) {
      const amount = Math.min(available, 1_000 + ((step * 7_919) % 200_000));
      const id = `refund-${randomUUID()}`;
      this.refunds++;
      this.openReservations.push({ id, purpose: 'refund', dueStep: step + 5, amount });
      return { type: 'ReserveFunds', reservationId: id, purpose: 'refund', amount, at };
    }

    // A payment of 10 to 5,000 roubles, 2.5 % fee, held for HOLD_STEPS entries' time.
    const gross = 1_000 + ((step * 104_729) % 499_000);
    const feeAmount = Math.round(gross * 0.025);
    const invoiceId = randomUUID();
    const releaseAt = this.clock + MerchantHistory.HOLD_STEPS * SEED_STEP_MS;
    this.openHolds.push({ invoiceId, releaseAt });
    return {
      type: 'RecordPayment',
      invoiceId,
      netAmount: gross - feeAmount,
      feeAmount,
      releaseAt: new Date(releaseAt).toISOString(),
      at,
    };
  }
}

/**
 * Appends `count` realistic entries to a new ledger's stream (chunks of SEED_CHUNK,
 * exact expected revisions), then saves the snapshot LedgerBook would have saved.
 */
async function seedLedger(store: PostgresEventStore, pool: Pool, count: number, progress: (message: string) => void): Promise<SeededLedger> {
  const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
  const stream = ledgerStreamName(ledger);
  const metadata = { accountId: ledger.accountId, mode: ledger.mode };
  const history = new MerchantHistory(HISTORY_END - count * SEED_STEP_MS);

  // LedgerBook, one entry per command, snapshots when the revision reaches 499, 999, ...
  // (handleCommand: since the last snapshot >= LEDGER_SNAPSHOT_EVERY): the last of
  // those within the seeded history is what a ledger of this length has stored.
  const snapshotEntries = Math.floor(count / LEDGER_SNAPSHOT_EVERY) * LEDGER_SNAPSHOT_EVERY;
  let snapshotState: LedgerState | null = null;

  progress(`ledger: seeding ${count} entries into ${stream}`);
  const elapsed = startTimer();
  let state = initialLedgerState();
  let built = 0;
  let appended = 0;
  let reportedAt = 0;
  let inFlight: Promise<void> | null = null;
  /** Time spent waiting for the previous chunk's append: the database is the bottleneck. */
  let waitedMs = 0;

  const append = async (events: EventToAppend[], expectedRevision: ExpectedRevision): Promise<void> => {
    const result = await store.appendToStream(stream, events, { expectedRevision });
    const expectedNext = (expectedRevision === 'no_stream' ? -1n : (expectedRevision as bigint)) + BigInt(events.length);
    if (result.nextExpectedRevision !== expectedNext) {
      throw new Error(`seeding ${stream}: appended up to revision ${result.nextExpectedRevision}, expected ${expectedNext}`);
    }
    appended += events.length;
    if (appended - reportedAt >= 100_000 || appended === count) {
      reportedAt = appended;
      const seconds = elapsed() / 1000;
      progress(
        `ledger: seeded ${appended}/${count} entries, ${Math.round(appended / seconds)} entries/s ` +
          `(${(waitedMs / 1000).toFixed(1)} of ${seconds.toFixed(1)} s waiting for the database)`,
      );
    }
  };

  while (built < count) {
    // Build the next chunk (while the previous one is being written)...
    const chunk: EventToAppend[] = [];
    const firstRevision = built;
    while (chunk.length < SEED_CHUNK && built < count) {
      const request = history.next(state);
      const command = { ...request, entryId: ledgerEntryId(ledger, causeOf(request as LedgerCommand)) } as LedgerCommand;
      // Every seeded cause is new (random ids), so decide on the state without its
      // window of recent causes, saying that no older entry posted the cause: the
      // duplicate check scans the whole window (~2,000 causes, ~30 µs) and would
      // dominate seeding; balances, holds and reservations are checked as usual.
      // `evolve` still keeps the real window.
      const decision = decide({ ...command, postedBeforeWindow: false }, { ...state, recentCauses: [] });
      if (!Array.isArray(decision) || decision.length !== 1) {
        throw new Error(`seeding ${stream}: ${command.type} was not posted: ${decision instanceof Error ? decision.message : 'a repeat'}`);
      }
      const event: LedgerEvent = decision[0]!;
      state = evolve(state, event);
      built++;
      if (built === snapshotEntries) snapshotState = state;
      chunk.push({ id: event.data.entryId, type: event.type, data: event.data, metadata });
    }
    // ...then append it once the previous one is stored: one writer, exact revisions.
    if (inFlight) {
      const waitStarted = nowMs();
      await inFlight;
      waitedMs += nowMs() - waitStarted;
    }
    inFlight = append(chunk, firstRevision === 0 ? 'no_stream' : BigInt(firstRevision - 1));
    // Let the pool hand the query to its connection before building the next chunk
    // synchronously: without this turn of the event loop the query would only be sent
    // at the next `await inFlight`, and building and writing would not overlap.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  if (inFlight) await inFlight;

  const violations = stateViolations(state);
  if (violations.length > 0) {
    throw new Error(`seeding ${stream}: invariants broken: ${violations.map((v) => v.detail).join('; ')}`);
  }
  const seconds = elapsed() / 1000;
  progress(
    `ledger: seeded ${count} entries in ${seconds.toFixed(1)} s (${Math.round(count / seconds)} entries/s); ` +
      `${state.holds.size} open holds, ${Object.keys(state.reservations).length} open reservations`,
  );

  let snapshotRevision: bigint | null = null;
  if (snapshotState !== null) {
    // Exactly what LedgerBook would have saved after its last snapshot-taking command.
    snapshotRevision = BigInt(snapshotEntries - 1);
    await new PostgresSnapshotStore(pool).save(stream, snapshotRevision, currentLedgerFoldVersion(), ledgerSnapshotOf(snapshotState));
  }
  return { ledger, entries: count, snapshotRevision, state };
}

// ---------------------------------------------------------------------------------
// Measurement

/**
 * The commands measured on one ledger, in a cycle of eight: payments without a hold,
 * a payment with a hold already due and its release, a payout reserved and settled
 * with a fee, a refund reserved and settled (every other one released as failed).
 */
class CommandCycle {
  private step = 0;
  private clock = HISTORY_END;
  private holdInvoice = '';
  private payoutId = '';
  private payoutAmount = 0;
  private refundId = '';

  next(available: number): LedgerRequest {
    const step = this.step++;
    this.clock += 1_000;
    const at = new Date(this.clock).toISOString();
    const gross = 1_000 + ((step * 104_729) % 499_000);
    const feeAmount = Math.round(gross * 0.025);
    switch (step % 8) {
      case 0:
      case 7:
        return { type: 'RecordPayment', invoiceId: randomUUID(), netAmount: gross - feeAmount, feeAmount, releaseAt: null, at };
      case 1:
        this.holdInvoice = randomUUID();
        return { type: 'RecordPayment', invoiceId: this.holdInvoice, netAmount: gross - feeAmount, feeAmount, releaseAt: at, at };
      case 2:
        this.payoutId = `payout-${randomUUID()}`;
        this.payoutAmount = Math.max(1, Math.floor(available / 2));
        return { type: 'ReserveFunds', reservationId: this.payoutId, purpose: 'payout', amount: this.payoutAmount, at };
      case 3:
        return { type: 'SettleReservation', reservationId: this.payoutId, feeAmount: Math.min(1_500, Math.floor(this.payoutAmount / 100)), at };
      case 4:
        return { type: 'ReleaseHold', invoiceId: this.holdInvoice, at };
      case 5:
        this.refundId = `refund-${randomUUID()}`;
        return { type: 'ReserveFunds', reservationId: this.refundId, purpose: 'refund', amount: Math.max(1, Math.min(available, 25_000)), at };
      default:
        return step % 16 === 6
          ? { type: 'SettleReservation', reservationId: this.refundId, at }
          : { type: 'ReleaseReservation', reservationId: this.refundId, at };
    }
  }
}

/**
 * Latencies (ms) of the measured commands, one array per ledger, and how many of them
 * also wrote a snapshot (one entry per command, so the command that brings the ledger
 * to a multiple of LEDGER_SNAPSHOT_EVERY entries is the one that takes it).
 */
async function measure(
  book: LedgerBook,
  ledgers: readonly SeededLedger[],
  settings: Settings,
  progress: (message: string) => void,
): Promise<{ latencies: number[][]; snapshotsTaken: number[] }> {
  const cycles = ledgers.map(() => new CommandCycle());
  const available = ledgers.map((l) => l.state.balances.available as number);
  const latencies = ledgers.map((): number[] => []);
  const snapshotsTaken = ledgers.map(() => 0);
  const total = settings.warmup + settings.commands;
  for (let i = 0; i < total; i++) {
    if (i === settings.warmup) progress('ledger: warm-up done, measuring');
    const order = i % 2 === 0 ? ledgers.map((_, k) => k) : ledgers.map((_, k) => ledgers.length - 1 - k);
    for (const k of order) {
      const request = cycles[k]!.next(available[k]!);
      const started = nowMs();
      const posted = await book.post(ledgers[k]!.ledger, request);
      const took = nowMs() - started;
      if (posted.entry === null) throw new Error(`ledger: ${request.type} on ledger ${k} posted nothing (a repeat)`);
      available[k] = posted.state.balances.available;
      if (i >= settings.warmup) {
        latencies[k]!.push(took);
        if (posted.state.entries % LEDGER_SNAPSHOT_EVERY === 0) snapshotsTaken[k]!++;
      }
    }
  }
  return { latencies, snapshotsTaken };
}
