import { createHash, Hash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { inTransaction } from '#platform/database';
import type { Pool, PoolClient } from 'pg';
import type { EventStore, Position, RecordedEvent } from '#event-store';
import { comparePositions, ForwardedEvent, repeatedDataFields } from '#event-store';
import {
  checkLedgerSnapshot,
  entryViolations,
  Balances,
  LEDGER_ACCOUNTS,
  LEDGER_CATEGORY,
  currentLedgerFoldVersion,
  MERCHANT_ACCOUNTS,
  LedgerEntryPostedData,
  ledgerEntryId,
  ledgerIdFromStream,
  LedgerReplay,
  LedgerState,
  recentCausesFrom,
  recentCausesOf,
} from '#ledger';
import { readCheckpoint } from '#event-store/projections';
import { lockReadModelTables } from '../read-models/table-locks';
import { ledgerProjection } from '../ledger/ledger.read-model';

export interface VerifyProblem {
  readonly ledger: string;
  readonly kind:
    | 'invariant'
    | 'duplicate_cause'
    | 'duplicate_entry'
    | 'revision_gap'
    | 'balance_differs'
    | 'entry_count_differs'
    | 'entries_differ'
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
  /** Its entries up to the checkpoint as the ledger projection writes their rows (entryRowLine), as a ChunkedDigest. */
  rowsDigest: string;
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
 *
 * With `inLogOrder` (ledger:verify on PostgreSQL, decision 0123) there are no passes:
 * the ledger events come from the one read of the log that also recomputes its hash
 * chains, and every ledger is checked at once as they come (memory: one state per
 * ledger, not per entry); the causes and entry ids used twice are found by the database
 * (repeatedDataFields) up to the same position, not by sets of every one seen.
 */
export async function verifyLedgers(
  pool: Pool,
  store: EventStore,
  options: {
    onProgress?: (eventsRead: number, fraction: number) => void;
    /**
     * The ledger events as a read of the whole log in log order meets them (PostgreSQL:
     * the chain verification's read, decision 0123): every ledger is then replayed from
     * that one read, all at once, instead of each from its own stream; repeated causes and
     * entry ids are found by the store (ledgerRepeats), not in memory.
     */
    inLogOrder?: LedgerEntriesInLogOrder;
  } = {},
): Promise<VerifyReport> {
  const snapshot = readModelSnapshot(pool);
  try {
    return await verifyAgainst(snapshot, pool, store, options);
  } finally {
    await snapshot.end();
  }
}

async function verifyAgainst(
  readModel: ReadModelSnapshot,
  pool: Pool,
  store: EventStore,
  options: NonNullable<Parameters<typeof verifyLedgers>[2]>,
): Promise<VerifyReport> {
  const problems: VerifyProblem[] = [];
  const notes: string[] = [];
  const { checkpoint, balances, counts } = await readModel.read;

  // The stored snapshots (a cache the loader checks; here each is compared with the
  // re-folded ledger): their revisions now, each one's state when its ledger is replayed.
  const snapshotRows = (
    await pool.query<{ stream_name: string; revision: string; schema_version: number }>(
      `SELECT stream_name, revision, schema_version FROM aggregate_snapshots WHERE stream_name LIKE '${LEDGER_CATEGORY}-%'`,
    )
  ).rows;
  const snapshots = new Map<string, bigint>();
  for (const row of snapshotRows) {
    if (row.schema_version === currentLedgerFoldVersion()) snapshots.set(row.stream_name, BigInt(row.revision));
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

  let eventsRead = 0;
  let entries = 0;
  const ledgers = new Map<string, Replayed>();
  const checkOf = (name: string, trackRepeats: boolean, snapshot: StoredSnapshot | null) =>
    new LedgerHistoryCheck(name, checkpoint, snapshot, trackRepeats ? { causes: new Set(), ids: new Set() } : null, trackRepeats ? underivedIds : null);
  /** Entry ids not derived from their ledger and cause: looked for in every ledger by pass 3. */
  const underivedIds = new Set<string>();
  const finishLedger = (check: LedgerHistoryCheck) => {
    entries += check.entries;
    ledgers.set(check.name, check.finish());
    return check.problems;
  };

  if (options.inLogOrder) {
    // Every ledger replayed at once from one read of the log in log order (decision 0123).
    const { follow } = options.inLogOrder;
    const states = await snapshotsCheckedWithoutTheirWindows(pool);
    const upTo = head ?? { commit: 0n, prepare: 0n };
    const checks = new Map<string, LedgerHistoryCheck>();
    const repeats = ledgerRepeats(pool, upTo);
    repeats.catch(() => undefined);
    await follow(upTo, (batch) => {
      for (const entry of batch) {
        let check = checks.get(entry.streamName);
        if (check === undefined) {
          const snapshot = snapshots.has(entry.streamName) ? (states.get(entry.streamName) ?? null) : null;
          check = new LedgerHistoryCheck(entry.streamName, checkpoint, snapshot, null, null, { recentCauses: false });
          checks.set(entry.streamName, check);
        }
        eventsRead++;
        check.entry(entry.revision, entry.position, entry.data);
      }
      const last = batch[batch.length - 1];
      if (last && head && head.prepare > 0n) options.onProgress?.(eventsRead, Math.min(1, Number(last.position.prepare) / Number(head.prepare)));
    });
    for (const [name, revision] of snapshots) {
      if (!checks.has(name)) {
        problems.push({ ledger: name, kind: 'snapshot_differs', detail: `snapshot at revision ${revision}, but the stream has no entry` });
      }
    }
    for (const check of checks.values()) problems.push(...finishLedger(check));
    problems.push(...(await repeats));
  } else {
    await replayEachLedger();
  }

  async function replayEachLedger(): Promise<void> {
    // Pass 1: the ledger events of the log, in order: which ledgers, and up to which revision.
    const lastRevisions = new Map<string, bigint>();
    await followLedgerEvents();
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
    const found: VerifyProblem[][] = names.map(() => []);
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
        const snapshotRevision = snapshots.get(name);
        const snapshot =
          snapshotRevision === undefined
            ? null
            : ((
                await pool.query<{ revision: string; state: unknown }>(
                  'SELECT revision, state FROM aggregate_snapshots WHERE stream_name = $1 AND schema_version = $2',
                  [name, currentLedgerFoldVersion()],
                )
              ).rows.map((r) => ({ revision: BigInt(r.revision), stored: r.state }))[0] ?? null);
        const check = checkOf(name, true, snapshot);
        for await (const { event, data } of entriesOf(name, lastRevisions.get(name)!)) {
          eventsRead++;
          check.entry(event.revision, event.position, data);
        }
        found[index] = finishLedger(check);
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
      for (const [entryId, list] of occurrences) problems.push(...repeatedAcrossLedgers(entryId, list));
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
  const storedDigests = await readModel.digests;
  const repeated = new Set(problems.filter((p) => p.kind === 'duplicate_entry' || p.kind === 'duplicate_cause').map((p) => p.ledger));
  const differing: string[] = [];

  for (const [name, replayed] of ledgers) {
    if (!ledgerIdFromStream(name)) continue;
    // Entries that posted nothing (refused reservations only) leave a ledger without balances rows: all zero.
    const row = stored.get(name) ?? (LEDGER_ACCOUNTS.every((account) => replayed.atCheckpoint[account] === 0) ? new Map<string, bigint>() : undefined);
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
    const countDiffers = n !== replayed.entriesAtCheckpoint;
    if (countDiffers) {
      problems.push({ ledger: name, kind: 'entry_count_differs', detail: `log has ${replayed.entriesAtCheckpoint} entries, read model ${n}` });
    }
    // A count that differs is located too: the entry one side has and the other not.
    if (!repeated.has(name) && (countDiffers || (n > 0 && storedDigests.get(name) !== replayed.rowsDigest))) differing.push(name);
  }
  // Located in the read model's snapshot: rows the projector wrote since are not in it.
  await readModel.lastly(async (client) => {
    for (const name of differing.slice(0, ENTRIES_LOCATED)) {
      problems.push({ ledger: name, kind: 'entries_differ', detail: await firstDifferingEntry(client, store, name, checkpoint) });
    }
  });
  for (const name of differing.slice(ENTRIES_LOCATED)) {
    problems.push({ ledger: name, kind: 'entries_differ', detail: 'its entries in the read model differ from the log (not located: see the ledgers above)' });
  }
  for (const name of new Set([...stored.keys(), ...storedCounts.keys()])) {
    if (!ledgers.has(name)) problems.push({ ledger: name, kind: 'unknown_in_read_model', detail: 'the read model has a ledger the log does not' });
  }

  return { ledgers: ledgers.size, entries, eventsRead, snapshotsChecked, comparedAt: checkpoint, problems, notes };
}

/** The read model as of one instant: one REPEATABLE READ transaction, open until `lastly` has run in it or `end`. */
interface ReadModelSnapshot {
  /** The ledger projection's checkpoint, the balances and each ledger's count of entries. */
  readonly read: Promise<{ checkpoint: Position; balances: BalanceRow[]; counts: CountRow[] }>;
  /** Each ledger's rows digest (readModelEntryDigests), computed while the log is replayed. */
  readonly digests: Promise<Map<string, string>>;
  /** Runs `work` in the snapshot, then ends it. */
  lastly(work: (client: PoolClient) => Promise<void>): Promise<void>;
  /** Ends the snapshot (a digest still running is cancelled): settles when its transaction has. */
  end(): Promise<void>;
}

function readModelSnapshot(pool: Pool): ReadModelSnapshot {
  let taken!: (read: Awaited<ReadModelSnapshot['read']>) => void;
  let digested!: (digests: Map<string, string>) => void;
  let last!: (work: ((client: PoolClient) => Promise<void>) | null) => void;
  const read = new Promise<Awaited<ReadModelSnapshot['read']>>((resolve) => (taken = resolve));
  const digests = new Promise<Map<string, string>>((resolve) => (digested = resolve));
  const lastWork = new Promise<((client: PoolClient) => Promise<void>) | null>((resolve) => (last = resolve));
  // Ended before the digests were read (the verification failed): they are not read, or their query is cancelled.
  // The connection is kept until the cancel is sent (it must not reach a query the pool runs next).
  let stopped = false;
  let digesting: number | null = null;
  let cancelling: Promise<unknown> = Promise.resolve();
  const ended = inTransaction(
    pool,
    async (client) => {
      // Before the snapshot: the tables this transaction reads, with the checkpoint of the same moment.
      await lockReadModelTables(client, ledgerProjection.tables);
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      taken({
        checkpoint: (await readCheckpoint(client, 'ledger'))?.position ?? { commit: 0n, prepare: 0n },
        balances: (await client.query<BalanceRow>('SELECT account_id, mode, account, balance FROM ledger_balances')).rows,
        counts: (await client.query<CountRow>('SELECT account_id, mode, count(*) AS n FROM ledger_entries GROUP BY 1, 2')).rows,
      });
      if (stopped) return;
      digesting = pid;
      try {
        digested(await readModelEntryDigests(client));
      } finally {
        digesting = null;
        await cancelling;
      }
      const work = await lastWork;
      if (work) await work(client);
    },
    { isolation: 'REPEATABLE READ', readOnly: true },
  );
  ended.catch(() => undefined);
  // A transaction that failed or ended before giving what is awaited: its error.
  const notRead = ended.then((): never => {
    throw new Error('the read model was not read');
  });
  notRead.catch(() => undefined);
  const readOrNot = Promise.race([read, notRead]);
  const digestsOrNot = Promise.race([digests, notRead]);
  // Not awaited when the verification failed first (its digest then cancelled).
  digestsOrNot.catch(() => undefined);
  return {
    read: readOrNot,
    digests: digestsOrNot,
    lastly: (work) => {
      last(work);
      return ended;
    },
    end: async () => {
      stopped = true;
      last(null);
      if (digesting !== null) cancelling = pool.query('SELECT pg_cancel_backend($1)', [digesting]).catch(() => undefined);
      await ended.catch(() => undefined);
    },
  };
}

/** A ledger entry as a read of the log in log order meets it. */
export interface LoggedLedgerEntry {
  readonly streamName: string;
  readonly revision: bigint;
  readonly position: Position;
  readonly data: LedgerEntryPostedData;
}

/** Events handed on by the log verification (`forward`) as the ledger entries they are (their data parsed). */
export const ledgerEntriesOf = (events: readonly ForwardedEvent[]): LoggedLedgerEntry[] =>
  events.map((e) => ({
    streamName: e.streamName,
    revision: e.revision,
    position: { commit: BigInt(e.commit), prepare: BigInt(e.prepare) },
    data: JSON.parse(e.dataJson) as LedgerEntryPostedData,
  }));

/** The ledger events of the log in log order, up to `upTo`: `follow` hands them to `feed` page by page and settles after the last. */
export interface LedgerEntriesInLogOrder {
  follow(upTo: Position, feed: (entries: readonly LoggedLedgerEntry[]) => void): Promise<void>;
}

/** A stored ledger snapshot of the current fold version: its revision and what is stored. */
interface StoredSnapshot {
  readonly revision: bigint;
  readonly stored: unknown;
  /**
   * Checked when it was loaded (snapshotsCheckedWithoutTheirWindows): `stored` is then
   * without its window of recent causes, kept as the digest of its causes (null: not a
   * window rememberCause makes) to compare with the causes the replay meets; the rest is
   * compared with the ledger replayed without a window.
   */
  readonly loaded?: { readonly checkProblems: readonly string[]; readonly window: StoredWindow | null };
}

/** Snapshots read and checked at once. */
const SNAPSHOTS_AT_ONCE = 50;

/** A stored window of recent causes: the revision of its first cause and the digest of its causes (CausesDigest). */
interface StoredWindow {
  readonly from: bigint;
  readonly digest: string;
}

/**
 * SHA-256 over causes in order, each as `<UTF-8 length>:<cause>,`: a window of recent
 * causes compared with the causes a replay meets without holding either.
 */
class CausesDigest {
  private readonly hash: Hash = createHash('sha256');

  add(cause: unknown): void {
    // As the jsonb `->>` of the entry's cause gives it (a cause is a string in every entry the gateway writes).
    const text = typeof cause === 'string' ? cause : cause === null || cause === undefined ? '' : JSON.stringify(cause);
    this.hash.update(`${Buffer.byteLength(text, 'utf8')}:${text},`);
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}

/**
 * A stored window as its digest, when it is what rememberCause makes of its causes
 * (recentCausesOf): it then equals the window the log gives at the snapshot's revision
 * exactly when its causes are those of the entries recentCausesFrom(revision + 1) to
 * the revision, in order (a window of at most RECENT_CAUSES_KEPT + a chunk never drops one).
 */
function storedWindowOf(window: unknown, revision: bigint): StoredWindow | null {
  if (!Array.isArray(window) || !window.every((chunk) => Array.isArray(chunk) && chunk.every((c) => typeof c === 'string'))) return null;
  const causes = (window as string[][]).flat();
  if (!isDeepStrictEqual(window, recentCausesOf(causes))) return null;
  const digest = new CausesDigest();
  for (const cause of causes) digest.add(cause);
  return { from: BigInt(recentCausesFrom(Number(revision) + 1)), digest: digest.digest() };
}

/**
 * The stored ledger snapshots of the current fold version, each checked as it is read
 * (checkLedgerSnapshot, with its stream's entry at its revision) and kept without its
 * window of recent causes, which becomes a digest (storedWindowOf): what ledger:verify in
 * log order needs to compare each snapshot with a ledger replayed without windows
 * (decision 0123); the replay compares the digest with the causes it meets. Read
 * SNAPSHOTS_AT_ONCE at a time; no window is held.
 */
async function snapshotsCheckedWithoutTheirWindows(pool: Pool): Promise<Map<string, StoredSnapshot>> {
  const checked = new Map<string, StoredSnapshot>();
  for (let after = ''; ;) {
    const rows = (
      await pool.query<{ stream_name: string; revision: string; state: unknown; entry: unknown }>(
        `SELECT s.stream_name, s.revision, s.state, e.data AS entry FROM aggregate_snapshots s
         LEFT JOIN events e ON e.stream_name = s.stream_name AND e.stream_revision = s.revision
         WHERE s.stream_name LIKE '${LEDGER_CATEGORY}-%' AND s.schema_version = $1 AND s.stream_name > $2
         ORDER BY s.stream_name LIMIT ${SNAPSHOTS_AT_ONCE}`,
        [currentLedgerFoldVersion(), after],
      )
    ).rows;
    if (rows.length === 0) return checked;
    after = rows[rows.length - 1]!.stream_name;
    for (const row of rows) {
      const revision = BigInt(row.revision);
      const state = (row.state as { state?: Partial<LedgerState> } | null)?.state;
      const { recentCauses, ...withoutWindow } = state ?? {};
      checked.set(row.stream_name, {
        revision,
        stored: state === undefined ? row.state : { ...(row.state as object), state: withoutWindow },
        loaded: { checkProblems: snapshotCheckProblems(row.state, revision, row.entry), window: storedWindowOf(recentCauses, revision) },
      });
    }
  }
}

/**
 * Everything one ledger's history decides, fed its entries in its stream's order:
 * every invariant after every entry, no revision gap, its stored snapshot equal to the
 * ledger re-folded to the snapshot's revision, the balances as of the read model's
 * checkpoint; and, when given sets to hold them (`seen`), no cause and no entry id
 * twice within the ledger, with entry ids not derived from the ledger and its cause
 * collected in `underivedIds`.
 */
class LedgerHistoryCheck {
  readonly problems: VerifyProblem[] = [];
  entries = 0;
  private readonly replay: LedgerReplay;
  private readonly ledgerId;
  private lastRevision = -1n;
  private atCheckpoint: Balances | null = null;
  private entriesAtCheckpoint = 0;
  private snapshotMatched = false;
  /** The rows the ledger projection writes for the entries up to the checkpoint (entryRowLine), as they come. */
  private readonly rows = new EntryRows();
  private readonly rowsDigest = new ChunkedDigest();
  /** The causes of the entries in the stored snapshot's window, as the replay meets them (a snapshot checked when loaded). */
  private windowMet: CausesDigest | null = null;
  /** Whether they were the stored window's, once the replay met the snapshot's revision (a log out of order may meet it twice). */
  private windowMatches: boolean | null = null;

  constructor(
    readonly name: string,
    private readonly checkpoint: Position,
    private readonly snapshot: StoredSnapshot | null,
    private readonly seen: { causes: Set<string>; ids: Set<string> } | null,
    private readonly underivedIds: Set<string> | null,
    /** Without `recentCauses`, the ledger is replayed without its window (its snapshot's was compared when loaded). */
    replayOptions: { readonly recentCauses: boolean } = { recentCauses: true },
  ) {
    this.ledgerId = ledgerIdFromStream(name);
    this.replay = new LedgerReplay(undefined, replayOptions);
  }

  entry(revision: bigint, position: Position, data: LedgerEntryPostedData): void {
    const ledger = this.name;
    this.entries++;
    if (revision !== this.lastRevision + 1n) {
      this.problems.push({ ledger, kind: 'revision_gap', detail: `revision ${revision} after ${this.lastRevision}` });
    }
    this.lastRevision = revision;
    if (this.seen) {
      const { causes, ids } = this.seen;
      if (causes.has(data.cause)) this.problems.push({ ledger, kind: 'duplicate_cause', detail: `cause ${data.cause} posted again by entry ${data.entryId}` });
      causes.add(data.cause);
      if (ids.has(data.entryId)) this.problems.push({ ledger, kind: 'duplicate_entry', detail: `entry ${data.entryId}` });
      ids.add(data.entryId);
    }
    if (this.underivedIds && (!this.ledgerId || ledgerEntryId(this.ledgerId, data.cause) !== data.entryId)) this.underivedIds.add(data.entryId);

    const ledgerEvent = { type: 'LedgerEntryPosted' as const, data };
    // A stream is in log order: its first entry past the checkpoint ends the ledger as of the checkpoint.
    const pastCheckpoint = comparePositions(position, this.checkpoint) > 0;
    if (pastCheckpoint && this.atCheckpoint === null) this.atCheckpoint = this.replay.balancesNow();
    this.replay.apply(ledgerEvent);
    for (const v of [...entryViolations(ledgerEvent), ...this.replay.violations(data.entryId)]) {
      this.problems.push({ ledger, kind: 'invariant', detail: `${v.rule} after entry ${v.entryId}: ${v.detail}` });
    }
    const window = this.snapshot?.loaded?.window;
    if (window && this.windowMatches === null && revision >= window.from && revision <= this.snapshot!.revision) {
      (this.windowMet ??= new CausesDigest()).add(data.cause);
    }
    if (this.snapshot && this.snapshot.revision === revision) {
      this.windowMatches ??= !this.snapshot.loaded || (!!window && this.windowMet?.digest() === window.digest);
      this.problems.push(...snapshotProblems(ledger, this.snapshot, this.replay.state(), data, this.windowMatches));
      this.snapshotMatched = true;
    }
    const line = this.rows.next(revision, position, data);
    if (!pastCheckpoint) {
      this.entriesAtCheckpoint++;
      this.rowsDigest.add(revision, line);
    }
  }

  /** After the ledger's last entry: what the comparison with the read model needs. */
  finish(): Replayed {
    if (this.snapshot && !this.snapshotMatched) {
      this.problems.push({
        ledger: this.name,
        kind: 'snapshot_differs',
        detail: `snapshot at revision ${this.snapshot.revision}, but the stream ends at revision ${this.lastRevision}`,
      });
    }
    return {
      atCheckpoint: this.atCheckpoint ?? this.replay.balancesNow(),
      entriesAtCheckpoint: this.entriesAtCheckpoint,
      rowsDigest: this.rowsDigest.digest(),
    };
  }
}

/**
 * An entry id carried more than once, by entries in log order: every one after the
 * first is reported, against its ledger, unless its ledger carried the id before (a
 * repeat within one ledger is reported by that ledger's own check).
 */
function repeatedAcrossLedgers(entryId: string, occurrences: readonly { ledger: string; position: Position }[]): VerifyProblem[] {
  const inLogOrder = [...occurrences].sort((x, y) => comparePositions(x.position, y.position));
  return inLogOrder
    .filter((again, i) => i > 0 && !inLogOrder.slice(0, i).some((earlier) => earlier.ledger === again.ledger))
    .map((again) => ({ ledger: again.ledger, kind: 'duplicate_entry', detail: `entry ${entryId}` }));
}

/**
 * The causes and entry ids the ledger events of the log (up to `upTo`) carry more than
 * once, found by the store (repeatedDataFields) instead of sets of every one seen: a
 * cause again within a ledger (each repeat, by its entry), an entry id again within a
 * ledger or in another one (each occurrence after the first, against its ledger).
 */
async function ledgerRepeats(pool: Pool, upTo: Position): Promise<VerifyProblem[]> {
  const repeated = await repeatedDataFields(pool, {
    streamNamePrefix: `${LEDGER_CATEGORY}-`,
    eventType: 'LedgerEntryPosted',
    upTo,
    fields: [
      { field: 'cause', withinStream: true },
      { field: 'entryId', withinStream: false },
    ],
  });
  const problems: VerifyProblem[] = [];
  for (const { field, value, events } of repeated) {
    if (field === 'cause') {
      const inLedgerOrder = [...events].sort((x, y) => (x.revision < y.revision ? -1 : x.revision > y.revision ? 1 : 0));
      for (const again of inLedgerOrder.slice(1)) {
        problems.push({ ledger: again.streamName, kind: 'duplicate_cause', detail: `cause ${value} posted again by entry ${String(again.data.entryId)}` });
      }
    } else {
      const seen = new Set<string>();
      for (const event of events) {
        if (seen.has(event.streamName)) problems.push({ ledger: event.streamName, kind: 'duplicate_entry', detail: `entry ${value}` });
        seen.add(event.streamName);
      }
      problems.push(
        ...repeatedAcrossLedgers(
          value,
          events.map((e) => ({ ledger: e.streamName, position: e.position })),
        ),
      );
    }
  }
  return problems;
}

/** What checkLedgerSnapshot finds wrong with a stored snapshot, given its stream's entry at its revision (null: none there). */
function snapshotCheckProblems(stored: unknown, revision: bigint, entry: unknown): readonly string[] {
  const checked = checkLedgerSnapshot(stored, revision, entry === null ? null : { data: entry });
  return 'problems' in checked ? checked.problems : [];
}

/** What differs between a stored snapshot and the ledger re-folded to its revision (`replayed`). */
function snapshotProblems(
  ledger: string,
  snapshot: StoredSnapshot,
  replayed: LedgerState,
  entry: LedgerEntryPostedData,
  windowMatches: boolean,
): VerifyProblem[] {
  const problems: VerifyProblem[] = [];
  const at = `snapshot at revision ${snapshot.revision}`;
  const checkProblems = snapshot.loaded?.checkProblems ?? snapshotCheckProblems(snapshot.stored, snapshot.revision, entry);
  if (checkProblems.length > 0) problems.push({ ledger, kind: 'snapshot_differs', detail: `${at} fails its checks: ${checkProblems.join('; ')}` });
  const stored = (snapshot.stored as { state?: Partial<LedgerState> } | null)?.state;
  // As stored (JSON): the same plain data, whatever the order of keys. A snapshot checked when
  // loaded has no window of recent causes here, nor has the ledger replayed without one.
  const { recentCauses: replayedWindow, ...replayedRest } = JSON.parse(JSON.stringify(replayed)) as LedgerState;
  const expected = snapshot.loaded ? replayedRest : { ...replayedRest, recentCauses: replayedWindow };
  if (!stored || !isDeepStrictEqual(stored, expected) || !windowMatches) {
    const differs: string[] = [];
    for (const account of LEDGER_ACCOUNTS) {
      const had = stored?.balances?.[account];
      if (had !== expected.balances[account]) differs.push(`${account}: log says ${expected.balances[account]}, snapshot says ${String(had)}`);
    }
    for (const part of ['holds', 'reservations', 'recentCauses', 'recentPayouts', 'entries'] as const) {
      const same = part === 'recentCauses' && snapshot.loaded ? windowMatches : isDeepStrictEqual(stored?.[part], (expected as Partial<LedgerState>)[part]);
      if (!same) differs.push(`${part} differ`);
    }
    problems.push({ ledger, kind: 'snapshot_differs', detail: `${at} differs from the ledger re-folded from its stream: ${differs.join('; ')}` });
  }
  return problems;
}

interface BalanceRow {
  account_id: string;
  mode: string;
  account: string;
  balance: string;
}
interface CountRow {
  account_id: string;
  mode: string;
  n: string;
}

/** Ledgers whose entries differ from the log that are read again to name the first entry that differs. */
const ENTRIES_LOCATED = 5;
/**
 * Entries (by `seq`) per chunk of a ledger's rows digest: the database digests each
 * chunk's lines itself (readModelEntryDigests), so that no row leaves it.
 */
const ENTRIES_PER_CHUNK = 1024;

const ISO_MILLIS = /^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z$/;

/** An ISO 8601 instant to the microsecond in UTC, as PostgreSQL stores a timestamptz; null stays null. */
function isoMicros(iso: unknown): string | null {
  if (iso === null || iso === undefined) return null;
  // As toISOString writes them (every date the gateway writes): no parse needed. Days past
  // the 28th take the parse below, which rolls 30 February over as a Date does.
  if (typeof iso === 'string' && ISO_MILLIS.test(iso)) return `${iso.slice(0, 23)}000Z`;
  const ms = Date.parse(String(iso));
  if (Number.isNaN(ms)) return `invalid ${String(iso)}`;
  const below = /\.\d{3}(\d{0,3})/.exec(String(iso))?.[1] ?? '';
  return new Date(ms).toISOString().replace('Z', `${below.padEnd(3, '0')}Z`);
}

const json = JSON.stringify;
/** A JSON string of text known to need no escaping (digits, `/`, an ISO instant). */
const plain = (text: string) => `"${text}"`;

/**
 * One entry as the ledger projection writes it (ledger_entries and its ledger_postings,
 * each merchant posting with the balance after it), as one line of JSON: what the read
 * model must hold for it. ENTRY_LINE_SQL makes the same line from the stored rows.
 */
function entryRowLine(
  revision: bigint,
  position: Position,
  data: LedgerEntryPostedData,
  postings: readonly (readonly [string, string, string | null])[],
): string {
  const occurred = isoMicros(data.occurredAt);
  const available = isoMicros(data.hold?.releaseAt);
  const instant = (at: string | null) => (at === null ? 'null' : at.startsWith('invalid') ? json(at) : plain(at));
  const rows = postings.map(([account, amount, after]) => `[${json(account)},${json(amount)},${after === null ? 'null' : plain(after)}]`);
  return `[${json(data.entryId) ?? 'null'},${plain(revision.toString())},${json(data.kind) ?? 'null'},${json(String(data.cause))},${instant(occurred)},${plain(`${position.commit}/${position.prepare}`)},${instant(available)},[${rows.join(',')}]]\n`;
}

/** The same line as entryRowLine, made by PostgreSQL from an entry's row `e` and its postings' lines `postings` (text, or null for none). */
const entryLineSql = (postings: string) => `'[' || to_json(e.entry_id::text)::text || ',"' || e.seq::text || '",' || to_json(e.kind)::text || ','
  || to_json(e.cause)::text || ',' || coalesce(to_json(to_char(e.occurred_at AT TIME ZONE 'UTC', '${PG_ISO_MICROS}'))::text, 'null') || ','
  || to_json(e.log_position)::text || ',' || coalesce(to_json(to_char(e.available_at AT TIME ZONE 'UTC', '${PG_ISO_MICROS}'))::text, 'null')
  || ',[' || coalesce(${postings}, '') || E']]\\n'`;
/** A posting `p` as entryRowLine writes it among its entry's postings. */
const POSTING_LINE_SQL = `'[' || to_json(p.account)::text || ',"' || p.amount::text || '",' || coalesce('"' || p.balance_after::text || '"', 'null') || ']'`;
const PG_ISO_MICROS = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';

/**
 * A ledger's rows digest: SHA-256 over its chunks in order, each as `<chunk>:<SHA-256 of
 * the lines of its entries in seq order>`, the same whether made here from the log or by
 * the database from the read model (readModelEntryDigests).
 */
class ChunkedDigest {
  private readonly ledger = createHash('sha256');
  private chunk = -1;
  private lines: Hash | null = null;

  add(seq: bigint, line: string): void {
    const chunk = Math.floor(Number(seq) / ENTRIES_PER_CHUNK);
    if (chunk !== this.chunk) {
      this.endChunk();
      this.chunk = chunk;
      this.lines = createHash('sha256');
    }
    this.lines!.update(line);
  }

  /** A chunk's digest as the database gives it. */
  addChunk(chunk: number, digest: string): void {
    this.ledger.update(`${chunk}:${digest}\n`);
  }

  digest(): string {
    this.endChunk();
    return this.ledger.digest('hex');
  }

  private endChunk(): void {
    if (this.lines) this.addChunk(this.chunk, this.lines.digest('hex'));
    this.lines = null;
  }
}

/** A ledger's entries as entryRowLine gives their rows, fed in stream order. */
class EntryRows {
  private readonly running = new Map<string, number>();

  next(revision: bigint, position: Position, data: LedgerEntryPostedData): string {
    const postings = (data.postings ?? []).map((p): [string, string, string | null] => {
      if (!(MERCHANT_ACCOUNTS as readonly string[]).includes(p.account)) return [p.account, String(p.amount), null];
      const after = (this.running.get(p.account) ?? 0) + p.amount;
      this.running.set(p.account, after);
      return [p.account, String(p.amount), String(after)];
    });
    return entryRowLine(revision, position, data, postings);
  }
}

/**
 * Each ledger's rows in the read model (of the transaction's snapshot) as their digest
 * (ChunkedDigest), computed by PostgreSQL: one row per chunk leaves the database.
 */
async function readModelEntryDigests(snapshot: PoolClient): Promise<Map<string, string>> {
  // The chunks that hold rows (not every one between a ledger's first and last seq: one row forged
  // at seq 2^62 would make 2^52 of them), each read from its own range of the (account_id, mode, seq) index.
  const { rows } = await snapshot.query<{ account_id: string; mode: string; chunk: string; digest: string }>(
    `SELECT l.account_id, l.mode, l.chunk,
            (SELECT encode(sha256(convert_to(string_agg(${entryLineSql(`(SELECT string_agg(${POSTING_LINE_SQL}, ',' ORDER BY p.ordinal) FROM ledger_postings p WHERE p.entry_id = e.entry_id)`)}, '' ORDER BY e.seq), 'UTF8')), 'hex')
               FROM ledger_entries e
              WHERE e.account_id = l.account_id AND e.mode = l.mode
                AND e.seq >= l.chunk * ${ENTRIES_PER_CHUNK} AND e.seq <= l.chunk * ${ENTRIES_PER_CHUNK} + ${ENTRIES_PER_CHUNK - 1}) AS digest
       FROM (SELECT account_id, mode, floor(seq / ${ENTRIES_PER_CHUNK}.0)::bigint AS chunk FROM ledger_entries GROUP BY 1, 2, 3) AS l
      ORDER BY l.account_id, l.mode, l.chunk`,
  );
  const digests = new Map<string, string>();
  let current = null as { name: string; digest: ChunkedDigest } | null;
  for (const row of rows) {
    const name = `${LEDGER_CATEGORY}-${row.mode}_${row.account_id}`;
    if (current?.name !== name) {
      if (current) digests.set(current.name, current.digest.digest());
      current = { name, digest: new ChunkedDigest() };
    }
    current.digest.addChunk(Number(row.chunk), row.digest);
  }
  if (current) digests.set(current.name, current.digest.digest());
  return digests;
}

/**
 * The first entry (lowest seq) of a ledger whose rows in the read model (of the snapshot
 * `snapshot`) differ from the log, up to the checkpoint, both lines: one the log has and the
 * read model not, one the read model has and the log not, or one whose rows differ. A row
 * at a negative seq first, then a page of the stream at a time, then the first row past it.
 */
async function firstDifferingEntry(snapshot: PoolClient, store: EventStore, name: string, checkpoint: Position): Promise<string> {
  const ledger = ledgerIdFromStream(name)!;
  const rows = new EntryRows();
  const line = entryLineSql(`(SELECT string_agg(${POSTING_LINE_SQL}, ',' ORDER BY p.ordinal) FROM ledger_postings p WHERE p.entry_id = e.entry_id)`);
  const differs = (seq: string, expected: string | undefined, actual: string | undefined) =>
    `entry at revision ${seq}: log gives ${expected === undefined ? 'no entry' : expected.trim()}, read model has ${actual === undefined ? 'no row' : actual.trim()}`;
  const afterCheckpoint = (seq: string, actual: string) =>
    `entry at revision ${seq}: log gives it only after the checkpoint, read model has a row ${actual.trim()}`;
  // The lowest row of a range of seqs, from the (account_id, mode, seq) index: no revision is negative.
  const lowest = async (range: string, bound: bigint) =>
    (
      await snapshot.query<{ seq: string; line: string }>(
        `SELECT e.seq::text AS seq, ${line} AS line FROM ledger_entries e
          WHERE e.account_id = $1 AND e.mode = $2 AND e.seq ${range} $3 ORDER BY e.seq LIMIT 1`,
        [ledger.accountId, ledger.mode, bound.toString()],
      )
    ).rows[0];
  const negative = await lowest('<', 0n);
  if (negative) return differs(negative.seq, undefined, negative.line);
  for (let from = 0n; ;) {
    const page = await store.readStream(name, { fromRevision: from, maxCount: PAGE });
    // The rows of the seqs this page covers: up to the next page's first revision (the last page: PAGE of them).
    const until = page.length === PAGE ? page[page.length - 1]!.revision + 1n : from + BigInt(PAGE);
    const stored = new Map(
      (
        await snapshot.query<{ seq: string; line: string }>(
          `SELECT e.seq::text AS seq, ${line} AS line
             FROM ledger_entries e WHERE e.account_id = $1 AND e.mode = $2 AND e.seq >= $3 AND e.seq < $4`,
          [ledger.accountId, ledger.mode, from.toString(), until.toString()],
        )
      ).rows.map((r) => [r.seq, r.line]),
    );
    let first: { seq: bigint; detail: string } | null = null;
    for (const event of page) {
      if (event.type !== 'LedgerEntryPosted') continue;
      const seq = event.revision.toString();
      const actual = stored.get(seq);
      // An entry past the checkpoint: the snapshot (as of the checkpoint) has no row for it, so a
      // row at its seq is forged or a projector bug (and the projector stalls on that seq).
      if (comparePositions(event.position, checkpoint) > 0) {
        if (actual !== undefined && first === null) first = { seq: event.revision, detail: afterCheckpoint(seq, actual) };
        stored.delete(seq);
        continue;
      }
      stored.delete(seq);
      const expected = rows.next(event.revision, event.position, event.data as unknown as LedgerEntryPostedData);
      if (actual !== expected && first === null) first = { seq: event.revision, detail: differs(seq, expected, actual) };
    }
    // What is left the log does not have (up to the checkpoint).
    for (const [seq, actual] of stored) {
      if (first === null || BigInt(seq) < first.seq) first = { seq: BigInt(seq), detail: differs(seq, undefined, actual) };
    }
    if (first) return first.detail;
    if (page.length < PAGE) {
      const beyond = await lowest('>=', until);
      if (beyond) return differs(beyond.seq, undefined, beyond.line);
      return 'its entries in the read model differ from the log (their rows are in another order)';
    }
    from = until;
  }
}
