/**
 * Snapshots of a ledger's state, checked before they are used: a snapshot is a
 * cache of `foldLedger` over the first entries of the stream, never the truth. Pure
 * (hashing only): the loader gives the stored snapshot and the stream's entry at the
 * snapshot's revision, and gets the state back or the reasons not to use it.
 */
import { createHash } from 'node:crypto';
import {
  evolve,
  foldLedger,
  initialLedgerState,
  LEDGER_ACCOUNTS,
  LedgerEntryPostedData,
  LedgerEvent,
  LedgerState,
  Posting,
  RECENT_CAUSES_KEPT,
  RECENT_PAYOUT_WINDOW_MS,
  rememberedCauses,
  stateViolations,
} from './ledger';
import { OpenHold, OpenHolds } from './open-holds';

/** Bump when LedgerState changes shape. (A change of what the fold computes changes the fold version by itself.) */
export const LEDGER_STATE_VERSION = 6;

/** A ledger's state as stored: its open holds as the record by invoice id. */
export type StoredLedgerState = Omit<LedgerState, 'holds'> & { readonly holds: Readonly<Record<string, OpenHold>> };

/** The state of a stored one (its JSON, as parsed): the same state as was stored. */
export const ledgerStateOfStored = (stored: StoredLedgerState): LedgerState => ({ ...stored, holds: OpenHolds.fromRecord(stored.holds) });

/** What is stored for a ledger: its state and a digest of it (canonical JSON, bound to the fold version). */
export interface StoredLedgerSnapshot {
  readonly state: StoredLedgerState;
  readonly digest: string;
}

/**
 * A fixed list of entries of every kind and shape (holds opened, released and still
 * open, reservations for refunds and payouts settled with and without a fee,
 * released, refused, payout fingerprints within and past the duplicate window), long
 * enough to push causes out of the window. Folding it exercises everything the fold
 * does, so its result fingerprints the fold's behaviour.
 */
function canonicalEntries(): LedgerEvent[] {
  const entries: LedgerEvent[] = [];
  const t0 = Date.parse('2025-01-01T00:00:00.000Z');
  const push = (kind: LedgerEntryPostedData['kind'], cause: string, postings: Posting[], minutes: number, extra: Partial<LedgerEntryPostedData> = {}) =>
    entries.push({
      type: 'LedgerEntryPosted',
      data: { entryId: `canonical-${entries.length}`, kind, cause, postings, occurredAt: new Date(t0 + minutes * 60_000).toISOString(), ...extra },
    });
  const payment = (i: number, net: number, fee: number, held: boolean, minutes: number) =>
    push(
      'payment_recorded',
      `payment:inv_${i}`,
      [
        { account: 'acquiring_clearing', amount: -(net + fee) },
        { account: held ? 'pending' : 'available', amount: net },
        { account: 'fees', amount: fee },
      ],
      minutes,
      {
        hold: held ? { invoiceId: `inv_${i}`, amount: net, releaseAt: new Date(t0 + (minutes + 60) * 60_000).toISOString() } : undefined,
        invoiceId: `inv_${i}`,
      },
    );
  const reservation = (id: string, purpose: 'refund' | 'payout', amount: number) => ({ id, purpose, amount });

  for (let i = 0; i < RECENT_CAUSES_KEPT + 200; i++) {
    const m = i * 7;
    switch (i % 10) {
      case 0:
        payment(i, 10_000 + i, 150, true, m);
        break;
      case 1:
        push(
          'hold_released',
          `hold_release:inv_${i - 1}`,
          [
            { account: 'pending', amount: -(10_000 + i - 1) },
            { account: 'available', amount: 10_000 + i - 1 },
          ],
          m,
          { invoiceId: `inv_${i - 1}` },
        );
        break;
      case 2:
        push(
          'funds_reserved',
          `reserve:po_${i}`,
          [
            { account: 'available', amount: -5_000 },
            { account: 'reserved', amount: 5_000 },
          ],
          m,
          {
            reservation: reservation(`po_${i}`, 'payout', 5_000),
            payoutFingerprint: `fp_${i % 3}`,
            // Every other one reserved late, three minutes after its request.
            ...(i % 20 === 2 ? { payoutRequestedAt: new Date(t0 + (m - 3) * 60_000).toISOString() } : {}),
          },
        );
        break;
      case 3:
        push(
          'reservation_settled',
          `settle:po_${i - 1}`,
          [
            { account: 'reserved', amount: -5_000 },
            { account: 'payouts_sent', amount: 4_950 },
            { account: 'fees', amount: 50 },
          ],
          m,
          { reservation: reservation(`po_${i - 1}`, 'payout', 5_000) },
        );
        break;
      case 4:
        push(
          'funds_reserved',
          `reserve:rf_${i}`,
          [
            { account: 'available', amount: -1_000 },
            { account: 'reserved', amount: 1_000 },
          ],
          m,
          { reservation: reservation(`rf_${i}`, 'refund', 1_000) },
        );
        break;
      case 5:
        push(
          i % 20 === 5 ? 'reservation_settled' : 'reservation_released',
          `${i % 20 === 5 ? 'settle' : 'release'}:rf_${i - 1}`,
          [
            { account: 'reserved', amount: -1_000 },
            { account: i % 20 === 5 ? 'refunds_paid' : 'available', amount: 1_000 },
          ],
          m,
          { reservation: reservation(`rf_${i - 1}`, 'refund', 1_000) },
        );
        break;
      case 6:
        push('reservation_refused', `reserve:po_${i}`, [], m, { reservation: reservation(`po_${i}`, 'payout', 99_999_999), refusal: 'insufficient_balance' });
        break;
      default:
        payment(i, 2_000 + i, 0, i % 10 === 9 && i > RECENT_CAUSES_KEPT, m);
    }
  }
  return entries;
}

