/**
 * The replay case of the ledger on any event store, in process: a realistic history
 * (seed:load's generator, one busy merchant, so its ledgers grow well past the
 * window of recent causes) is written into the store; the ledger read model holds
 * part of it (the cause index lags, as after a long projector outage or a restore);
 * then the process managers that post to the ledger (payments_to_ledger,
 * refund_outcomes, payout_outcomes) are run over the whole history from position
 * zero, twice, as after their checkpoints were reset. Every ledger must keep its
 * entries, balances and invariants, and no cause may be posted twice. Then the
 * ledger read model is brought to the head and `ledger:verify` (verifyLedgers) is
 * run over the log, the read model and the stored snapshots.
 *
 * Events are handed to the process managers in log order from the streams the
 * history wrote (not from $all), so that the case also runs on a shared
 * EventStoreDB whose $all holds other events.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { DEFAULT_PAYOUT_TERMS } from '#domain';
import { comparePositions, EventStore, RecordedEvent } from '#event-store';
import { entryViolations, evolve, initialLedgerState, LEDGER_CATEGORY, LedgerEntryPostedData, LedgerState, RECENT_CAUSES_KEPT, stateViolations } from '#ledger';
import { verifyLedgers, VerifyProblem } from '#payments/ledger-verification';
import { isReactor, LogSubscriber } from '#event-store/projections';
import { ledgerProjection } from '#payments/read-models';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { allReactors } from '#payments/reactors';
import { seedLoad } from '../../apps/tools/src/seed/seed-load';
import { NestFactory } from '@nestjs/core';
import { CommandBus } from '@nestjs/cqrs';
import { ProjectorModule } from '../../apps/projector/src/projector.module';
import type { Infrastructure } from '#payments/composition';
import { createServices } from '#payments/services';
import { visibleHead } from './project-to-head';

export interface LedgerOutcome {
  readonly entries: number;
  readonly balances: LedgerState['balances'];
  readonly problems: readonly string[];
}

export interface ReplayCaseResult {
  /** Ledger stream → its entries and balances, replayed from the store with every invariant checked. */
  readonly before: ReadonlyMap<string, LedgerOutcome>;
  readonly afterFirstReplay: ReadonlyMap<string, LedgerOutcome>;
  readonly afterSecondReplay: ReadonlyMap<string, LedgerOutcome>;
  /** Entries of the longest ledger (it must exceed the window for the case to mean anything). */
  readonly longestLedger: number;
  /** Events the process managers were handed in each replay. */
  readonly replayedEvents: number;
  /** What ledger:verify found wrong with this history's ledgers (log, read model, snapshots). */
  readonly verifyProblems: readonly VerifyProblem[];
  /** Stored snapshots ledger:verify compared with their re-folded ledgers. */
  readonly snapshotsVerified: number;
}

/** The store, recording the streams appended to. */
function recordingStreams(store: EventStore): { store: EventStore; streams: Set<string> } {
  const streams = new Set<string>();
  const recording: EventStore = {
    appendToStream: (name, events, options) => {
      streams.add(name);
      return store.appendToStream(name, events, options);
    },
    readStream: (name, options) => store.readStream(name, options),
    readAll: (options) => store.readAll(options),
    subscribeToAll: (options) => store.subscribeToAll(options),
    headPosition: () => store.headPosition(),
    close: () => store.close(),
  };
  return { store: recording, streams };
}

async function inLogOrder(store: EventStore, streams: Iterable<string>): Promise<RecordedEvent[]> {
  const all: RecordedEvent[] = [];
  for (const name of streams) all.push(...(await store.readStream(name)));
  return all.sort((a, b) => comparePositions(a.position, b.position));
}

/** Each ledger replayed from its stream: entries, balances, and what is wrong (invariants, a cause twice, a gap). */
async function ledgers(store: EventStore, streams: Iterable<string>): Promise<Map<string, LedgerOutcome>> {
  const out = new Map<string, LedgerOutcome>();
  for (const name of [...streams].filter((s) => s.startsWith(`${LEDGER_CATEGORY}-`)).sort()) {
    const events = await store.readStream(name);
    const problems: string[] = [];
    const causes = new Set<string>();
    let state = initialLedgerState();
    events.forEach((event, i) => {
      const data = event.data as unknown as LedgerEntryPostedData;
      if (event.revision !== BigInt(i)) problems.push(`revision ${event.revision} at position ${i}`);
      if (causes.has(data.cause)) problems.push(`cause ${data.cause} posted again at revision ${event.revision}`);
      causes.add(data.cause);
      const entry = { type: 'LedgerEntryPosted' as const, data };
      state = evolve(state, entry);
      for (const v of [...entryViolations(entry), ...stateViolations(state, data.entryId)]) problems.push(`${v.rule}: ${v.detail}`);
    });
    out.set(name, { entries: events.length, balances: state.balances, problems });
  }
  return out;
}

