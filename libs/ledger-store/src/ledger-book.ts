import type { EventStore, SnapshotStore } from '../../event-store/src';
import { END, handleCommand, loadState, StreamNotFoundError } from '../../event-store/src';
import {
  causeOf,
  evolve,
  initialLedgerState,
  LedgerCommand,
  LedgerError,
  LedgerEvent,
  LedgerId,
  ledgerDecider,
  ledgerEntryId,
  LedgerState,
  ledgerStreamName,
  ReservationRefusal,
} from '../../ledger/src';
import type { Position } from '../../event-store/src';

/** A ledger command before its entry id is derived from its cause. */
export type LedgerRequest = LedgerCommand extends infer C ? (C extends LedgerCommand ? Omit<C, 'entryId'> : never) : never;

export interface Posted {
  /** The entry this request posted, or null when its cause had already posted (a repeat). */
  readonly entry: LedgerEvent['data'] | null;
  readonly state: LedgerState;
  readonly position: Position | null;
}

/** Snapshot every 500 entries: loading a ledger reads at most that many events, however long its history. */
export const LEDGER_SNAPSHOT_EVERY = 500;
const OUT_OF_ORDER_WINDOW_MS = 3600_000;

/** Bump when LedgerState changes shape. */
export const LEDGER_STATE_VERSION = 3;

/**
 * The merchants' ledgers, persisted in the event store: one stream per account and
 * mode, optimistic concurrency with retry, snapshots so a command's cost does not
 * grow with the ledger's history.
 */
export class LedgerBook {
  constructor(
    private readonly store: EventStore,
    private readonly snapshots: SnapshotStore,
  ) {}

  private get snapshotPolicy() {
    return { store: this.snapshots, schemaVersion: LEDGER_STATE_VERSION, every: LEDGER_SNAPSHOT_EVERY };
  }

  /** Posts the request's entry, or refuses it with a LedgerError. Idempotent per cause. */
  async post(ledger: LedgerId, request: LedgerRequest): Promise<Posted> {
    const command = { ...request, entryId: ledgerEntryId(ledger, causeOf(request as LedgerCommand)) } as LedgerCommand;
    const result = await handleCommand(this.store, ledgerStreamName(ledger), ledgerDecider, command, {
      eventId: (event) => event.data.entryId,
      snapshots: this.snapshotPolicy,
      onDuplicateEventId: 'already_handled',
      metadata: { accountId: ledger.accountId, mode: ledger.mode },
    });
    if (!result.ok) throw result.failure;
    return { entry: result.events[0]?.data ?? null, state: result.state, position: result.position };
  }

  /**
   * Reserves funds for a refund or payout, or records why not, once per reservation
   * id: the first decision stands for every retry, whoever makes it (the API or a
   * recovery worker), so a request refused for want of balance can never be reserved
   * later behind the back of the flow that reported the refusal.
   */
  async reserve(
    ledger: LedgerId,
    request: Omit<Extract<LedgerRequest, { type: 'ReserveFunds' }>, 'recordRefusal'>,
  ): Promise<{ readonly outcome: 'reserved' } | { readonly outcome: 'refused'; readonly refusal: ReservationRefusal }> {
    const posted = await this.post(ledger, { ...request, recordRefusal: true });
    const entry = posted.entry ?? (Object.hasOwn(posted.state.reservations, request.reservationId) ? null : await this.entryOf(ledger, causeOf({ ...request, entryId: '' })));
    if (entry === null || entry.kind === 'funds_reserved') return { outcome: 'reserved' };
    if (entry.kind === 'reservation_refused') return { outcome: 'refused', refusal: entry.refusal! };
    throw new Error(`Entry ${entry.entryId} of cause reserve:${request.reservationId} is ${entry.kind}`);
  }

  /** The entry a cause posted, searched from the newest entry back. */
  private async entryOf(ledger: LedgerId, cause: string): Promise<LedgerEvent['data']> {
    const entryId = ledgerEntryId(ledger, cause);
    let from: bigint | typeof END = END;
    for (;;) {
      const page = await this.store.readStream(ledgerStreamName(ledger), { direction: 'backwards', fromRevision: from, maxCount: 1000 });
      const found = page.find((e) => (e.data as unknown as LedgerEvent['data']).entryId === entryId);
      if (found) return found.data as unknown as LedgerEvent['data'];
      const last = page[page.length - 1];
      if (page.length < 1000 || !last || last.revision === 0n) throw new Error(`No entry of cause ${cause} in ${ledgerStreamName(ledger)}`);
      from = last.revision - 1n;
    }
  }

  /** The ledger's current state, from the log (snapshot plus the entries after it). */
  async current(ledger: LedgerId): Promise<LedgerState> {
    return (await loadState(this.store, ledgerStreamName(ledger), ledgerDecider, this.snapshotPolicy)).state;
  }

  /**
   * The state at a past instant, rebuilt from every entry that occurred at or before
   * it. Entries are in log order; decisions made concurrently may carry times a little
   * out of order, so the scan goes on until entries are an hour past the instant.
   */
  async asOf(ledger: LedgerId, instant: Date): Promise<{ state: LedgerState; lastEntryAt: string | null }> {
    let state = initialLedgerState();
    let lastEntryAt: string | null = null;
    let from = 0n;
    const limit = instant.getTime();
    for (;;) {
      let page;
      try {
        page = await this.store.readStream(ledgerStreamName(ledger), { fromRevision: from, maxCount: 2000 });
      } catch (error) {
        if (error instanceof StreamNotFoundError) return { state, lastEntryAt };
        throw error;
      }
      for (const event of page) {
        const entry = event as unknown as { data: LedgerEvent['data'] };
        const occurredAt = Date.parse(entry.data.occurredAt);
        if (occurredAt > limit + OUT_OF_ORDER_WINDOW_MS) return { state, lastEntryAt };
        if (occurredAt > limit) continue;
        state = evolve(state, { type: 'LedgerEntryPosted', data: entry.data });
        lastEntryAt = entry.data.occurredAt;
      }
      if (page.length < 2000) return { state, lastEntryAt };
      from = page[page.length - 1]!.revision + 1n;
    }
  }
}

export { LedgerError };
