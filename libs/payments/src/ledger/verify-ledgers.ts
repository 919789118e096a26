import { isDeepStrictEqual } from 'node:util';
import { inTransaction } from '#platform/database';
import type { Pool } from 'pg';
import type { EventStore, Position } from '#event-store';
import { comparePositions } from '#event-store';
import {
  checkLedgerSnapshot,
  entryViolations,
  Balances,
  LEDGER_ACCOUNTS,
  LEDGER_CATEGORY,
  LEDGER_FOLD_VERSION,
  LedgerEntryPostedData,
  ledgerEntryId,
  ledgerIdFromStream,
  LedgerReplay,
  LedgerState,
} from '#ledger';
import { readCheckpoint } from '#event-store/projections';

export interface VerifyProblem {
  readonly ledger: string;
  readonly kind:
    | 'invariant'
    | 'duplicate_cause'
    | 'duplicate_entry'
    | 'revision_gap'
    | 'balance_differs'
    | 'entry_count_differs'
    | 'missing_in_read_model'
    | 'unknown_in_read_model'
    | 'snapshot_differs';
  readonly detail: string;
}

export interface VerifyReport {
  readonly ledgers: number;
  readonly entries: number;
  readonly eventsRead: number;
  /** Stored ledger snapshots of the current fold version, each compared with the ledger re-folded to its revision. */
  readonly snapshotsChecked: number;
  readonly comparedAt: Position | null;
  readonly problems: readonly VerifyProblem[];
  /** Facts worth printing that are not differences (e.g. the read model lagging the log). */
  readonly notes: readonly string[];
}

interface Replayed {
  readonly replay: LedgerReplay;
  lastRevision: bigint;
  /** The balances as of the read model's checkpoint (null: those of now, no later entry yet). */
  atCheckpoint: Balances | null;
  entriesAtCheckpoint: number;
}

/** Ledger events per page of the log (pass 1) and of a ledger's stream (pass 2). */
const PAGE = 2_000;
/** Ledgers whose streams are read at once in pass 2. */
const LEDGERS_AT_ONCE = 4;

/**
 * Replays every ledger from the global log, checks every invariant after every
 * entry (each entry balances, no merchant account below zero, all accounts sum to
 * zero, open holds and reservations match pending and reserved, no cause or entry
 * posted twice, no revision gap), compares every stored snapshot with the ledger
 * re-folded to its revision, and compares the ledgers as of the ledger projection's
 * checkpoint with its tables, read in one snapshot.
 *
 * Memory does not grow with the length of the log: pass 1 follows the ledger events of
 * the log in order, keeping per ledger only its state (which is bounded); pass 2 reads
 * each ledger's own stream, a few ledgers at once, for the one check that needs a
 * ledger's whole history at hand: no cause and no entry id twice. Entry ids are
 * derived from the ledger and the cause, so with no cause twice within each ledger no
 * two entries share an id; the few ids that are not so derived (none in a log the
 * gateway wrote) are counted across every ledger.
 */
