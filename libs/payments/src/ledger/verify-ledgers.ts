import { isDeepStrictEqual } from 'node:util';
import { inTransaction } from '#platform/database';
import type { Pool } from 'pg';
import type { EventStore, Position, RecordedEvent } from '#event-store';
import { comparePositions } from '#event-store';
import {
  checkLedgerSnapshot,
  entryViolations,
  evolve,
  initialLedgerState,
  LEDGER_ACCOUNTS,
  LEDGER_CATEGORY,
  LEDGER_FOLD_VERSION,
  LedgerEntryPostedData,
  ledgerIdFromStream,
  LedgerState,
  stateViolations,
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
  state: LedgerState;
  lastRevision: bigint;
  causes: Set<string>;
  /** The state as of the read model's checkpoint. */
  atCheckpoint: LedgerState;
  entriesAtCheckpoint: number;
}

/**
 * Replays every ledger from the global log, checks every invariant after every
 * entry (each entry balances, no merchant account below zero, all accounts sum to
 * zero, open holds and reservations match pending and reserved, no cause or entry
 * posted twice, no revision gap), compares every stored snapshot with the ledger
 * re-folded to its revision, and compares the ledgers as of the ledger projection's
 * checkpoint with its tables, read in one snapshot.
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

  const ledgers = new Map<string, Replayed>();
  const entryIds = new Set<string>();
  let eventsRead = 0;
  let entries = 0;
  let cursor: Position | 'start' = 'start';
  for (;;) {
    const page: RecordedEvent[] = await store.readAll({ after: cursor, maxCount: 2000 });
    for (const event of page) {
      eventsRead++;
      if (!event.streamName.startsWith(`${LEDGER_CATEGORY}-`) || event.type !== 'LedgerEntryPosted') continue;
      entries++;
      const name = event.streamName;
      let replayed = ledgers.get(name);
      if (!replayed) {
        replayed = { state: initialLedgerState(), lastRevision: -1n, causes: new Set(), atCheckpoint: initialLedgerState(), entriesAtCheckpoint: 0 };
        ledgers.set(name, replayed);
      }
      const data = event.data as unknown as LedgerEntryPostedData;
      if (event.revision !== replayed.lastRevision + 1n) {
        problems.push({ ledger: name, kind: 'revision_gap', detail: `revision ${event.revision} after ${replayed.lastRevision}` });
      }
      replayed.lastRevision = event.revision;
      if (replayed.causes.has(data.cause)) {
        problems.push({ ledger: name, kind: 'duplicate_cause', detail: `cause ${data.cause} posted again by entry ${data.entryId}` });
      }
      replayed.causes.add(data.cause);
      if (entryIds.has(data.entryId)) problems.push({ ledger: name, kind: 'duplicate_entry', detail: `entry ${data.entryId}` });
      entryIds.add(data.entryId);

      const ledgerEvent = { type: 'LedgerEntryPosted' as const, data };
      replayed.state = evolve(replayed.state, ledgerEvent);
      for (const v of [...entryViolations(ledgerEvent), ...stateViolations(replayed.state, data.entryId)]) {
        problems.push({ ledger: name, kind: 'invariant', detail: `${v.rule} after entry ${v.entryId}: ${v.detail}` });
      }
      const snapshot = snapshots.get(name);
      if (snapshot && snapshot.revision === event.revision) {
        problems.push(...snapshotProblems(name, snapshot, replayed.state, data));
        snapshots.delete(name);
      }
      if (comparePositions(event.position, checkpoint) <= 0) {
        replayed.atCheckpoint = replayed.state;
        replayed.entriesAtCheckpoint++;
      }
    }
    if (page.length > 0) {
      cursor = page[page.length - 1]!.position;
      const fraction = head ? Number(page[page.length - 1]!.position.prepare) / Number(head.prepare) : 1;
      options.onProgress?.(eventsRead, Math.min(1, fraction));
    }
    if (page.length < 2000) break;
  }

  for (const [name, snapshot] of snapshots) {
    const last = ledgers.get(name)?.lastRevision;
    problems.push({
      ledger: name,
      kind: 'snapshot_differs',
      detail: `snapshot at revision ${snapshot.revision}, but the stream ${last === undefined ? 'has no entry' : `ends at revision ${last}`}`,
    });
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
      const expected = BigInt(replayed.atCheckpoint.balances[account]);
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
