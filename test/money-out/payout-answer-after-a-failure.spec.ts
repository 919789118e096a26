/**
 * The answer to a payout request whose steps fail after the payout is written (the
 * database went away mid-request): it must agree with what the payout's stream holds,
 * so that no answer says "pending" for a payout that ends refused, unseen. Found under
 * load with database sessions terminated: a repeat by orderId answered 200 pending
 * while the run that wrote the payout refused it (too_many_pending), and the payout was
 * then 404 everywhere.
 */
import { randomUUID } from 'node:crypto';
import { AppendOutcomeUnknownError, EventToAppend, ExpectedRevision, PostgresEventStore, ReadStreamOptions } from '#event-store';
import { DEFAULT_PAYOUT_TERMS, payoutAmounts, Refusal } from '#domain';
import { FixedUsdtRate, PayoutFlow } from '#payments/payouts';
import type { LedgerBook } from '#payments/ledger';
import type { PayoutAddresses } from '#payments/merchants';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { MAYBE_WRITTEN_MARK, toApiError, wroteNothing } from '../../apps/api/src/http/errors/error.filter';

/** The log, but the answer to an append that refuses a payout is lost after it was written (and cannot be checked). */
class RefusalAnswerLost extends PostgresEventStore {
  override async appendToStream(streamName: string, events: readonly EventToAppend[], options: { expectedRevision?: ExpectedRevision } = {}) {
    const result = await super.appendToStream(streamName, events, options);
    if (events.some((e) => e.type === 'PayoutRefused')) throw new AppendOutcomeUnknownError(streamName, { cause: new Error('connection lost') });
    return result;
  }
}

/** As RefusalAnswerLost, and the database stays away after it: the payout cannot be read again either. */
class RefusalAnswerLostDatabaseAway extends RefusalAnswerLost {
  away = false;
  override async appendToStream(streamName: string, events: readonly EventToAppend[], options: { expectedRevision?: ExpectedRevision } = {}) {
    try {
      return await super.appendToStream(streamName, events, options);
    } finally {
      this.away ||= events.some((e) => e.type === 'PayoutRefused');
    }
  }
  override async readStream(streamName: string, options?: ReadStreamOptions) {
    if (this.away) throw connectionLost();
    return super.readStream(streamName, options);
  }
}

const connectionLost = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

function flowOn(store: PostgresEventStore, reserve: LedgerBook['reserve']): PayoutFlow {
  // A ledger with no hold to release (the flow releases the due holds first), whose reservation answers as `reserve` says.
  const releaseDueHolds = async () => 0;
  return new PayoutFlow(
    store,
    db.pool,
    { reserve, releaseDueHolds } as unknown as LedgerBook,
    {} as PayoutAddresses,
    DEFAULT_PAYOUT_TERMS,
    new FixedUsdtRate(10_000),
  );
}

async function written(flow: PayoutFlow, payoutId: number) {
  const now = new Date();
  const requested = await flow.decide(payoutId, {
    type: 'RequestPayout',
    data: {
      payoutId,
      accountId: randomUUID(),
      projectId: randomUUID(),
      method: 'sbp',
      addressId: 1,
      account: '+79001234567',
      bank: null,
      orderId: `order-${payoutId}`,
      comment: null,
      ...payoutAmounts(15_000, DEFAULT_PAYOUT_TERMS.sbp),
      usdtAmount: null,
      usdtRate: null,
      source: 'api',
      createdAt: now.toISOString(),
    },
  });
  return { payout: requested.state, now };
}

it('a repeat (by orderId or key) whose steps fail while the payout is still requested fails too: it never answers it pending', async () => {
  const store = new PostgresEventStore(db.pool);
  const flow = flowOn(store, async () => {
    throw connectionLost();
  });
  const { payout, now } = await written(flow, 910_001);
  await expect(flow.answerOf(payout, now, 'finishing')).rejects.toMatchObject({ code: '57P01' });
  // The run that wrote it answers it as written (pending), left to the recovery worker, which shows any refusal.
  await expect(flow.answerOf(payout, now, 'answering')).resolves.toMatchObject({ status: 'requested' });
  await store.close();
});

