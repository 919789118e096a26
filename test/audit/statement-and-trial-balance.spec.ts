/**
 * GET /admin/v1/accounts/{id}/statement and GET /admin/v1/audit/trial-balance on a
 * gateway process over a real PostgreSQL: a small ledger whose statement is known
 * line by line, a seeded random ledger of 5,000 entries streamed in pages, and the
 * trial balance folded from the log (compared with the read model, then shown to
 * come from the log when the read model is damaged).
 */
import { Refusal } from '#domain';
import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '#event-store';
import {
  initialLedgerState,
  LEDGER_ACCOUNTS,
  LedgerCommand,
  ledgerDecider,
  LedgerEvent,
  LedgerId,
  ledgerEntryId,
  evolve,
  LedgerState,
  TrialBalance,
  TrialBalanceFold,
} from '#ledger';
import type { Pool } from 'pg';
import { openAccountStatement } from '#payments/audit';
import type { LedgerRequest } from '#payments/ledger';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { appendLedgerHistory } from '../support/ledger-history';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { seededRandom } from '../support/test-seed';

/** The trial balance's figures from the ledger read model: the oracle the log's are compared with. */
async function trialBalanceFromReadModel(pool: Pick<Pool, 'query'>, asOf: Date): Promise<TrialBalance> {
  const fold = new TrialBalanceFold();
  const { rows } = await pool.query<{ account_id: string; mode: string; postings: { account: string; amount: number }[] }>(
    `SELECT e.account_id, e.mode,
            COALESCE((SELECT json_agg(json_build_object('account', p.account, 'amount', p.amount) ORDER BY p.ordinal)
                      FROM ledger_postings p WHERE p.entry_id = e.entry_id), '[]') AS postings
     FROM ledger_entries e WHERE e.occurred_at <= $1`,
    [asOf],
  );
  for (const row of rows)
    fold.apply({ accountId: row.account_id, mode: row.mode }, row.postings.map((p) => ({ account: p.account, amount: Number(p.amount) })) as never);
  return fold.result();
}

const ADMIN_TOKEN = 'operator-token-for-audit-report-tests-42';
const toKopecks = (money: string): number => {
  const negative = money.startsWith('-');
  const [whole, fraction = '00'] = money.replace('-', '').split('.');
  const k = Number(whole) * 100 + Number(fraction);
  return negative ? -k : k;
};

/** Seeded random ledger requests that the ledger accepts: payments (half held), releases, refunds and payouts reserved then settled or released. */
function randomRequests(testName: string, count: number, start: number): LedgerRequest[] {
  const random = seededRandom(testName);
  let state: LedgerState = initialLedgerState();
  const requests: LedgerRequest[] = [];
  let t = start;
  // The holds still open at the end are released after it, within `count`.
  for (let i = 0; requests.length + state.holds.size < count; i++) {
    t += random.int(1_000, 120_000);
    const at = new Date(t).toISOString();
    const holds = Object.keys(state.holds.toRecord());
    const reservations = Object.entries(state.reservations);
    const choice = random.int(0, 5);
    let request: LedgerRequest;
    if (choice === 0 || (holds.length === 0 && reservations.length === 0 && state.balances.available === 0)) {
      const held = random.chance(0.5);
      request = {
        type: 'RecordPayment',
        invoiceId: `inv-${i}`,
        netAmount: random.int(1, 500_000),
        feeAmount: random.int(1, 20_000),
        releaseAt: held ? new Date(t + 60_000).toISOString() : null,
        at,
      };
    } else if (choice === 1 && holds.length > 0) {
      const id = random.pick(holds);
      if (Date.parse(state.holds.get(id)!.releaseAt!) > t) continue;
      request = { type: 'ReleaseHold', invoiceId: id, at };
    } else if (choice <= 3 && state.balances.available > 0) {
      const purpose = random.chance(0.5) ? 'refund' : 'payout';
      request = {
        type: 'ReserveFunds',
        reservationId: purpose === 'payout' ? `po_${i}` : `rf_${i}`,
        purpose,
        amount: random.int(1, state.balances.available),
        at,
      };
    } else if (reservations.length > 0) {
      const [id, r] = random.pick(reservations);
      request = random.chance(0.7)
        ? { type: 'SettleReservation', reservationId: id, feeAmount: r.purpose === 'payout' ? random.int(0, Math.min(r.amount, 5_000)) : 0, at }
        : { type: 'ReleaseReservation', reservationId: id, at };
    } else continue;
    // Every cause here is new: none posted before the window.
    const command = { ...request, entryId: `e${i}`, postedBeforeWindow: false } as LedgerCommand;
    const decided = ledgerDecider.decide(command, state);
    if (decided instanceof Refusal) continue;
    state = decided.reduce(evolve, state);
    requests.push(request);
  }
  for (const invoiceId of Object.keys(state.holds.toRecord())) {
    t += random.int(60_000, 120_000);
    requests.push({ type: 'ReleaseHold', invoiceId, at: new Date(t).toISOString() });
  }
  return requests;
}