/** `value` as JSON with the keys of every object in sorted order (the order jsonb keeps is not the writer's). */
function canonicalJson(value: unknown): string {
  // The open holds as their record by invoice id (OpenHolds.toJSON): what is stored.
  if (value instanceof OpenHolds) return canonicalJson(value.toJSON());
  if (Array.isArray(value)) {
    // An array of plain values (the window's chunks of causes): the engine's own JSON, the same text, much faster.
    if (value.every(isPlainValue)) return JSON.stringify(value);
    return `[${value.map(canonicalJson).join(',')}]`;
  }
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const isPlainValue = (v: unknown): boolean => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

/**
 * The version of the ledger's snapshots, derived from the fold itself: a hash of the
 * states that folding the canonical entries gives (with `foldLedger` and with
 * `evolve`), of the windows' sizes and of LEDGER_STATE_VERSION, as a positive 31-bit
 * integer (the column's type). A change of what the fold computes changes it, so
 * snapshots folded by older code are ignored without anyone remembering to bump it.
 */
export function ledgerFoldVersion(
  fold: (events: readonly LedgerEvent[]) => LedgerState = foldLedger,
  step: (state: LedgerState, event: LedgerEvent) => LedgerState = evolve,
): number {
  const canonical = canonicalEntries();
  const folded = fold(canonical);
  const evolved = canonical.reduce(step, initialLedgerState());
  const hash = sha256(`${LEDGER_STATE_VERSION}|${RECENT_CAUSES_KEPT}|${RECENT_PAYOUT_WINDOW_MS}|${canonicalJson(folded)}|${canonicalJson(evolved)}`);
  return hash.readUInt32BE(0) & 0x7fffffff;
}

let foldVersionOfThisCode: number | undefined;

/**
 * The fold version of this code (see ledgerFoldVersion), computed on first use: the fold
 * of the canonical entries costs 50-60 ms, which a process that never reads or writes a
 * snapshot (log:verify, read-models:checksum) need not pay at start-up.
 */
export function currentLedgerFoldVersion(): number {
  foldVersionOfThisCode ??= ledgerFoldVersion();
  return foldVersionOfThisCode;
}

const digestOf = (state: LedgerState): string => sha256(`${currentLedgerFoldVersion()}|${canonicalJson(state)}`).toString('hex');

/** What a ledger snapshot stores for `state`. */
export function ledgerSnapshotOf(state: LedgerState): StoredLedgerSnapshot {
  return { state: { ...state, holds: state.holds.toRecord() }, digest: digestOf(state) };
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** What is wrong with the shape of a stored state (empty: it is a LedgerState). */
function shapeProblems(state: unknown): string[] {
  if (!isRecord(state)) return ['the state is not an object'];
  const problems: string[] = [];
  const balances = state.balances;
  if (!isRecord(balances) || !LEDGER_ACCOUNTS.every((a) => typeof balances[a] === 'number' && Number.isSafeInteger(balances[a]))) {
    problems.push('balances are not whole kopecks for every account');
  }
  const amounts = (record: unknown) => isRecord(record) && Object.values(record).every((v) => isRecord(v) && isCount(v.amount));
  if (!amounts(state.holds)) problems.push('holds are malformed');
  if (!amounts(state.reservations)) problems.push('reservations are malformed');
  const causes = state.recentCauses;
  if (!Array.isArray(causes) || !causes.every((chunk) => Array.isArray(chunk) && chunk.every((c) => typeof c === 'string'))) {
    problems.push('the window of recent causes is malformed');
  }
  if (!Array.isArray(state.recentPayouts)) problems.push('recent payouts are malformed');
  if (!isCount(state.entries)) problems.push('the entry count is not a count');
  if (state.latestAt !== null && (typeof state.latestAt !== 'string' || Number.isNaN(Date.parse(state.latestAt))))
    problems.push('the latest entry time is malformed');
  return problems;
}

/**
 * Checks a stored ledger snapshot against its stream before it is used: its digest
 * (the state is what was stored for this fold version), its shape, its entry count
 * (revision + 1), its window (no more causes than entries, the last one the cause
 * of the stream's entry at the snapshot's revision, which must exist), and the
 * ledger's invariants (no merchant account below zero, all accounts sum to zero,
 * open holds and reservations equal pending and reserved). Returns the state, or
 * every problem found.
 */
export function checkLedgerSnapshot(
  stored: unknown,
  revision: bigint,
  entryAtRevision: { readonly data: unknown } | null,
): { readonly state: LedgerState } | { readonly problems: readonly string[] } {
  if (!isRecord(stored) || typeof stored.digest !== 'string') return { problems: ['not a checked ledger snapshot (no digest)'] };
  const problems = shapeProblems(stored.state);
  if (problems.length > 0) return { problems };
  const storedState = stored.state as unknown as StoredLedgerState;
  const state = ledgerStateOfStored(storedState);
  if (digestOf(state) !== stored.digest) problems.push('its digest does not match its state (changed after it was written)');
  if (BigInt(state.entries) !== revision + 1n) problems.push(`it counts ${state.entries} entries at revision ${revision} (expected ${revision + 1n})`);
  const remembered = rememberedCauses(state);
  if (remembered > state.entries) problems.push(`its window holds ${remembered} causes of ${state.entries} entries`);
  if (entryAtRevision === null) problems.push(`the stream has no entry at revision ${revision}`);
  else {
    const lastChunk = state.recentCauses[state.recentCauses.length - 1];
    const lastCause = lastChunk?.[lastChunk.length - 1];
    const cause = (entryAtRevision.data as Partial<LedgerEntryPostedData>).cause;
    if (lastCause !== cause) problems.push(`its last cause is ${String(lastCause)}, the stream's entry at revision ${revision} is of ${String(cause)}`);
  }
  for (const v of stateViolations(state)) problems.push(`${v.rule}: ${v.detail}`);
  return problems.length > 0 ? { problems } : { state };
}