export async function verifyLedgers(
  pool: Pool,
  store: EventStore,
  options: { onProgress?: (eventsRead: number, fraction: number) => void } = {},
): Promise<VerifyReport> {
  const problems: VerifyProblem[] = [];
  const notes: string[] = [];

  // The read model and its checkpoint, as of one instant.
  const { checkpoint, balances, counts } = await inTransaction(
    pool,
    async (snapshot) => ({
      checkpoint: (await readCheckpoint(snapshot, 'ledger'))?.position ?? { commit: 0n, prepare: 0n },
      balances: (
        await snapshot.query<{ account_id: string; mode: string; account: string; balance: string }>(
          'SELECT account_id, mode, account, balance FROM ledger_balances',
        )
      ).rows,
      counts: (
        await snapshot.query<{ account_id: string; mode: string; n: string }>('SELECT account_id, mode, count(*) AS n FROM ledger_entries GROUP BY 1, 2')
      ).rows,
    }),
    { isolation: 'REPEATABLE READ', readOnly: true },
  );

  // The stored snapshots (a cache the loader checks; here each is compared with the re-folded ledger).
  const snapshotRows = (
    await pool.query<{ stream_name: string; revision: string; schema_version: number; state: unknown }>(
      `SELECT stream_name, revision, schema_version, state FROM aggregate_snapshots WHERE stream_name LIKE '${LEDGER_CATEGORY}-%'`,
    )
  ).rows;
  const snapshots = new Map<string, { revision: bigint; stored: unknown }>();
  for (const row of snapshotRows) {
    if (row.schema_version === LEDGER_FOLD_VERSION) snapshots.set(row.stream_name, { revision: BigInt(row.revision), stored: row.state });
  }
  const staleSnapshots = snapshotRows.length - snapshots.size;
  if (staleSnapshots > 0) {
    notes.push(`${staleSnapshots} ledger snapshot(s) of another fold version: ignored when their ledger is loaded, not compared`);
  }
  const snapshotsChecked = snapshots.size;

  const head = await store.headPosition();
  if (head && comparePositions(checkpoint, head) < 0) {
    notes.push(
      `the ledger projection is at ${checkpoint.commit}/${checkpoint.prepare}, the log at ${head.commit}/${head.prepare}: the read model is compared as of its checkpoint`,
    );
  }

  // Pass 1: the ledger events of the log, in order.
  const ledgers = new Map<string, Replayed>();
  /** Entry ids not derived from their ledger and cause: counted across every ledger in pass 2. */
  const underivedIds = new Set<string>();
  let eventsRead = 0;
  let entries = 0;
  const subscription = store.subscribeToAll({
    filter: { streamNamePrefixes: [`${LEDGER_CATEGORY}-`], eventTypePrefixes: ['LedgerEntryPosted'] },
    maxBatchSize: PAGE,
  });
  try {
    for await (const batch of subscription) {
      for (const event of batch.events) {
        // The filter takes types by prefix: exactly LedgerEntryPosted here.
        if (event.type !== 'LedgerEntryPosted') continue;
        eventsRead++;
        entries++;
        const name = event.streamName;
        let replayed = ledgers.get(name);
        if (!replayed) {
          replayed = { replay: new LedgerReplay(), lastRevision: -1n, atCheckpoint: null, entriesAtCheckpoint: 0 };
          ledgers.set(name, replayed);
        }
        const data = event.data as unknown as LedgerEntryPostedData;
        if (event.revision !== replayed.lastRevision + 1n) {
          problems.push({ ledger: name, kind: 'revision_gap', detail: `revision ${event.revision} after ${replayed.lastRevision}` });
        }
        replayed.lastRevision = event.revision;
        const ledgerId = ledgerIdFromStream(name);
        if (!ledgerId || ledgerEntryId(ledgerId, data.cause) !== data.entryId) underivedIds.add(data.entryId);

        const ledgerEvent = { type: 'LedgerEntryPosted' as const, data };
        // The log is in order: the first entry past the checkpoint ends the ledger as of the checkpoint.
        const pastCheckpoint = comparePositions(event.position, checkpoint) > 0;
        if (pastCheckpoint && replayed.atCheckpoint === null) replayed.atCheckpoint = replayed.replay.balancesNow();
        replayed.replay.apply(ledgerEvent);
        for (const v of [...entryViolations(ledgerEvent), ...replayed.replay.violations(data.entryId)]) {
          problems.push({ ledger: name, kind: 'invariant', detail: `${v.rule} after entry ${v.entryId}: ${v.detail}` });
        }
        const snapshot = snapshots.get(name);
        if (snapshot && snapshot.revision === event.revision) {
          problems.push(...snapshotProblems(name, snapshot, replayed.replay.state(), data));
          snapshots.delete(name);
        }
        if (!pastCheckpoint) replayed.entriesAtCheckpoint++;
      }
      const fraction = head && head.prepare > 0n ? Number(batch.checkpoint.prepare) / Number(head.prepare) : 1;
      options.onProgress?.(eventsRead, Math.min(1, fraction) / 2);
      if (batch.caughtUp) break;
    }
  } finally {
    await subscription.unsubscribe();
  }

  for (const [name, snapshot] of snapshots) {
    const lastRevision = ledgers.get(name)?.lastRevision;
    problems.push({
      ledger: name,
      kind: 'snapshot_differs',
      detail: `snapshot at revision ${snapshot.revision}, but the stream ${lastRevision === undefined ? 'has no entry' : `ends at revision ${lastRevision}`}`,
    });
  }

  // Pass 2: each ledger's stream up to what pass 1 read, a few ledgers at once: no cause, no entry twice.
  const underived = new Map<string, { ledger: string; position: Position; cause: string }[]>();
  const names = [...ledgers.keys()];
  let ledgersDone = 0;
  let nextLedger = 0;
  const duplicates: VerifyProblem[][] = names.map(() => []);
  const readLedger = async () => {
    while (nextLedger < names.length) {
      const index = nextLedger++;
      const name = names[index]!;
      const upTo = ledgers.get(name)!.lastRevision;
      const causes = new Set<string>();
      const ids = new Set<string>();
      for (let from = 0n; from <= upTo;) {
        const page = await store.readStream(name, { fromRevision: from, maxCount: PAGE });
        for (const event of page) {
          if (event.revision > upTo) break;
          if (event.type !== 'LedgerEntryPosted') continue;
          eventsRead++;
          const data = event.data as unknown as LedgerEntryPostedData;
          if (causes.has(data.cause)) {
            duplicates[index]!.push({ ledger: name, kind: 'duplicate_cause', detail: `cause ${data.cause} posted again by entry ${data.entryId}` });
          }
          causes.add(data.cause);
          if (underivedIds.has(data.entryId)) {
            const seen = underived.get(data.entryId) ?? [];
            seen.push({ ledger: name, position: event.position, cause: data.cause });
            underived.set(data.entryId, seen);
          } else {
            if (ids.has(data.entryId)) duplicates[index]!.push({ ledger: name, kind: 'duplicate_entry', detail: `entry ${data.entryId}` });
            ids.add(data.entryId);
          }
        }
        if (page.length < PAGE) break;
        from = page[page.length - 1]!.revision + 1n;
      }
      ledgersDone++;
      options.onProgress?.(eventsRead, 0.5 + ledgersDone / names.length / 2);
    }
  };
  await Promise.all(Array.from({ length: Math.min(LEDGERS_AT_ONCE, names.length) }, readLedger));
  problems.push(...duplicates.flat());
  // An entry id not derived from its ledger and cause: every occurrence after the first in the log.
  for (const [entryId, occurrences] of underived) {
    const inLogOrder = [...occurrences].sort((a, b) => comparePositions(a.position, b.position));
    for (const again of inLogOrder.slice(1)) problems.push({ ledger: again.ledger, kind: 'duplicate_entry', detail: `entry ${entryId}` });
  }
  // Compare, both ways, with the read model.
  const key = (accountId: string, mode: string) => `${LEDGER_CATEGORY}-${mode}_${accountId}`;
  const stored = new Map<string, Map<string, bigint>>();
  for (const row of balances) {
    const name = key(row.account_id, row.mode);
    if (!stored.has(name)) stored.set(name, new Map());
    stored.get(name)!.set(row.account, BigInt(row.balance));
  }
  const storedCounts = new Map(counts.map((r) => [key(r.account_id, r.mode), Number(r.n)]));

  for (const [name, replayed] of ledgers) {
    if (!ledgerIdFromStream(name)) continue;
    const row = stored.get(name);
    if (replayed.entriesAtCheckpoint === 0) continue;
    if (!row) {
      problems.push({ ledger: name, kind: 'missing_in_read_model', detail: 'no balances in the read model' });
      continue;
    }
    for (const account of LEDGER_ACCOUNTS) {
      const expected = BigInt((replayed.atCheckpoint ?? replayed.replay.balancesNow())[account]);
      const actual = row.get(account) ?? 0n;
      if (expected !== actual) {
        problems.push({ ledger: name, kind: 'balance_differs', detail: `${account}: log says ${expected}, read model says ${actual}` });
      }
    }
    const n = storedCounts.get(name) ?? 0;
    if (n !== replayed.entriesAtCheckpoint) {
      problems.push({ ledger: name, kind: 'entry_count_differs', detail: `log has ${replayed.entriesAtCheckpoint} entries, read model ${n}` });
    }
  }
  for (const name of new Set([...stored.keys(), ...storedCounts.keys()])) {
    if (!ledgers.has(name)) problems.push({ ledger: name, kind: 'unknown_in_read_model', detail: 'the read model has a ledger the log does not' });
  }

  return { ledgers: ledgers.size, entries, eventsRead, snapshotsChecked, comparedAt: checkpoint, problems, notes };
}

