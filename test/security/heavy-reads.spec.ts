/**
 * Heavy reads per merchant account (docs/security.md, "Limits"), at the defaults `npm
 * start` gives: at most two of one account answered at once in an API process, whatever
 * its keys and projects; the others wait in order of arrival (at most 20, else 429
 * rate_limited with Retry-After), holding nothing; another account is not held up; a
 * client that resets while it waits gives its place up. Two CSV exports longer than the
 * socket buffers, whose answers the client pauses unread, hold account A's two turns.
 */
import { ClientRequest, IncomingMessage, request as httpRequest } from 'node:http';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { REBUILD_MARKS_MAX_AGE_MS } from '#event-store/projections';
import { CYRILLIC, expectStatus, InvoiceGateway, Json, logLinesWith, Merchant, poll, startInvoiceGateway } from '../support/merchant-fixtures';

/**
 * 100,000 movements of an account's test ledger written straight into the read model (the CSV
 * reads nothing else): megabytes of CSV, more than the socket buffers take, so a paused reader
 * holds its answer unsent.
 */
const seedMovements = (gw: InvoiceGateway, accountId: string) =>
  gw.db.pool.query(
    `WITH e AS (
       INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       SELECT gen_random_uuid(), $1, 'test', i, 'payment_recorded', 'payment:' || gen_random_uuid(), now() - interval '2 days' + i * interval '1 second', 'seeded'
       FROM generate_series(0, 99999) AS i RETURNING entry_id, seq)
     INSERT INTO ledger_postings (entry_id, ordinal, account, amount, balance_after)
     SELECT entry_id, 0, 'available', 100, (seq + 1) * 100 FROM e`,
    [accountId],
  );

/** A GET on a connection of its own; `answer` settles with its status once its headers come (the body is left unread, paused). */
interface Sent {
  readonly requestId: string;
  readonly request: ClientRequest;
  readonly answer: Promise<{ status: number; retryAfter?: string; response: IncomingMessage }>;
  settled: boolean;
}

