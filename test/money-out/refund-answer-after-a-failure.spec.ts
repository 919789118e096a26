/**
 * The answer to a refund request whose ledger refused it, when the append recording
 * that refusal on the invoice is sent and its answer lost, and the database stays away:
 * the refusal may be recorded (the refund never shown, never webhooked) or not. It was
 * answered 202 pending and that answer stored under the Idempotency-Key, for a refund
 * that was then 404 forever (review 87 F1). It must be the marked 503, so that the retry
 * under the same key reads which it was.
 */
import { randomUUID } from 'node:crypto';
import { AppendOutcomeUnknownError, EventToAppend, ExpectedRevision, PostgresEventStore, ReadStreamOptions } from '#event-store';
import { invoiceAmounts, InvoiceEvent, invoiceStreamName } from '#domain';
import type { LedgerBook } from '#payments/ledger';
import type { Project } from '#payments/merchants';
import { RefundFlow } from '#payments/refunds';
import { SystemClock } from '#platform/clock';
import { RefundInvoice, RefundInvoiceHandler } from '../../apps/api/src/refunds/refund-invoice/refund-invoice.handler';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { MAYBE_WRITTEN_MARK, toApiError, wroteNothing } from '../../apps/api/src/http/errors/error.filter';

const connectionLost = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });

/** The log, but the answer to the append recording a refused refund is lost after it was written, and the database stays away. */
class RefusalAnswerLostDatabaseAway extends PostgresEventStore {
  away = false;
  override async appendToStream(streamName: string, events: readonly EventToAppend[], options: { expectedRevision?: ExpectedRevision } = {}) {
    const result = await super.appendToStream(streamName, events, options);
    if (events.some((e) => e.type === 'InvoiceRefundReleased' && e.data.reason === 'refused')) {
      this.away = true;
      throw new AppendOutcomeUnknownError(streamName, { cause: connectionLost() });
    }
    return result;
  }
  override async readStream(streamName: string, options?: ReadStreamOptions) {
    if (this.away) throw connectionLost();
    return super.readStream(streamName, options);
  }
}

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** A ledger whose available balance is short of any refund: it refuses the reservation. */
const refusingLedger = {
  post: async () => ({}),
  releaseDueHolds: async () => 0,
  reserve: async () => ({ outcome: 'refused', refusal: 'insufficient_balance' }),
} as unknown as LedgerBook;

/** A paid invoice of 1000.00 of a new project, in `store`. */
async function paidInvoice(store: PostgresEventStore): Promise<{ invoiceId: string; project: Project; at: Date }> {
  const invoiceId = randomUUID();
  const project = { id: randomUUID(), accountId: randomUUID() } as Project;
  const at = new Date();
  const amounts = invoiceAmounts(100_000, 15_000, 15_000);
  const events: InvoiceEvent[] = [
    {
      type: 'InvoiceCreated',
      data: {
        ...{ invoiceId, projectId: project.id, accountId: project.accountId, mode: 'live', orderId: 'order-1', amount: 100_000, method: 'sbp' },
        ...{ methodRates: { sbp: 15_000 }, customerFee: { kind: 'project_default', share: 100 }, amounts, description: null, customer: {} },
        ...{ customFields: null, successUrl: null, failUrl: null, createdAt: at.toISOString(), expiresAt: new Date(at.getTime() + 3_600_000).toISOString() },
      },
    },
    {
      type: 'InvoicePaid',
      data: {
        ...{ invoiceId, accountId: project.accountId, mode: 'live', method: 'sbp', paidAt: at.toISOString(), availableAt: null },
        ...{ netAmount: amounts.netAmount, feeAmount: amounts.feeAmount },
      },
    },
  ];
  await store.appendToStream(
    invoiceStreamName(invoiceId),
    events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data as never })),
  );
  return { invoiceId, project, at };
}

it('a refusal whose recording may have committed, the invoice unreadable after, is the marked 503: never "pending"', async () => {
  const store = new RefusalAnswerLostDatabaseAway(db.pool);
  const handler = new RefundInvoiceHandler(store, new RefundFlow(store, refusingLedger, 60, db.pool), new SystemClock());
  const { invoiceId, project, at } = await paidInvoice(store);
  const keyed = { keyId: randomUUID(), projectId: project.id, mode: 'live' as const, key: 'K', fingerprint: 'f' };
  const refund = () => handler.execute(new RefundInvoice(project, 'live', invoiceId, 50_000, at, keyed));
  const answer = await refund().catch((error: unknown) => error);
  expect(answer).toBeInstanceOf(AppendOutcomeUnknownError);
  // The database back, the retry under the same key reads the refusal: 422, as the first run would have said.
  store.away = false;
  await expect(refund()).rejects.toMatchObject({ code: 'insufficient_balance' });
  await store.close();
});

// The operator's refund fail (RefundFlow.finished) of a refund granted only: the ledger refuses, the invoice takes the
// amount back (visible: a new refund can take it), then the refund's own stream fails. It answered "nothing written".
it('finishing a refused refund whose last step fails after the invoice took the amount back: the marked 503', async () => {
  class RefundStreamAway extends PostgresEventStore {
    override async appendToStream(streamName: string, events: readonly EventToAppend[], options: { expectedRevision?: ExpectedRevision } = {}) {
      if (streamName.startsWith('refund-')) throw connectionLost();
      return super.appendToStream(streamName, events, options);
    }
  }
  const store = new RefundStreamAway(db.pool);
  const flow = new RefundFlow(store, refusingLedger, 60, db.pool);
  const { invoiceId, at } = await paidInvoice(store);
  const refundId = 'rf_' + 'a'.repeat(24);
  await store.appendToStream(invoiceStreamName(invoiceId), [
    {
      id: randomUUID(),
      type: 'InvoiceRefundRequested',
      data: { invoiceId, refundId, projectId: randomUUID(), accountId: randomUUID(), mode: 'live', amount: 50_000, at: at.toISOString() },
    },
  ]);
  const answer = await flow.advance(invoiceId, refundId, at, 'finishing').catch((error: unknown) => error);
  expect(wroteNothing(answer)).toBe(false);
  expect(toApiError(answer)).toMatchObject({ status: 503, message: expect.stringContaining(MAYBE_WRITTEN_MARK) });
  expect(toApiError(answer).message).toContain('Отказ баланса записан');
  const released = (await store.readStream(invoiceStreamName(invoiceId))).filter((e) => e.type === 'InvoiceRefundReleased');
  expect(released.map((e) => e.data.reason)).toEqual(['failed']);
  await store.close();
});