describe('statements and the trial balance over HTTP', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let gateway: RunningGateway;
  const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const small: LedgerId = { accountId: randomUUID(), mode: 'live' };
  const big: LedgerId = { accountId: randomUUID(), mode: 'live' };
  let bigEvents: LedgerEvent[] = [];

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function get(path: string, headers: Record<string, string> = auth): Promise<{ status: number; headers: Headers; text: string; body: any }> {
    const response = await fetch(`${gateway.baseUrl}${path}`, { headers });
    const text = await response.text();
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      /* CSV */
    }
    return { status: response.status, headers: response.headers, text, body };
  }

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 4 });
    store = new PostgresEventStore(db.pool);
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    // Histories in the past (reports answer only up to now), every hold released within them:
    // the gateway's hold-release worker has nothing to do in them.
    await appendLedgerHistory(store, small, [
      { type: 'RecordPayment', invoiceId: 'inv-1', netAmount: 96_500, feeAmount: 3_500, releaseAt: '2025-03-02T10:00:00.000Z', at: '2025-03-01T10:00:00.000Z' },
      { type: 'RecordPayment', invoiceId: 'inv-2', netAmount: 48_000, feeAmount: 2_000, releaseAt: null, at: '2025-03-01T11:00:00.000Z' },
      { type: 'ReleaseHold', invoiceId: 'inv-1', at: '2025-03-02T10:00:00.000Z' },
      { type: 'ReserveFunds', reservationId: 'rf_1', purpose: 'refund', amount: 10_000, at: '2025-03-02T12:00:00.000Z' },
      { type: 'SettleReservation', reservationId: 'rf_1', at: '2025-03-02T12:00:10.000Z' },
    ]);
    bigEvents = (await appendLedgerHistory(store, big, randomRequests('statement of 5,000 entries', 5_000, Date.parse('2025-05-01T00:00:00Z')))).events;
    const expected = 5 + bigEvents.length;
    const deadline = Date.now() + 60_000;
    while ((await db.pool.query('SELECT count(*)::int AS n FROM ledger_entries')).rows[0].n < expected) {
      if (Date.now() > deadline) throw new Error('the ledger read model did not catch up');
      await new Promise((r) => setTimeout(r, 50));
    }
  }, 120_000);
  afterAll(async () => {
    await gateway?.kill();
    await store?.close();
    await db?.drop();
  });

  it('a statement: opening as of `from`, the entries of (from, to] with postings and running balances, movements and closing (JSON)', async () => {
    // From the instant of the first payment (excluded: it is in the opening) to the release (included).
    const r = await get(`/admin/v1/accounts/${small.accountId}/statement?mode=live&from=2025-03-01T10:00:00Z&to=2025-03-02T10:00:00Z`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const system = (clearing: string, fees: string, refunds = '0.00') => ({ acquiring_clearing: clearing, fees, refunds_paid: refunds, payouts_sent: '0.00' });
    expect(r.body).toEqual({
      accountId: small.accountId,
      mode: 'live',
      from: '2025-03-01T10:00:00.000Z',
      to: '2025-03-02T10:00:00.000Z',
      currency: 'RUB',
      opening: { available: '0.00', pending: '965.00', reserved: '0.00', system: system('-1000.00', '35.00') },
      entries: [
        {
          entryId: ledgerEntryId(small, 'payment:inv-2'),
          seq: 1,
          kind: 'payment_recorded',
          cause: 'payment:inv-2',
          occurredAt: '2025-03-01T11:00:00.000Z',
          logPosition: expect.stringMatching(/^\d+\/\d+$/),
          postings: [
            { account: 'acquiring_clearing', amount: '-500.00' },
            { account: 'available', amount: '480.00' },
            { account: 'fees', amount: '20.00' },
          ],
          balancesAfter: { available: '480.00', pending: '965.00', reserved: '0.00' },
        },
        {
          entryId: ledgerEntryId(small, 'hold_release:inv-1'),
          seq: 2,
          kind: 'hold_released',
          cause: 'hold_release:inv-1',
          occurredAt: '2025-03-02T10:00:00.000Z',
          logPosition: expect.stringMatching(/^\d+\/\d+$/),
          postings: [
            { account: 'pending', amount: '-965.00' },
            { account: 'available', amount: '965.00' },
          ],
          balancesAfter: { available: '1445.00', pending: '0.00', reserved: '0.00' },
        },
      ],
      entryCount: 2,
      movements: { available: '1445.00', pending: '-965.00', reserved: '0.00', system: system('-500.00', '20.00') },
      closing: { available: '1445.00', pending: '0.00', reserved: '0.00', system: system('-1500.00', '55.00') },
    });
    // The closing is the balance rebuilt from the log as of `to`; the opening as of `from`.
    const asOfTo = await get(`/admin/v1/accounts/${small.accountId}/balance?mode=live&asOf=2025-03-02T10:00:00Z`);
    expect({ available: asOfTo.body.available, pending: asOfTo.body.pending, reserved: asOfTo.body.reserved, system: asOfTo.body.system }).toEqual(
      r.body.closing,
    );
  });

  it('the same statement as CSV (Accept: text/csv or format=csv): header, opening lines, one line per posting with its account’s balance after, closing lines', async () => {
    const path = `/admin/v1/accounts/${small.accountId}/statement?mode=live&from=2025-03-01T10:00:00Z&to=2025-03-02T10:00:00Z`;
    const byAccept = await get(path, { ...auth, accept: 'text/csv' });
    const byFormat = await get(`${path}&format=csv`);
    expect(byAccept.text).toBe(byFormat.text);
    expect(byAccept.status).toBe(200);
    expect(byAccept.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(byAccept.headers.get('content-disposition')).toBe(`attachment; filename="statement-${small.accountId}-live-20250301T100000Z-20250302T100000Z.csv"`);
    const lines = byAccept.text.split('\r\n');
    expect(lines.pop()).toBe('');
    const e2 = ledgerEntryId(small, 'payment:inv-2');
    const e3 = ledgerEntryId(small, 'hold_release:inv-1');
    expect(lines).toEqual([
      'record,entry_id,seq,occurred_at,kind,cause,account,amount,balance_after',
      'opening,,,2025-03-01T10:00:00.000Z,,,pending,,965.00',
      'opening,,,2025-03-01T10:00:00.000Z,,,available,,0.00',
      'opening,,,2025-03-01T10:00:00.000Z,,,reserved,,0.00',
      'opening,,,2025-03-01T10:00:00.000Z,,,acquiring_clearing,,-1000.00',
      'opening,,,2025-03-01T10:00:00.000Z,,,fees,,35.00',
      'opening,,,2025-03-01T10:00:00.000Z,,,refunds_paid,,0.00',
      'opening,,,2025-03-01T10:00:00.000Z,,,payouts_sent,,0.00',
      `posting,${e2},1,2025-03-01T11:00:00.000Z,payment_recorded,payment:inv-2,acquiring_clearing,-500.00,-1500.00`,
      `posting,${e2},1,2025-03-01T11:00:00.000Z,payment_recorded,payment:inv-2,available,480.00,480.00`,
      `posting,${e2},1,2025-03-01T11:00:00.000Z,payment_recorded,payment:inv-2,fees,20.00,55.00`,
      `posting,${e3},2,2025-03-02T10:00:00.000Z,hold_released,hold_release:inv-1,pending,-965.00,0.00`,
      `posting,${e3},2,2025-03-02T10:00:00.000Z,hold_released,hold_release:inv-1,available,965.00,1445.00`,
      'closing,,,2025-03-02T10:00:00.000Z,,,pending,-965.00,0.00',
      'closing,,,2025-03-02T10:00:00.000Z,,,available,1445.00,1445.00',
      'closing,,,2025-03-02T10:00:00.000Z,,,reserved,0.00,0.00',
      'closing,,,2025-03-02T10:00:00.000Z,,,acquiring_clearing,-500.00,-1500.00',
      'closing,,,2025-03-02T10:00:00.000Z,,,fees,20.00,55.00',
      'closing,,,2025-03-02T10:00:00.000Z,,,refunds_paid,0.00,0.00',
      'closing,,,2025-03-02T10:00:00.000Z,,,payouts_sent,0.00,0.00',
    ]);
    // format=json wins over Accept.
    expect((await get(`${path}&format=json`, { ...auth, accept: 'text/csv' })).headers.get('content-type')).toBe('application/json; charset=utf-8');
  });

  it('a seeded history of 5,000 entries: opening + movements = closing, each equal to the balance rebuilt from the log; streamed in chunks, read in keyset pages', async () => {
    const at = (i: number) => bigEvents[i]!.data.occurredAt;
    const from = at(999);
    const to = at(4_499);
    const inPeriod = bigEvents.filter((e) => Date.parse(e.data.occurredAt) > Date.parse(from) && Date.parse(e.data.occurredAt) <= Date.parse(to));
    expect(inPeriod.length).toBeGreaterThan(3_000);
    // Every kind of entry is in the period.
    expect(new Set(inPeriod.map((e) => e.data.kind))).toEqual(
      new Set(['payment_recorded', 'hold_released', 'funds_reserved', 'reservation_settled', 'reservation_released']),
    );

    const response = await fetch(`${gateway.baseUrl}/admin/v1/accounts/${big.accountId}/statement?mode=live&from=${from}&to=${to}`, { headers: auth });
    expect(response.status).toBe(200);
    // Written as it is read: chunked, no length known up front, and more than one chunk on the wire.
    expect(response.headers.get('transfer-encoding')).toBe('chunked');
    expect(response.headers.get('content-length')).toBeNull();
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let chunks = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks++;
      text += decoder.decode(value, { stream: true });
    }
    expect(chunks).toBeGreaterThan(1);
    const statement = JSON.parse(text);
    expect(statement.entryCount).toBe(inPeriod.length);
    expect(statement.entries.map((e: { entryId: string }) => e.entryId)).toEqual(inPeriod.map((e) => e.data.entryId));

    // Opening + every posting listed = closing, account by account, and each running balance on the way.
    const flat = (b: { available: string; pending: string; reserved: string; system: Record<string, string> }) =>
      Object.fromEntries(Object.entries({ available: b.available, pending: b.pending, reserved: b.reserved, ...b.system }).map(([k, v]) => [k, toKopecks(v)]));
    const running = flat(statement.opening);
    for (const entry of statement.entries) {
      for (const p of entry.postings) running[p.account] += toKopecks(p.amount);
      expect({ available: running.available, pending: running.pending, reserved: running.reserved }).toEqual({
        available: toKopecks(entry.balancesAfter.available),
        pending: toKopecks(entry.balancesAfter.pending),
        reserved: toKopecks(entry.balancesAfter.reserved),
      });
    }
    expect(running).toEqual(flat(statement.closing));
    for (const a of LEDGER_ACCOUNTS) expect(flat(statement.opening)[a]! + flat(statement.movements)[a]!).toBe(flat(statement.closing)[a]);
    const balanceAsOf = async (instant: string) => {
      const b = await get(`/admin/v1/accounts/${big.accountId}/balance?mode=live&asOf=${instant}`);
      return flat(b.body);
    };
    expect(flat(statement.opening)).toEqual(await balanceAsOf(from));
    expect(flat(statement.closing)).toEqual(await balanceAsOf(to));

    // The read side: keyset pages of at most 500 entries, one query each, never the whole period at once.
    const opened = await openAccountStatement(db.pool, big, new Date(from), new Date(to), 500);
    const sizes: number[] = [];
    for await (const page of opened.pages()) sizes.push(page.length);
    expect(sizes.length).toBe(Math.ceil(inPeriod.length / 500));
    expect(Math.max(...sizes)).toBe(500);
    expect(sizes.reduce((s, n) => s + n, 0)).toBe(inPeriod.length);
  });

  it('a statement half read holds no transaction, and covers the ledger as it was when it began: entries projected meanwhile are left out', async () => {
    const openTransactions = async () =>
      (
        await db.pool.query<{ n: number }>(
          // The reader's pool only (its application_name): the gateway's own work on this database opens transactions too.
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND application_name = 'gateway-test' AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`,
        )
      ).rows[0]!.n;
    const from = bigEvents[0]!.data.occurredAt;
    const to = '2025-12-31T00:00:00Z';
    // The reader the route streams, read one page and then left waiting (as for a slow client).
    const statement = await openAccountStatement(db.pool, big, new Date(from), new Date(to), 500);
    const pages = statement.pages();
    const firstPage = await pages.next();
    expect(firstPage.done).toBe(false);
    expect(await openTransactions()).toBe(0);
    // Meanwhile the ledger grows inside the period, and the projection catches up.
    const more = await appendLedgerHistory(
      store,
      big,
      Array.from({ length: 3 }, (_, i) => ({
        type: 'RecordPayment' as const,
        invoiceId: `late-${i}`,
        netAmount: 1_000,
        feeAmount: 10,
        releaseAt: null,
        at: '2025-12-01T00:00:00.000Z',
      })),
      bigEvents,
    );
    const lastLate = more.events[more.events.length - 1]!.data.entryId;
    const deadline = Date.now() + 20_000;
    while ((await db.pool.query('SELECT 1 FROM ledger_entries WHERE entry_id = $1', [lastLate])).rowCount === 0) {
      if (Date.now() > deadline) throw new Error('the late entries were not projected');
      await new Promise((r) => setTimeout(r, 25));
    }
    const causes = (firstPage.value as { cause: string }[]).map((e) => e.cause);
    for await (const page of pages) causes.push(...page.map((e) => e.cause));
    // Every entry after `from` as the ledger was when the statement began, none of the late ones.
    expect(causes).toEqual(bigEvents.slice(1).map((e) => e.data.cause));
    // A statement begun now has them, over HTTP too.
    const again = await get(`/admin/v1/accounts/${big.accountId}/statement?mode=live&from=${from}&to=${to}`);
    expect(again.body.entryCount).toBe(bigEvents.length - 1 + 3);
    expect(again.body.entries.slice(-3).map((e: { cause: string }) => e.cause)).toEqual(['payment:late-0', 'payment:late-1', 'payment:late-2']);
    bigEvents = [...bigEvents, ...more.events];
  });

  it('refuses bad statement requests in the error shape; an unknown account is 404', async () => {
    const base = `/admin/v1/accounts/${small.accountId}/statement`;
    const cases: [string, string, string][] = [
      [`${base}?from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z`, 'mode', 'required'],
      [`${base}?mode=live&to=2025-02-01T00:00:00Z`, 'from', 'required'],
      [`${base}?mode=live&from=2025-01-01T00:00:00Z`, 'to', 'required'],
      [`${base}?mode=live&from=2025-02-30T00:00:00Z&to=2025-03-01T00:00:00Z`, 'from', 'invalid_datetime'],
      [`${base}?mode=live&from=2025-01-01T00:00:00Z&to=yesterday`, 'to', 'invalid_datetime'],
      // Before year 0000 in UTC: its echo (-000001-12-31T21:00:00.000Z) would be no valid input.
      [`${base}?mode=live&from=0000-01-01T00:00:00%2B03:00&to=2025-01-01T00:00:00Z`, 'from', 'invalid_datetime'],
      [`${base}?mode=live&from=2025-02-01T00:00:00Z&to=2025-01-01T00:00:00Z`, 'to', 'invalid_range'],
      // Nine fraction digits (Go, Java) are read to the last one.
      [`${base}?mode=live&from=2025-01-01T00:00:00.000000002Z&to=2025-01-01T00:00:00.000000001Z`, 'to', 'invalid_range'],
      // A period that has not ended: its closing balance is not known yet.
      [`${base}?mode=live&from=2025-01-01T00:00:00Z&to=2100-01-01T00:00:00Z`, 'to', 'in_future'],
      [`${base}?mode=live&from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z&format=xml`, 'format', 'invalid_enum'],
      [`${base}?mode=live&from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z&page=2`, 'page', 'unknown_field'],
      [`/admin/v1/accounts/bad%20id/statement?mode=live&from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z`, 'id', 'invalid'],
    ];
    for (const [path, param, code] of cases) {
      const r = await get(path);
      expect({ path, status: r.status, code: r.body?.error?.code, param: r.body?.error?.param, detail: r.body?.error?.details?.[0]?.code }).toEqual({
        path,
        status: 400,
        code: 'validation',
        param,
        detail: code,
      });
      expect(r.body.error.message).toMatch(/[А-Яа-яЁё]/);
    }
    const unknown = await get(`/admin/v1/accounts/${randomUUID()}/statement?mode=live&from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z`);
    expect({ status: unknown.status, code: unknown.body.error.code }).toEqual({ status: 404, code: 'not_found' });
    expect((await get(`${base}?mode=live&from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z`, {})).status).toBe(401);
    // An empty period of a known account: opening = closing, no entries.
    const empty = await get(`${base}?mode=live&from=2025-03-03T00:00:00Z&to=2025-03-03T00:00:00Z`);
    expect(empty.body).toMatchObject({ entries: [], entryCount: 0 });
    expect(empty.body.opening).toEqual(empty.body.closing);
  });

  it('the trial balance as of an instant: every ledger and account, debits = credits per ledger and overall, equal to the read model’s figures; CSV too', async () => {
    const asOf = '2025-05-03T00:00:00Z';
    const r = await get(`/admin/v1/audit/trial-balance?asOf=${asOf}`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ asOf: '2025-05-03T00:00:00.000Z', currency: 'RUB', balanced: true, totals: { balance: '0.00' } });
    expect(r.body.totals.debits).toBe(r.body.totals.credits);
    expect(r.body.ledgers.map((l: { accountId: string }) => l.accountId).sort()).toEqual([small.accountId, big.accountId].sort());
    for (const ledger of r.body.ledgers) {
      expect(ledger.accounts.map((a: { account: string }) => a.account)).toEqual([...LEDGER_ACCOUNTS]);
      expect(ledger.debits).toBe(ledger.credits);
      expect(ledger.accounts.reduce((s: number, a: { balance: string }) => s + toKopecks(a.balance), 0)).toBe(0);
      // Each account's balance is the ledger's balance rebuilt as of the instant.
      const balance = await get(`/admin/v1/accounts/${ledger.accountId}/balance?mode=${ledger.mode}&asOf=${asOf}`);
      const byAccount = Object.fromEntries(ledger.accounts.map((a: { account: string; balance: string }) => [a.account, a.balance]));
      expect(byAccount).toEqual({ available: balance.body.available, pending: balance.body.pending, reserved: balance.body.reserved, ...balance.body.system });
    }
    // The same figures as the ledger read model (its entries up to the instant).
    const readModel = await trialBalanceFromReadModel(db.pool, new Date(asOf));
    expect(r.body.ledgers.map((l: { accountId: string; entries: number; debits: string }) => [l.accountId, l.entries, toKopecks(l.debits)])).toEqual(
      readModel.ledgers.map((l) => [l.accountId, l.entries, l.debits]),
    );

    const csv = await get(`/admin/v1/audit/trial-balance?asOf=${asOf}&format=csv`);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toBe('attachment; filename="trial-balance-20250503T000000Z.csv"');
    // An instant with milliseconds keeps them in the name: two reports never share one.
    const withMilliseconds = await get(`/admin/v1/audit/trial-balance?asOf=2025-05-03T00:00:00.009Z&format=csv`);
    expect(withMilliseconds.headers.get('content-disposition')).toBe('attachment; filename="trial-balance-20250503T000000.009Z.csv"');
    const lines = csv.text.split('\r\n').filter((l) => l !== '');
    expect(lines[0]).toBe('account_id,mode,account,debits,credits,balance');
    expect(lines).toHaveLength(1 + 2 * (LEDGER_ACCOUNTS.length + 1) + 1);
    expect(lines[lines.length - 1]).toBe(`,,total,${r.body.totals.debits},${r.body.totals.credits},0.00`);

    // Before any entry: no ledger. Bad asOf: 400.
    expect((await get('/admin/v1/audit/trial-balance?asOf=2024-01-01T00:00:00Z')).body).toMatchObject({ ledgers: [], balanced: true, totals: { entries: 0 } });
    // An instant still to come: its figures are not known yet.
    expect((await get('/admin/v1/audit/trial-balance?asOf=2100-01-01T00:00:00Z')).body.error).toMatchObject({
      code: 'validation',
      param: 'asOf',
      details: [{ param: 'asOf', code: 'in_future', message: 'asOf: момент ещё не наступил: баланс даётся только на прошедший момент' }],
    });
    const bad = await get('/admin/v1/audit/trial-balance?asOf=2025-13-01T00:00:00Z');
    expect({ status: bad.status, code: bad.body.error.code, param: bad.body.error.param }).toEqual({ status: 400, code: 'validation', param: 'asOf' });
  });

  it('the trial balance is folded from the log: a read model that lost an entry does not change it', async () => {
    const before = (await get('/admin/v1/audit/trial-balance?asOf=2025-03-03T00:00:00Z')).body;
    const fromReadModel = await trialBalanceFromReadModel(db.pool, new Date('2025-03-03T00:00:00Z'));
    expect(fromReadModel.entries).toBe(before.totals.entries);
    await db.pool.query('DELETE FROM ledger_entries WHERE entry_id = $1', [ledgerEntryId(small, 'payment:inv-2')]);
    expect((await trialBalanceFromReadModel(db.pool, new Date('2025-03-03T00:00:00Z'))).entries).toBe(before.totals.entries - 1);
    expect((await get('/admin/v1/audit/trial-balance?asOf=2025-03-03T00:00:00Z')).body).toEqual(before);
  });
});