describe('heavy reads, at most two per merchant account at a time', () => {
  let gw: InvoiceGateway;
  let a1: Merchant;
  let a2: Merchant;
  let a3: Merchant;
  let b: Merchant;
  const opened: Sent[] = [];

  beforeAll(async () => {
    gw = await startInvoiceGateway();
    a1 = await gw.operator.merchant({ name: 'Первый магазин' });
    // Other projects of the same account: their keys share the account's turns.
    a2 = await gw.operator.merchant({ name: 'Второй магазин' }, a1.accountId);
    a3 = await gw.operator.merchant({ name: 'Третий магазин' }, a1.accountId);
    b = await gw.operator.merchant({ name: 'Сосед' });
    await seedMovements(gw, a1.accountId);
  }, 120_000);

  afterAll(async () => {
    for (const sent of opened) sent.request.destroy();
    await gw?.close();
  });

  const send = (key: string, path: string): Sent => {
    const requestId = `heavy-${randomUUID()}`;
    const request = httpRequest(`${gw.baseUrl}${path}`, { agent: false, headers: { authorization: `Bearer ${key}`, 'x-request-id': requestId } });
    request.on('error', () => undefined);
    const sent: Sent = {
      requestId,
      request,
      settled: false,
      answer: new Promise((resolve, reject) => {
        request.once('response', (response) => {
          response.pause();
          response.on('error', () => undefined);
          sent.settled = true;
          resolve({ status: response.statusCode!, retryAfter: response.headers['retry-after'] as string | undefined, response });
        });
        request.once('close', () => reject(new Error(`${path}: the connection closed without an answer`)));
      }),
    };
    sent.answer.catch(() => undefined);
    request.end();
    opened.push(sent);
    return sent;
  };

  /** The whole body of an answer (read now). */
  const bodyOf = async (response: IncomingMessage): Promise<Json> => {
    let text = '';
    for await (const chunk of response) text += String(chunk);
    return JSON.parse(text) as Json;
  };

  /** The gateway's log lines of this request. */
  const linesOf = (requestId: string): Json[] => logLinesWith(gw.gateway, requestId);

  /** Waits until the gateway logged that each of these requests waits for its turn. */
  const waiting = (sent: readonly Sent[]) =>
    poll(
      async () => {
        const answered = sent.find((s) => s.settled);
        if (answered) throw new Error(`${answered.requestId} was answered without waiting for its turn`);
        return sent.filter((s) => linesOf(s.requestId).some((l) => /heavy read: waiting/.test(l.msg))).length;
      },
      (n) => n === sent.length,
      `${sent.length} heavy read(s) to wait for their turn`,
    );

  it('two held exports hold the account; a third waits while another account is answered; 20 wait, the 21st gets 429; a reset gives its place up', async () => {
    const csv = '/v1/balance/transactions?format=csv';
    const held = [send(a1.keys.test.secretKey, csv), send(a1.keys.test.secretKey, csv)];
    for (const h of held) expect((await h.answer).status).toBe(200);

    // A third heavy read of account A, by another project's key: it waits, it is not refused.
    const third = send(a2.keys.test.secretKey, '/v1/events');
    await waiting([third]);
    expect(linesOf(third.requestId).find((l) => /heavy read: waiting/.test(l.msg))).toMatchObject({ level: 30, accountId: a1.accountId, route: '/v1/events' });
    // Account B's heavy reads are answered meanwhile.
    const other = await b.test.get('/v1/balance/transactions?format=csv');
    expectStatus(other, 200);
    expectStatus(await b.test.get('/v1/events'), 200);
    expect(third.settled).toBe(false);

    // A heavy read with a bad query gets its 400 at once, with both turns held: it neither waits nor counts as waiting.
    const bad = send(a2.keys.test.secretKey, '/v1/events?limit=abc');
    const badAnswer = await bad.answer;
    expect({ status: badAnswer.status, error: (await bodyOf(badAnswer.response)).error }).toMatchObject({
      status: 400,
      error: { code: 'validation', param: 'limit' },
    });
    // So does one whose range is reversed, which the handler checks (not the DTO).
    const reversed = await send(a2.keys.test.secretKey, '/v1/events?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z').answer;
    const refusal = (await bodyOf(reversed.response)).error;
    expect({ status: reversed.status, param: refusal.param, details: refusal.details }).toEqual({
      status: 400,
      param: 'to',
      details: [expect.objectContaining({ param: 'to', code: 'invalid_range' })],
    });
    // And a statement whose period has not ended on the gateway clock.
    const future = await send(a2.keys.test.secretKey, '/v1/statements?from=2026-01-01T00:00:00Z&to=2999-01-01T00:00:00Z').answer;
    const notYet = (await bodyOf(future.response)).error;
    expect({ status: future.status, param: notYet.param, details: notYet.details }).toEqual({
      status: 400,
      param: 'to',
      details: [expect.objectContaining({ param: 'to', code: 'in_future' })],
    });

    // And one whose read model is being rebuilt: its 503 at once, not after a wait for the turn.
    const mark = (on: boolean) =>
      gw.db.pool.query(`UPDATE projection_checkpoints SET rebuild_started_at = ${on ? 'now()' : 'NULL'} WHERE projection = 'ledger'`);
    await mark(true);
    try {
      await poll(
        async () => (await b.test.get('/v1/balance/transactions')).status,
        (status) => status === 503,
        'the API to see the rebuild mark',
      );
      // That 503 may be its own query's look at the mark; the process's view of the marks, which a request consults
      // before it waits for a turn, is at most REBUILD_MARKS_MAX_AGE_MS old by then.
      await new Promise((resolve) => setTimeout(resolve, REBUILD_MARKS_MAX_AGE_MS + 100));
      for (const path of ['/v1/balance/transactions', '/v1/statements?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z']) {
        const rebuilt = await send(a2.keys.test.secretKey, path).answer;
        expect({ path, status: rebuilt.status, code: (await bodyOf(rebuilt.response)).error.code }).toEqual({
          path,
          status: 503,
          code: 'provider_unavailable',
        });
      }
    } finally {
      await mark(false);
    }
    await poll(
      async () => (await b.test.get('/v1/balance/transactions')).status,
      (status) => status === 200,
      'the API to see the mark gone',
    );

    // 20 wait in all (the third and 19 more); the 21st, even by a key that sent nothing yet, gets 429 at once.
    const more = Array.from({ length: 19 }, () => send(a2.keys.test.secretKey, '/v1/events?limit=1'));
    await waiting(more);
    const over = send(a3.keys.test.secretKey, '/v1/events');
    const refused = await over.answer;
    expect({ status: refused.status, retryAfter: refused.retryAfter }).toEqual({ status: 429, retryAfter: '1' });
    const body = await bodyOf(refused.response);
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error.code).toBe('rate_limited');
    expect(body.error.message).toMatch(CYRILLIC);

    // One that waits resets its connection: it is not served, and its place goes to the next one.
    const leaving = more[5]!;
    leaving.request.socket!.resetAndDestroy();
    await poll(
      async () => linesOf(leaving.requestId).filter((l) => l.msg === 'request'),
      (lines) => lines.length === 1,
      'the request line of the one that left',
    );
    expect(linesOf(leaving.requestId).find((l) => l.msg === 'request')).toMatchObject({ status: 429, clientGone: true });
    const next = send(a3.keys.test.secretKey, '/v1/events?limit=2');
    await waiting([next]);
    expect(third.settled).toBe(false);

    // The held exports' clients go: their turns pass on, and every one still waiting is answered.
    for (const h of held) h.request.destroy();
    expect((await third.answer).status).toBe(200);
    const rest = [...more.filter((s) => s !== leaving), next];
    expect(await Promise.all(rest.map(async (s) => (await s.answer).status))).toEqual(rest.map(() => 200));
    expect((await bodyOf((await third.answer).response)).items).toEqual([]);
  }, 120_000);
});

