/**
 * What the error filter says when the database or the event store fails: a 503 the
 * client may retry as it is, or, when a write's answer was lost and could not be
 * checked, a 503 that says the outcome is unknown and how to retry safely.
 */
import { AppendOutcomeUnknownError, EventStoreUnavailableError } from '#event-store';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { WriteOutcomeUnknownError } from '#platform/database';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Registry } from '#payments/merchants';
import { PayoutAddresses } from '#payments/payouts';
import { DueHoldsRaceError } from '#payments/ledger';
import { toApiError } from './error.filter';

describe('toApiError: the store did not answer', () => {
  it('a write whose outcome is unknown: 503 provider_unavailable that says so and names the safe retry', () => {
    const answer = toApiError(new AppendOutcomeUnknownError('refund-rf_x', { cause: new Error('Connection terminated unexpectedly') }));
    expect({ status: answer.status, code: answer.code, headers: answer.headers }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      headers: { 'Retry-After': '1' },
    });
    expect(answer.message).toMatch(/проверить, записано ли что-то, не удалось/);
    expect(answer.message).toMatch(/Idempotency-Key/);
  });

  it('a plain-table write whose outcome is unknown: 503 provider_unavailable, marked, that says to check before repeating', () => {
    const answer = toApiError(new WriteOutcomeUnknownError(new Error('Connection terminated unexpectedly')));
    expect({ status: answer.status, code: answer.code, headers: answer.headers }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      headers: { 'Retry-After': '1' },
    });
    expect(answer.message).toMatch(/проверить, записано ли что-то, не удалось/);
    expect(answer.message).toMatch(/прежде чем повторять запрос, проверьте/);
  });

  it("a payout's due holds still being released by the worker (every attempt lost): 503 with Retry-After, not 500", () => {
    const answer = toApiError(new DueHoldsRaceError({ accountId: 'a', mode: 'live' }));
    expect({ status: answer.status, code: answer.code, headers: answer.headers }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      headers: { 'Retry-After': '1' },
    });
  });

  it.each([
    ['the event store did not answer', new EventStoreUnavailableError('EventStoreDB did not answer')],
    ['the connection was refused', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['the session was terminated', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })],
    ['the disk is full', Object.assign(new Error('could not extend file "base/16384/16500": No space left on device'), { code: '53100' })],
    ['no connection is left', Object.assign(new Error('sorry, too many clients already'), { code: '53300' })],
  ])('%s: 503 provider_unavailable to retry, without a claim of an unknown outcome', (_, error) => {
    const answer = toApiError(error);
    expect({ status: answer.status, code: answer.code, headers: answer.headers }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      headers: { 'Retry-After': '1' },
    });
    expect(answer.message).not.toMatch(/Idempotency-Key/);
  });
});

// A write whose write and look-up both failed (the database away): where to check. A new account's id was never told
// and no operator route lists accounts; a payout detail has no operator GET: "check with a GET" pointed nowhere.
describe('the 503 of an operator write whose write and look-up both failed names where to check, not a GET', () => {
  const lost = Object.assign(new Error('Connection terminated unexpectedly'), { code: '57P01' });
  // The connection breaks during the write; the look-up finds the database away too.
  const client = { query: () => Promise.reject(lost), release: () => undefined };
  const pool = { connect: async () => client, query: () => Promise.reject(lost) } as unknown as Pool;
  const answerOf = async (write: Promise<unknown>) => {
    const error = await write.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WriteOutcomeUnknownError);
    const answer = toApiError(error);
    expect(answer.status).toBe(503);
    expect(answer.message).not.toContain('GET');
    return answer.message;
  };

  it('an account: the console list', async () => {
    const registry = new Registry(pool, new SecretBox(fixedKeys([randomBytes(32)])));
    expect(await answerOf(registry.createAccount('ООО Сомнение', 'doubt@example.com', new Date()))).toContain(
      'список мерчантов в консоли (/admin): есть ли там «ООО Сомнение»',
    );
  });

  it('a payout detail added or confirmed: repeat it, it answers the same detail', async () => {
    const addresses = new PayoutAddresses(pool);
    const detail = { method: 'sbp' as const, account: '+79001112233', bank: null, label: null };
    expect(await answerOf(addresses.add(randomUUID(), detail, new Date()))).toContain('повторите запрос: добавление того же реквизита');
    expect(await answerOf(addresses.confirm(7, new Date()))).toContain('повторите запрос: подтверждение');
  });
});
