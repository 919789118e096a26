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
import { RefundInvoice, RefundInvoiceHandler } from '../../apps/api/src/refunds/refund-invoice/refund-invoice.handler';
import { createTestDatabase, TestDatabase } from '../support/test-database';

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

it('a refusal whose recording may have committed, the invoice unreadable after, is the marked 503: never "pending"', async () => {
  const store = new RefusalAnswerLostDatabaseAway(db.pool);
  // A ledger whose available balance is short of the refund: it refuses the reservation.
  const ledgers = {
    post: async () => ({}),
    releaseDueHolds: async () => 0,
    reserve: async () => ({ outcome: 'refused', refusal: 'insufficient_balance' }),
  } as unknown as LedgerBook;
  const handler = new RefundInvoiceHandler(store, new RefundFlow(store, ledgers, 60, db.pool));

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

  const keyed = { keyId: randomUUID(), projectId: project.id, mode: 'live' as const, key: 'K', fingerprint: 'f' };
  const refund = () => handler.execute(new RefundInvoice(project, 'live', invoiceId, 50_000, at, keyed));
  const answer = await refund().catch((error: unknown) => error);
  expect(answer).toBeInstanceOf(AppendOutcomeUnknownError);
  // The database back, the retry under the same key reads the refusal: 422, as the first run would have said.
  store.away = false;
  await expect(refund()).rejects.toMatchObject({ code: 'insufficient_balance' });
  await store.close();
});
