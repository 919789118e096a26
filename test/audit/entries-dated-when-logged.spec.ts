/**
 * A report of a past instant counts on every entry dated by then being in the log
 * POSTING_MARGIN_MS after it (awaitPostedThrough). A decision dated by the clock (a hold's
 * release, a payment, a refund's request) stalled between its decision and its append (a
 * GC pause, a full pool, a held lock) would land dated in a period a signed statement has
 * closed. It is appended within DECIDED_TO_LOGGED_MS of its date, or decided again and
 * dated then (review 98 F4).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  AppendOptions,
  AppendResult,
  AppendTooLateError,
  DatedByDecision,
  EventToAppend,
  handleCommand,
  MAX_REDATES,
  PostgresEventStore,
  ReadStreamOptions,
  RecordedEvent,
} from '#event-store';
import { LedgerId, ledgerStreamName } from '#ledger';
import { LedgerBook } from '#payments/ledger';
import { DECIDED_TO_LOGGED_MS } from '#payments/flows';
import type { Clock } from '#platform/clock';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry } from '#payments/merchants';
import { RefundFlow } from '#payments/refunds';
import { CreateInvoice, CreateInvoiceHandler } from '../../apps/api/src/invoices/create-invoice/create-invoice.handler';
import { RecordPaymentResult, RecordPaymentResultHandler } from '../../apps/api/src/invoices/record-payment-result/record-payment-result.handler';
import { RefundInvoice, RefundInvoiceHandler } from '../../apps/api/src/refunds/refund-invoice/refund-invoice.handler';
import { InMemorySnapshotStore } from '../support/in-memory-snapshot-store';
import { InMemoryEventStore } from '../support/in-memory-event-store';
import { toApiError, wroteNothing } from '../../apps/api/src/http/errors/error.filter';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { invoiceRequest } from '../support/invoice-request';

const T0 = Date.parse('2031-03-01T12:00:00Z');
let db: TestDatabase;
let now = T0;
const clock: Clock = { now: () => new Date(now) };

/** Stalls once, where `stall` says: while the ledger is read for the decision, or as the append is sent. */
class StallingStore extends PostgresEventStore {
  stall: 'none' | 'reading' | 'appending' = 'none';
  override async readStream(streamName: string, options?: ReadStreamOptions): Promise<RecordedEvent[]> {
    if (this.stall === 'reading') {
      this.stall = 'none';
      now += 2_000; // the clock moves on while the decision is made
    }
    return super.readStream(streamName, options);
  }
  override async appendToStream(streamName: string, events: readonly EventToAppend[], options: AppendOptions = {}): Promise<AppendResult> {
    if (this.stall === 'appending' && options.notAfter) {
      this.stall = 'none';
      now += 2_000;
      await new Promise((r) => setTimeout(r, DECIDED_TO_LOGGED_MS + 100)); // and the append reaches the database late
    }
    return super.appendToStream(streamName, events, options);
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

async function dueHold(): Promise<{ store: StallingStore; book: LedgerBook; ledger: LedgerId; invoiceId: string }> {
  const store = new StallingStore(db.pool);
  const book = new LedgerBook(store, new InMemorySnapshotStore(), { clock });
  const ledger: LedgerId = { accountId: `acc-${randomUUID()}`, mode: 'live' };
  const invoiceId = randomUUID();
  now = T0;
  const paidAt = new Date(T0 - 3_600_000).toISOString();
  await book.post(ledger, { type: 'RecordPayment', invoiceId, netAmount: 100_00, feeAmount: 0, releaseAt: paidAt, at: paidAt });
  return { store, book, ledger, invoiceId };
}

describe('a hold release stalled between its decision and its append', () => {
  it.each(['reading', 'appending'] as const)('stalled while %s: released dated when it reached the log, not when first decided', async (stall) => {
    const { store, book, ledger, invoiceId } = await dueHold();
    const decidedAt = clock.now().toISOString();
    store.stall = stall;
    const { entry } = await book.post(ledger, { type: 'ReleaseHold', invoiceId, at: decidedAt });
    expect(entry).not.toBeNull();
    expect(entry!.occurredAt).toBe(new Date(T0 + 2_000).toISOString());
    const state = await book.current(ledger);
    expect({ open: state.holds.size, available: state.balances.available }).toEqual({ open: 0, available: 100_00 });
    await store.close();
  });

  it("a refund's or payout's release of the due holds it needs (ReleaseDueHolds), stalled, is dated when it reached the log", async () => {
    // Review 100 F1: undated, a stalled release decided again kept its first date, inside a period a report had closed.
    const { store, book, ledger } = await dueHold();
    store.stall = 'reading';
    expect(await book.releaseDueHolds(ledger, 100_00, clock.now().toISOString())).toBe(1);
    const [release] = (await store.readStream(ledgerStreamName(ledger))).slice(-1);
    expect(release!.data).toMatchObject({ kind: 'hold_released', occurredAt: new Date(T0 + 2_000).toISOString() });
    await store.close();
  });

  it('in time: dated when decided', async () => {
    const { store, book, ledger, invoiceId } = await dueHold();
    const { entry } = await book.post(ledger, { type: 'ReleaseHold', invoiceId, at: clock.now().toISOString() });
    expect(entry!.occurredAt).toBe(new Date(T0).toISOString());
    await store.close();
  });
});

describe('a payment and a refund request stalled between their decision and their append', () => {
  const setUp = async () => {
    now = T0;
    const store = new StallingStore(db.pool);
    const registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
    const project = await webhookProject(registry, clock.now());
    const { invoice } = await new CreateInvoiceHandler(store).execute(
      new CreateInvoice(project, 'test', invoiceRequest({ amount: 1000_00, orderId: `dated-${randomUUID()}` }), clock.now()),
    );
    return { store, registry, project, invoiceId: invoice.created.invoiceId };
  };

  it('a payment recorded late is paid when it reached the log (its entry is dated with paidAt)', async () => {
    const { store, registry, invoiceId } = await setUp();
    store.stall = 'reading';
    const paid = await new RecordPaymentResultHandler(store, registry, clock).execute(new RecordPaymentResult(invoiceId, 'paid', null, clock.now()));
    expect(paid.status === 'paid' && paid.paidAt).toBe(new Date(T0 + 2_000).toISOString());
    await store.close();
  });

  it('a payment that came before expiry and reached the log after it (dated again) is still paid: expiry goes by when it came', async () => {
    // Review 100 F2: dated again past expiresAt, the payment was refused 409 though the buyer was charged.
    now = T0;
    const store = new StallingStore(db.pool);
    const registry = new Registry(db.pool, new SecretBox(fixedKeys([randomBytes(32)])));
    const project = await webhookProject(registry, clock.now());
    const created = new Date(T0 - 59_500); // expires at T0 + 0.5 s
    const { invoice } = await new CreateInvoiceHandler(store).execute(
      new CreateInvoice(project, 'test', invoiceRequest({ amount: 1000_00, orderId: `dated-${randomUUID()}`, expireMinutes: 1 }), created),
    );
    expect(invoice.created.expiresAt).toBe(new Date(T0 + 500).toISOString());
    store.stall = 'reading';
    const paid = await new RecordPaymentResultHandler(store, registry, clock).execute(
      new RecordPaymentResult(invoice.created.invoiceId, 'paid', null, clock.now()),
    );
    expect(paid.status === 'paid' && paid.paidAt).toBe(new Date(T0 + 2_000).toISOString());
    await store.close();
  });

  it('a refund requested late is requested when it reached the log, and its reservation is dated so', async () => {
    const { store, registry, project, invoiceId } = await setUp();
    await new RecordPaymentResultHandler(store, registry, clock).execute(new RecordPaymentResult(invoiceId, 'paid', null, clock.now()));
    const book = new LedgerBook(store, new InMemorySnapshotStore(), { clock });
    const handler = new RefundInvoiceHandler(store, new RefundFlow(store, book, 60, db.pool, {}, clock), clock);
    store.stall = 'appending';
    const refund = await handler.execute(new RefundInvoice(project, 'test', invoiceId, 100_00, clock.now(), null));
    expect(refund.created.createdAt).toBe(new Date(T0 + 2_000).toISOString());
    // The ledger's last entry: the refund's reservation, dated with its request as it reached the log.
    const entries = await store.readStream(ledgerStreamName({ accountId: project.accountId, mode: 'test' }));
    expect(entries.at(-1)!.data).toMatchObject({ cause: expect.stringContaining(refund.created.refundId), occurredAt: new Date(T0 + 2_000).toISOString() });
    await store.close();
  });
});

interface Note {
  readonly type: string;
  readonly at: string;
}

describe('a decision late on every try', () => {
  it('gives up after MAX_REDATES with AppendTooLateError, nothing written, which the API answers 503 (nothing written)', async () => {
    const store = new InMemoryEventStore({ eventIds: 'unique_in_store' });
    let clockMs = T0;
    const dated: DatedByDecision<Note> = {
      at: (c) => c.at,
      redate: (c, at) => ({ ...c, at }),
      now: () => new Date((clockMs += 2_000)), // every read of the clock is 2 s on: each decision is late by its append
      withinMs: DECIDED_TO_LOGGED_MS,
    };
    const decider = {
      initialState: () => null,
      evolve: () => null,
      decide: (c: Note) => [{ type: 'Noted', data: { at: c.at } }],
    };
    let decisions = 0;
    const counted = { ...decider, decide: (c: Note) => (decisions++, decider.decide(c)) };
    const failure = await handleCommand(store, 'notes-1', counted, { type: 'Note', at: new Date(T0).toISOString() }, { dated }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(AppendTooLateError);
    // Decided again at most MAX_REDATES times (not maxAttempts, 100, as conflicts are), each after a short pause.
    expect(decisions).toBe(MAX_REDATES + 1);
    expect(store.size).toBe(0);
    const answer = toApiError(failure);
    expect({ status: answer.status, code: answer.code, retryAfter: answer.headers?.['Retry-After'] }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      retryAfter: '1',
    });
    expect(wroteNothing(failure)).toBe(true);
  });
});
