/**
 * A request whose database connection could not even be opened (a host unreachable, a
 * missing Unix socket) wrote nothing: it is answered 503 with Retry-After like any
 * database outage, not 500 `internal`, and its Idempotency-Key is let go (wroteNothing).
 * The failures are real ones of the `pg` driver.
 */
import { Pool } from 'pg';
import { toApiError, wroteNothing } from '../../apps/api/src/http/errors/error.filter';

/** The error of a query on a pool (as the gateway's) whose connect cannot succeed. */
async function connectFailure(config: ConstructorParameters<typeof Pool>[0]): Promise<unknown> {
  const pool = new Pool(config);
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    return error;
  } finally {
    await pool.end().catch(() => undefined);
  }
  throw new Error('connected');
}

describe('a database connection that could not be opened', () => {
  it.each([
    ['a missing Unix socket', { host: '/nonexistent-socket-dir', port: 5432, connectionTimeoutMillis: 2_000 }],
    // TEST-NET-1 with a 1 ms connect timeout: the connect times out (never reached).
    ['an address that does not answer', { host: '192.0.2.1', port: 5432, connectionTimeoutMillis: 1 }],
  ])('%s: 503 provider_unavailable with Retry-After, and it wrote nothing', async (_, config) => {
    const failure = await connectFailure(config);
    const answer = toApiError(failure);
    expect({ status: answer.status, code: answer.body().error.code, headers: answer.headers, wroteNothing: wroteNothing(failure) }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      headers: { 'Retry-After': '1' },
      wroteNothing: true,
    });
  });

  it.each(['EHOSTUNREACH', 'ENETUNREACH'])('a connect failing with %s: 503, wrote nothing', (code) => {
    // As Node's net module reports it (these need a network that refuses the route, which a test cannot arrange).
    const failure = Object.assign(new Error(`connect ${code} 10.255.255.1:5432`), {
      code,
      errno: -113,
      syscall: 'connect',
      address: '10.255.255.1',
      port: 5432,
    });
    expect({ status: toApiError(failure).status, wroteNothing: wroteNothing(failure) }).toEqual({ status: 503, wroteNothing: true });
  });
});
