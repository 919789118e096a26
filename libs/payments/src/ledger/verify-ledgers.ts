import { isDeepStrictEqual } from 'node:util';
import { inTransaction } from '#platform/database';
import type { Pool } from 'pg';
import type { EventStore, Position, RecordedEvent } from '#event-store';
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

/** What pass 2 keeps of a ledger for the comparison with the read model. */
interface Replayed {
  /** The balances as of the read model's checkpoint. */
  atCheckpoint: Balances;
  entriesAtCheckpoint: number;
}

/** Ledger events per page of the log (pass 1) and of a ledger's stream (pass 2). */
const PAGE = 2_000;
/** Ledgers whose streams are read (and held in memory) at once in passes 2 and 3. */
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
 * the log only to learn which ledgers there are and how far each goes; pass 2 replays
 * each ledger from its own stream, a few ledgers at once, and checks everything a
 * ledger's history decides (invariants, revisions, causes and entry ids twice,
 * snapshots, the balances as of the checkpoint), holding one ledger's causes at a time.
 * Entry ids are derived from the ledger and the cause, so with no cause twice within
 * each ledger no two entries share an id; ids that are not so derived (none in a log
 * the gateway wrote) are looked for in every ledger by pass 3, which runs only then.
 */
export async function verifyLedgers(
  pool: Pool,
  store: EventStore,
  options: {
    onProgress?: (eventsRead: number, fraction: number) => void;
    /**
     * Which ledgers there are and up to which revision, as pass 1 would learn them from
     * the log (PostgreSQL: lastRevisionsOfType, one statement): pass 1 is then skipped.
     */
    ledgerHeads?: () => Promise<ReadonlyMap<string, bigint>>;
  } = {},
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

  // The stored snapshots (a cache the loader checks; here each is compared with the
  // re-folded ledger): their revisions now, each one's state when its ledger is replayed.
  const snapshotRows = (
    await pool.query<{ stream_name: string; revision: string; schema_version: number }>(
      `SELECT stream_name, revision, schema_version FROM aggregate_snapshots WHERE stream_name LIKE '${LEDGER_CATEGORY}-%'`,
    )
  ).rows;
  const snapshots = new Map<string, bigint>();
  for (const row of snapshotRows) {
    if (row.schema_version === LEDGER_FOLD_VERSION) snapshots.set(row.stream_name, BigInt(row.revision));
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

  // Pass 1: the ledger events of the log, in order: which ledgers, and up to which revision.
  const lastRevisions = new Map<string, bigint>();
  let eventsRead = 0;
  if (options.ledgerHeads) {
    for (const [name, revision] of await options.ledgerHeads()) lastRevisions.set(name, revision);
  } else {
    await followLedgerEvents();
  }
  async function followLedgerEvents(): Promise<void> {
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
          const last = lastRevisions.get(event.streamName);
          if (last === undefined || event.revision > last) lastRevisions.set(event.streamName, event.revision);
        }
        const fraction = head && head.prepare > 0n ? Number(batch.checkpoint.prepare) / Number(head.prepare) : 1;
        options.onProgress?.(eventsRead, Math.min(1, fraction) / 3);
        if (batch.caughtUp) break;
      }
    } finally {
      await subscription.unsubscribe();
    }
  }
  for (const [name, revision] of snapshots) {
    if (!lastRevisions.has(name)) {
      problems.push({ ledger: name, kind: 'snapshot_differs', detail: `snapshot at revision ${revision}, but the stream has no entry` });
    }
  }

  // Pass 2: each ledger replayed from its own stream up to what pass 1 saw, a few at once.
  const names = [...lastRevisions.keys()];
  const ledgers = new Map<string, Replayed>();
  const found: VerifyProblem[][] = names.map(() => []);
  /** Entry ids not derived from their ledger and cause: looked for in every ledger by pass 3. */
  const underivedIds = new Set<string>();
  let entries = 0;
  let ledgersDone = 0;
  const eachLedger = async (visit: (name: string, index: number) => Promise<void>, from: number, to: number) => {
    let next = 0;
    const worker = async () => {
      while (next < names.length) {
        const index = next++;
        await visit(names[index]!, index);
        ledgersDone++;
        options.onProgress?.(eventsRead, Math.min(1, from + ((to - from) * ledgersDone) / names.length));
      }
    };
    ledgersDone = 0;
    await Promise.all(Array.from({ length: Math.min(LEDGERS_AT_ONCE, names.length) }, worker));
  };
  /** The ledger's entries up to revision `upTo`, in pages. */
  async function* entriesOf(name: string, upTo: bigint): AsyncGenerator<{ event: RecordedEvent; data: LedgerEntryPostedData }> {
    for (let from = 0n; from <= upTo;) {
      const page = await store.readStream(name, { fromRevision: from, maxCount: PAGE });
      for (const event of page) {
        if (event.revision > upTo) return;
        if (event.type === 'LedgerEntryPosted') yield { event, data: event.data as unknown as LedgerEntryPostedData };
      }
      if (page.length < PAGE) return;
      from = page[page.length - 1]!.revision + 1n;
    }
  }

  await eachLedger(
    async (name, index) => {
      const problemsOf = found[index]!;
      const upTo = lastRevisions.get(name)!;
      const ledgerId = ledgerIdFromStream(name);
      const snapshotRevision = snapshots.get(name);
      const snapshot =
        snapshotRevision === undefined
          ? null
          : ((
              await pool.query<{ revision: string; state: unknown }>(
                'SELECT revision, state FROM aggregate_snapshots WHERE stream_name = $1 AND schema_version = $2',
                [name, LEDGER_FOLD_VERSION],
              )
            ).rows.map((r) => ({ revision: BigInt(r.revision), stored: r.state }))[0] ?? null);
      const replay = new LedgerReplay();
      const causes = new Set<string>();
      const ids = new Set<string>();
      let lastRevision = -1n;
      let atCheckpoint: Balances | null = null;
      let entriesAtCheckpoint = 0;
      let snapshotMatched = false;
      for await (const { event, data } of entriesOf(name, upTo)) {
        eventsRead++;
        entries++;
        if (event.revision !== lastRevision + 1n) {
          problemsOf.push({ ledger: name, kind: 'revision_gap', detail: `revision ${event.revision} after ${lastRevision}` });
        }
        lastRevision = event.revision;
        if (causes.has(data.cause)) {
          problemsOf.push({ ledger: name, kind: 'duplicate_cause', detail: `cause ${data.cause} posted again by entry ${data.entryId}` });
        }
        causes.add(data.cause);
        if (ids.has(data.entryId)) problemsOf.push({ ledger: name, kind: 'duplicate_entry', detail: `entry ${data.entryId}` });
        ids.add(data.entryId);
        if (!ledgerId || ledgerEntryId(ledgerId, data.cause) !== data.entryId) underivedIds.add(data.entryId);

        const ledgerEvent = { type: 'LedgerEntryPosted' as const, data };
        // A stream is in log order: its first entry past the checkpoint ends the ledger as of the checkpoint.
        const pastCheckpoint = comparePositions(event.position, checkpoint) > 0;
        if (pastCheckpoint && atCheckpoint === null) atCheckpoint = replay.balancesNow();
        replay.apply(ledgerEvent);
        for (const v of [...entryViolations(ledgerEvent), ...replay.violations(data.entryId)]) {
          problemsOf.push({ ledger: name, kind: 'invariant', detail: `${v.rule} after entry ${v.entryId}: ${v.detail}` });
        }
        if (snapshot && snapshot.revision === event.revision) {
          problemsOf.push(...snapshotProblems(name, snapshot, replay.state(), data));
          snapshotMatched = true;
        }
        if (!pastCheckpoint) entriesAtCheckpoint++;
      }
      if (snapshot && !snapshotMatched) {
        problemsOf.push({
          ledger: name,
          kind: 'snapshot_differs',
          detail: `snapshot at revision ${snapshot.revision}, but the stream ends at revision ${lastRevision}`,
        });
      }
      ledgers.set(name, { atCheckpoint: atCheckpoint ?? replay.balancesNow(), entriesAtCheckpoint });
    },
    1 / 3,
    1,
  );
  problems.push(...found.flat());

  // Pass 3, only for entry ids not derived from their ledger and cause: every occurrence in
  // any ledger after the first in the log, unless pass 2 reported it (a repeat within one ledger).
  if (underivedIds.size > 0) {
    const occurrences = new Map<string, { ledger: string; position: Position }[]>();
    await eachLedger(
      async (name) => {
        for await (const { event, data } of entriesOf(name, lastRevisions.get(name)!)) {
          if (!underivedIds.has(data.entryId)) continue;
          const list = occurrences.get(data.entryId) ?? [];
          list.push({ ledger: name, position: event.position });
          occurrences.set(data.entryId, list);
        }
      },
      1,
      1,
    );
    for (const [entryId, list] of occurrences) {
      const inLogOrder = [...list].sort((x, y) => comparePositions(x.position, y.position));
      inLogOrder.forEach((again, i) => {
        if (i > 0 && !inLogOrder.slice(0, i).some((earlier) => earlier.ledger === again.ledger)) {
          problems.push({ ledger: again.ledger, kind: 'duplicate_entry', detail: `entry ${entryId}` });
        }
      });
    }
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
      const expected = BigInt(replayed.atCheckpoint[account]);
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