/**
 * Hands the events to each projection or reactor, in batches, as its runner would (only
 * those its filter keeps): a reactor's `react` (the process managers post there); a
 * projection's `prepare` before the transaction, then `apply` inside it.
 */
async function run(pool: Pool, projections: readonly LogSubscriber[], events: readonly RecordedEvent[]): Promise<void> {
  for (const projection of projections) {
    const kept = events.filter(
      (e) =>
        (!projection.filter?.streamNamePrefixes || projection.filter.streamNamePrefixes.some((p) => e.streamName.startsWith(p))) &&
        (!projection.filter?.eventTypePrefixes || projection.filter.eventTypePrefixes.some((p) => e.type.startsWith(p))),
    );
    for (let i = 0; i < kept.length; i += 250) {
      const batch = kept.slice(i, i + 250);
      if (isReactor(projection)) {
        await projection.react(batch);
        continue;
      }
      const prepared: unknown = projection.prepare ? await projection.prepare(batch) : undefined;
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await projection.apply(client, batch, prepared);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    }
  }
}

/**
 * Writes the history into `store` (read models, registry, snapshots in `pool`), then
 * replays the process managers twice from zero. `events`: size of the history.
 */
export async function processManagerReplayCase(store: EventStore, pool: Pool, options: { events: number; seed: string }): Promise<ReplayCaseResult> {
  const secrets = new SecretBox(fixedKeys([randomBytes(32)]));
  const recording = recordingStreams(store);
  await seedLoad(
    { pool, store: recording.store, terms: { refundProcessingSeconds: 10, payoutTerms: DEFAULT_PAYOUT_TERMS, usdtRubRate: 95_00 }, secrets },
    { events: options.events, seed: options.seed, merchants: 1, concurrency: 4 },
  );
  const history = await inLogOrder(store, recording.streams);
  // The ledger read model (the cause index) holds the first half of the history only.
  const ledgerEvents = history.filter((e) => e.streamName.startsWith(`${LEDGER_CATEGORY}-`));
  await run(pool, [ledgerProjection], ledgerEvents.slice(0, Math.floor(ledgerEvents.length / 2)));

  const before = await ledgers(store, recording.streams);
  // The process managers as the projector runs them: sending commands on the CommandBus
  // of its application context, over the gateway's services (the book with its cause index).
  const services = createServices({
    pool,
    store,
    secrets,
    config: { refundProcessingSeconds: 10, payoutTerms: DEFAULT_PAYOUT_TERMS, usdtRubRate: 95_00 },
  } as unknown as Infrastructure);
  const context = await NestFactory.createApplicationContext(ProjectorModule.register(services, pool, store), { logger: false, abortOnError: false });
  const commands = context.get(CommandBus);
  const processManagers = allReactors(commands);

  try {
    await run(pool, processManagers, history);
  } finally {
    await context.close();
  }
  const afterFirstReplay = await ledgers(store, recording.streams);
  const again = await NestFactory.createApplicationContext(ProjectorModule.register(services, pool, store), { logger: false, abortOnError: false });
  try {
    const commandsAgain = again.get(CommandBus);
    await run(pool, allReactors(commandsAgain), history);
  } finally {
    await again.close();
  }
  const afterSecondReplay = await ledgers(store, recording.streams);

  // ledger:verify: the read model brought to the head of the log (its checkpoint with it).
  await run(pool, [ledgerProjection], ledgerEvents.slice(Math.floor(ledgerEvents.length / 2)));
  const head = await visibleHead(pool, store);
  await pool.query(
    `INSERT INTO projection_checkpoints (projection, commit_position, prepare_position) VALUES ('ledger', $1, $2)
     ON CONFLICT (projection) DO UPDATE SET commit_position = EXCLUDED.commit_position, prepare_position = EXCLUDED.prepare_position`,
    [head!.commit.toString(), head!.prepare.toString()],
  );
  const report = await verifyLedgers(pool, store);

  return {
    before,
    afterFirstReplay,
    afterSecondReplay,
    longestLedger: Math.max(...[...before.values()].map((l) => l.entries)),
    replayedEvents: history.length,
    // Only this history's ledgers: a shared EventStoreDB's log holds others, which this database's read model does not.
    verifyProblems: report.problems.filter((p) => recording.streams.has(p.ledger)),
    snapshotsVerified: report.snapshotsChecked,
  };
}

/** Well past the window: the longest ledger must be at least this long for the case to cross it. */
export const PAST_THE_WINDOW = RECENT_CAUSES_KEPT + 200;
