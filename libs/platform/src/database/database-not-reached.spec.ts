import { connect, createServer } from 'node:net';
import { DatabaseNotReachedError, isDatabaseNotReached } from './pool';

/** The error Node gives for a connect that every address of a host name refused (localhost: ::1 and 127.0.0.1). */
async function refusedOnEveryAddress(): Promise<unknown> {
  const server = createServer();
  const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return new Promise((resolve) => {
    const socket = connect({
      port,
      host: 'two-addresses.test',
      autoSelectFamily: true,
      // Both loopback addresses, as a resolver gives them for localhost.
      lookup: (_host, _options, callback) =>
        (callback as (error: null, addresses: { address: string; family: number }[]) => void)(null, [
          { address: '::1', family: 6 },
          { address: '127.0.0.1', family: 4 },
        ]),
    });
    socket.once('error', resolve);
  });
}

describe('a database that could not be reached', () => {
  it('counts a host name whose every address refused (an AggregateError without a message) and names each address', async () => {
    const error = await refusedOnEveryAddress();
    // Node's own AggregateError (another realm than jest's): its errors and no message.
    expect(error).toMatchObject({ name: 'AggregateError', message: '', code: 'ECONNREFUSED' });
    expect(isDatabaseNotReached(error)).toBe(true);
    expect(new DatabaseNotReachedError(error).message).toMatch(/^connect E[A-Z]+ .+; connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
  });

  it('counts socket codes whatever call reported them, and not other errors', () => {
    expect(isDatabaseNotReached(Object.assign(new Error('x'), { code: 'ETIMEDOUT' }))).toBe(true);
    expect(isDatabaseNotReached(Object.assign(new AggregateError([new Error('bad')], ''), { code: 'ECONNREFUSED' }))).toBe(false);
    expect(isDatabaseNotReached(Object.assign(new Error('syntax error'), { code: '42601' }))).toBe(false);
  });
});