it('a refusal recorded before the answer was lost is the answer, not the payout as written', async () => {
  const store = new RefusalAnswerLost(db.pool);
  const flow = flowOn(store, async () => ({ outcome: 'refused', refusal: 'too_many_pending' }));
  const { payout, now } = await written(flow, 910_002);
  const answer = await flow.answerOf(payout, now, 'answering').catch((error: unknown) => error);
  expect(answer).toBeInstanceOf(Refusal);
  expect(answer).toMatchObject({ code: 'too_many_pending' });
  expect((await flow.load(910_002)).status).toBe('refused');
  await store.close();
});

it('a refusal whose recording may have committed, the payout unreadable after, is the marked 503: never "pending"', async () => {
  const store = new RefusalAnswerLostDatabaseAway(db.pool);
  const flow = flowOn(store, async () => ({ outcome: 'refused', refusal: 'too_many_pending' }));
  const { payout, now } = await written(flow, 910_003);
  // Answered 201 pending, it was stored under the request's Idempotency-Key: refused, the payout was then 404 forever.
  const answer = await flow.answerOf(payout, now, 'answering').catch((error: unknown) => error);
  expect(answer).toBeInstanceOf(AppendOutcomeUnknownError);
  // The database back, the retry under the same key (finishing) reads the refusal.
  store.away = false;
  await expect(flow.answerOf(payout, now, 'finishing')).rejects.toMatchObject({ code: 'too_many_pending' });
  await store.close();
});

it('a repeat that made the reservation and failed to record it answers the marked 503, not "nothing written"', async () => {
  // The append recording the reservation fails before it is sent (nothing of it written): the ledger's reservation stands.
  class ReservedNotRecorded extends PostgresEventStore {
    override async appendToStream(streamName: string, events: readonly EventToAppend[], options: { expectedRevision?: ExpectedRevision } = {}) {
      if (events.some((e) => e.type === 'PayoutReserved')) throw connectionLost();
      return super.appendToStream(streamName, events, options);
    }
  }
  const store = new ReservedNotRecorded(db.pool);
  const flow = flowOn(store, async () => ({ outcome: 'reserved' }));
  const { payout, now } = await written(flow, 910_004);
  const answer = await flow.answerOf(payout, now, 'finishing').catch((error: unknown) => error);
  // It was the plain 503 (nothing written) while `available` showed the money reserved.
  expect(wroteNothing(answer)).toBe(false);
  expect(toApiError(answer)).toMatchObject({ status: 503, message: expect.stringContaining(MAYBE_WRITTEN_MARK) });
  expect((await flow.load(910_004)).status).toBe('requested');
  await store.close();
});

it('a refusal whose recording may yet commit, the payout read requested, is the marked 503 too: never "pending"', async () => {
  // The append's answer lost before it committed, and its server process not known to have ended: it may commit later.
  class RefusalInDoubt extends PostgresEventStore {
    override async appendToStream(streamName: string, events: readonly EventToAppend[], options: { expectedRevision?: ExpectedRevision } = {}) {
      if (events.some((e) => e.type === 'PayoutRefused')) throw new AppendOutcomeUnknownError(streamName, { cause: connectionLost() });
      return super.appendToStream(streamName, events, options);
    }
  }
  const store = new RefusalInDoubt(db.pool);
  const flow = flowOn(store, async () => ({ outcome: 'refused', refusal: 'too_many_pending' }));
  const { payout, now } = await written(flow, 910_005);
  const answer = await flow.answerOf(payout, now, 'answering').catch((error: unknown) => error);
  expect(answer).toBeInstanceOf(AppendOutcomeUnknownError);
  expect((await flow.load(910_005)).status).toBe('requested');
  await store.close();
});