describe('heavy reads pipelined on one connection', () => {
  let gw: InvoiceGateway;
  let m: Merchant;

  beforeAll(async () => {
    gw = await startInvoiceGateway();
    m = await gw.operator.merchant();
    await seedMovements(gw, m.accountId);
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
  });

  const waited = (requestId: string) =>
    gw.gateway
      .output()
      .split('\n')
      .some((l) => l.includes(requestId) && l.includes('heavy read: waiting'));

  /** A heavy read on a connection of its own, its answer left unread: its status once its headers come. */
  const held = (path: string) => {
    const request = httpRequest(`${gw.baseUrl}${path}`, { agent: false, headers: { authorization: `Bearer ${m.keys.test.secretKey}` } });
    request.on('error', () => undefined);
    const status = new Promise<number>((resolve) => request.once('response', (r) => (r.pause(), resolve(r.statusCode!))));
    request.end();
    return { request, status };
  };

  it('a client that resets with an answer queued behind another gives both turns back (the queued answer never had the socket)', async () => {
    const url = new URL(gw.baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const ask = (path: string) => `GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${m.keys.test.secretKey}\r\n\r\n`;
    // The export first (its answer fills the socket unread), a page of events queued behind it: each takes a turn.
    const exportBegun = new Promise((resolve) => socket.once('data', resolve));
    socket.write(ask('/v1/balance/transactions?format=csv') + ask('/v1/events?limit=1'));
    // Once the export is answering, the page of events (parsed with it) has taken its turn too; the socket then left unread.
    await exportBegun;
    socket.pause();
    const probe = `heavy-probe-${randomUUID()}`;
    const third = httpRequest(`${gw.baseUrl}/v1/events?limit=1`, {
      agent: false,
      headers: { authorization: `Bearer ${m.keys.test.secretKey}`, 'x-request-id': probe },
    });
    third.on('error', () => undefined);
    const thirdStatus = new Promise<number>((resolve) => third.once('response', (r) => (r.resume(), resolve(r.statusCode!))));
    third.end();
    await poll(async () => waited(probe), Boolean, 'a third heavy read to wait: both turns held by the pipelined two');
    socket.resetAndDestroy();
    expect(await thirdStatus).toBe(200);
    // Both turns are free again: two held exports are both answered at once (a turn kept by the queued answer made the second wait, then 429).
    const [one, two] = [held('/v1/balance/transactions?format=csv'), held('/v1/balance/transactions?format=csv')];
    try {
      expect(await Promise.all([one.status, two.status])).toEqual([200, 200]);
    } finally {
      one.request.destroy();
      two.request.destroy();
    }
  }, 120_000);

  it('a read model whose rebuild begins while a heavy read waits for its turn: 503 once the turn comes, not the read', async () => {
    const other = await gw.operator.merchant();
    const [one, two] = [held('/v1/balance/transactions?format=csv'), held('/v1/balance/transactions?format=csv')];
    const mark = (on: boolean) =>
      gw.db.pool.query(`UPDATE projection_checkpoints SET rebuild_started_at = ${on ? 'now()' : 'NULL'} WHERE projection = 'ledger'`);
    try {
      expect(await Promise.all([one.status, two.status])).toEqual([200, 200]);
      const probe = `heavy-rebuild-${randomUUID()}`;
      const waiting = httpRequest(`${gw.baseUrl}/v1/balance/transactions`, {
        agent: false,
        headers: { authorization: `Bearer ${m.keys.test.secretKey}`, 'x-request-id': probe },
      });
      waiting.on('error', () => undefined);
      const status = new Promise<number>((resolve) => waiting.once('response', (r) => (r.resume(), resolve(r.statusCode!))));
      waiting.end();
      await poll(async () => waited(probe), Boolean, 'the heavy read to wait for its turn');
      await mark(true);
      await poll(
        async () => (await other.test.get('/v1/balance/transactions')).status,
        (code) => code === 503,
        'the API to see the rebuild mark',
      );
      one.request.destroy();
      two.request.destroy();
      expect(await status).toBe(503);
    } finally {
      one.request.destroy();
      two.request.destroy();
      await mark(false);
    }
  }, 120_000);
});
