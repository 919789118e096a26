/**
 * A query cancelled by the serving sessions' statement timeout rolls back its transaction:
 * nothing was written, and the client gets the spec's 503 provider_unavailable with
 * Retry-After, not a 500 (a long reconciliation or statement period can run into it).
 */
import { toApiError } from '../../apps/api/src/http/errors/error.filter';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

describe('a statement cancelled by the statement timeout', () => {
  it('BUG: is answered 503 provider_unavailable with Retry-After (was 500 internal)', async () => {
    const client = await db.pool.connect();
    let failure: unknown;
    try {
      await client.query("SET statement_timeout = '50ms'");
      failure = await client.query('SELECT pg_sleep(2)').catch((e: unknown) => e);
      await client.query('RESET statement_timeout');
    } finally {
      client.release();
    }
    expect((failure as { code?: string }).code).toBe('57014');
    const answer = toApiError(failure);
    expect({ status: answer.status, code: answer.body().error.code, headers: answer.headers }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      headers: { 'Retry-After': '1' },
    });
  });
});