/** What differs between a stored snapshot and the ledger re-folded to its revision (`replayed`). */
function snapshotProblems(
  ledger: string,
  snapshot: { revision: bigint; stored: unknown },
  replayed: LedgerState,
  entry: LedgerEntryPostedData,
): VerifyProblem[] {
  const problems: VerifyProblem[] = [];
  const at = `snapshot at revision ${snapshot.revision}`;
  const checked = checkLedgerSnapshot(snapshot.stored, snapshot.revision, { data: entry });
  if ('problems' in checked) problems.push({ ledger, kind: 'snapshot_differs', detail: `${at} fails its checks: ${checked.problems.join('; ')}` });
  const stored = (snapshot.stored as { state?: Partial<LedgerState> } | null)?.state;
  // As stored (JSON): the same plain data, whatever the order of keys.
  const expected = JSON.parse(JSON.stringify(replayed)) as LedgerState;
  if (!stored || !isDeepStrictEqual(stored, expected)) {
    const differs: string[] = [];
    for (const account of LEDGER_ACCOUNTS) {
      const had = stored?.balances?.[account];
      if (had !== expected.balances[account]) differs.push(`${account}: log says ${expected.balances[account]}, snapshot says ${String(had)}`);
    }
    for (const part of ['holds', 'reservations', 'recentCauses', 'recentPayouts', 'entries'] as const) {
      if (!isDeepStrictEqual(stored?.[part], expected[part])) differs.push(`${part} differ`);
    }
    problems.push({ ledger, kind: 'snapshot_differs', detail: `${at} differs from the ledger re-folded from its stream: ${differs.join('; ')}` });
  }
  return problems;
}
