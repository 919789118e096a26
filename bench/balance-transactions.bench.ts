import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Client as PgClient } from 'pg';
import { Client as HttpClient } from 'undici';
import type { BenchContext, BenchSection } from './run';
import { call, ChildServer, expectStatus, median, ownDatabase, startServer } from './http.bench';
import { percentiles, sleep, startTimer } from './stats';
import { fixed, integer, SummaryRow, Table } from './table';

/**
 * Issue 36's last proof: GET /v1/balance/transactions on a merchant with 1,000,000
 * ledger entries answers its first page in under 50 ms at p99.
 *
 * The gateway runs as docker-compose runs it (dist/apps/api/src/main.js and
 * dist/apps/projector/src/main.js, default settings) on a database of this section's
 * own. One account is created through the operator API, with PROJECTS projects on it:
 * each project has its own live key, and all of them read the same ledger (a ledger is
 * one account in one mode). Then its live ledger gets `entries` journal entries written
 * straight into the ledger read model, checked against the ledger's rules, and ANALYZE.
 *
 * Why writing the read model is equivalent here: the route reads nothing but the read
 * model (ledger_entries and ledger_postings, through the (account_id, mode, seq) key,
 * the kind and cause indexes and the postings' primary key: ListBalanceTransactionsHandler),
 * after the key's lookup. The rows have the shape the ledger projection writes
 * (ledger.read-model.ts): an entry per LedgerEntryPosted with seq = its stream
 * revision, the postings in the order the decider makes them (ledger.ts), each merchant
 * bucket's posting carrying that bucket's balance after it, a held payment the end of
 * its hold, and ledger_balances and ledger_open_holds to match. Posting a million
 * entries through the log would take hours here (the ledger section's ~9 ms per command)
 * and end in the same tables.
 *
 * The history, in blocks of 12 entries, 30 s apart (a year for 1,000,000): five
 * payments (three held, released three or four entries later), a refund reserved and
 * settled (every fifth released), a payout reserved and paid (every tenth returned).
 * About 1.5 balance transactions per entry.
 *
 * Requests go one at a time on one keep-alive connection (undici), the live keys in
 * turn, paced so that no key exceeds 50 of the default 60 requests/s: the
 * default limit stays on and no answer is a 429. Each measure: a warm-up, then `rounds`
 * rounds of `requests` requests; p50/p99/max per round (the whole body read), and the
 * median over the rounds.
 */
export const balanceTransactionsBench: BenchSection = {
  name: 'balance-transactions',
  description: 'GET /v1/balance/transactions first pages on a ledger of 1,000,000 entries (api + projector), p50/p99 per round',
  run,
};

interface Settings {
  readonly entries: number;
  readonly rounds: number;
  readonly requests: number;
  readonly warmup: number;
  /** A CSV of a period reads on past the period's start (occurred_at has no index; pages go by seq): fewer requests. */
  readonly csvRequests: number;
}

const FULL: Settings = { entries: 1_000_000, rounds: 5, requests: 200, warmup: 100, csvRequests: 10 };
const QUICK: Settings = { entries: 100_000, rounds: 3, requests: 50, warmup: 20, csvRequests: 5 };

/** Projects (live keys) of the one account: with the pacing below, no key goes over 50 requests/s. */
const PROJECTS = 16;
const MAX_PER_KEY_PER_SECOND = 50;
const SPACING_MS = 1000 / (PROJECTS * MAX_PER_KEY_PER_SECOND);
const STEP_SECONDS = 30;
const GOAL_P99_MS = 50;

async function run(context: BenchContext): Promise<Table[]> {
  const own = await ownDatabase(context.databaseUrl, 'bench_bt');
  try {
    return await runOn({ ...context, databaseUrl: own.url });
  } finally {
    await own.drop();
  }
}

interface Measure {
  readonly name: string;
  /** The path of the i-th request. */
  path(i: number): string;
  /** Requests per round. */
  readonly requests: number;
  readonly goal?: string;
}

interface Round {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly statusCodes: ReadonlyMap<number, number>;
}

async function runOn(context: BenchContext): Promise<Table[]> {
  const settings = context.quick ? QUICK : FULL;
  const adminToken = randomBytes(24).toString('base64url');
  const children: ChildServer[] = [];
  const db = new PgClient({ connectionString: context.databaseUrl, application_name: 'gateway-bench-balance-transactions' });
  let http: HttpClient | null = null;
  try {
    context.progress('balance-transactions: starting start:api + start:projector');
    // The default limits (60 requests/s per key among them): not lifted.
    const env = { PORT: '0', DATABASE_URL: context.databaseUrl, ADMIN_TOKEN: adminToken };
    children.push(await startServer('api', 'dist/apps/api/src/main.js', env));
    // start:projector serves no page: the address its webhooks carry is PUBLIC_URL's.
    children.push(
      await startServer('projector', 'dist/apps/projector/src/main.js', { ...env, PUBLIC_URL: 'https://pay.example.com' }, [], /running (\d+) projections/),
    );
    const api = children[0]!;
    const alive = () => {
      for (const child of children) if (child.exitCode() !== null) throw new Error(`${child.name} exited (${child.exitCode()}); output:\n${child.output()}`);
    };
    await db.connect();

    const account = await expectStatus(
      'POST /admin/v1/accounts',
      201,
      call(api.baseUrl, 'POST', '/admin/v1/accounts', adminToken, { name: 'Bench merchant', email: 'bench-bt@example.com' }),
    );
    const keys: string[] = [];
    for (let i = 0; i < PROJECTS; i++) {
      const project = await expectStatus(
        'POST /admin/v1/projects',
        201,
        call(api.baseUrl, 'POST', '/admin/v1/projects', adminToken, { accountId: account.id, name: `Bench project ${i}` }),
      );
      keys.push(`Bearer ${project.keys.live.secretKey as string}`);
    }

    context.progress(`balance-transactions: ${settings.entries} ledger entries into the read model`);
    const elapsed = startTimer();
    const seeded = await seedLedger(db, account.id as string, settings.entries);
    const seedSeconds = elapsed() / 1000;
    context.progress(`balance-transactions: seeded in ${seedSeconds.toFixed(1)} s`);
    alive();

    const client = (http = new HttpClient(api.baseUrl, { pipelining: 1 }));
    let nextKey = 0;
    let lastStart = 0;
    const get = async (path: string): Promise<{ status: number; ms: number; body: string }> => {
      const wait = lastStart + SPACING_MS - performance.now();
      if (wait > 0) await sleep(wait);
      lastStart = performance.now();
      const time = startTimer();
      const reply = await client.request({ method: 'GET', path, headers: { authorization: keys[nextKey++ % keys.length]! } });
      const body = await reply.body.text();
      return { status: reply.statusCode, ms: time(), body };
    };

    const payoutPath = (i: number) => `/v1/balance/transactions?payoutId=${seeded.payoutIds[(i * 7919) % seeded.payoutIds.length]}`;
    const lastHour = new Date(seeded.newestAt.getTime() - 3_600_000).toISOString();
    const measures: Measure[] = [
      { name: 'first page', path: () => '/v1/balance/transactions', requests: settings.requests, goal: `p99 < ${GOAL_P99_MS} ms` },
      { name: 'first page, payoutId', path: payoutPath, requests: settings.requests },
      { name: 'first page, type=payout_paid', path: () => '/v1/balance/transactions?type=payout_paid', requests: settings.requests },
      { name: 'CSV, the last hour', path: () => `/v1/balance/transactions?format=csv&from=${lastHour}`, requests: settings.csvRequests },
    ];

    // What the setup must give, checked once (a wrong setup is an error; no figure is asserted).
    const first = await get('/v1/balance/transactions');
    if (first.status !== 200) throw new Error(`GET /v1/balance/transactions: ${first.status} ${first.body.slice(0, 500)}`);
    const page = JSON.parse(first.body) as { items: unknown[]; hasMore: boolean };
    if (page.items.length !== 20 || !page.hasMore) throw new Error(`the first page has ${page.items.length} items, hasMore ${page.hasMore}`);
    const payout = JSON.parse((await get(payoutPath(0))).body) as { items: { payoutId: number }[] };
    if (payout.items.length === 0) throw new Error('a payout of the history has no balance transactions');

    const results: { measure: Measure; rounds: Round[] }[] = [];
    for (const measure of measures) {
      const warmup = Math.min(settings.warmup, measure.requests);
      context.progress(`balance-transactions: ${measure.name}: warm-up ${warmup}, ${settings.rounds} rounds of ${measure.requests}`);
      for (let i = 0; i < warmup; i++) await get(measure.path(i));
      const rounds: Round[] = [];
      for (let round = 0; round < settings.rounds; round++) {
        const latencies: number[] = [];
        const statusCodes = new Map<number, number>();
        for (let i = 0; i < measure.requests; i++) {
          const answer = await get(measure.path(round * measure.requests + i));
          statusCodes.set(answer.status, (statusCodes.get(answer.status) ?? 0) + 1);
          latencies.push(answer.ms);
        }
        const [p50, p99, max] = percentiles(latencies, [50, 99, 100]);
        rounds.push({ p50: p50!, p99: p99!, max: max!, statusCodes });
        alive();
      }
      results.push({ measure, rounds });
    }
    return tables(results, settings, seeded, seedSeconds);
  } finally {
    await http?.close().catch(() => undefined);
    await db.end().catch(() => undefined);
    for (const child of children.reverse()) {
      const code = await child.stop();
      if (code !== 0) context.progress(`balance-transactions: ${child.name} exited with ${code}; the end of its output:\n${child.output().slice(-4000)}`);
    }
  }
}

interface Seeded {
  readonly entries: number;
  readonly postings: number;
  readonly transactions: number;
  readonly newestAt: Date;
  /** Payouts spread over the history (for the payoutId filter). */
  readonly payoutIds: readonly number[];
}

/**
 * The ledger of `accountId` in live mode: `entries` entries, as the ledger projection
 * would have written them for the history described at the top (one session, in one
 * transaction), then ANALYZE. The ledger must be empty (a new account's is).
 */
async function seedLedger(db: PgClient, accountId: string, entries: number): Promise<Seeded> {
  const existing = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ledger_entries WHERE account_id = $1 AND mode = 'live'`, [accountId]);
  if (existing.rows[0]!.n !== '0') throw new Error(`the bench account's ledger is not empty (${existing.rows[0]!.n} entries)`);
  const newestAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
  // An invoice's net amount in kopecks (500.00 to 4,999.99 ₽): invoice k (0..4, A..E) of block b.
  const net = (k: string) => `(50000 + (b * 7919 + ${k} * 104729) % 450000)`;
  await db.query('BEGIN');
  try {
    // Per entry: its block b (12 entries), place j, time, kind, cause, end of hold and postings (accounts, amounts).
    await db.query(
      `CREATE TEMP TABLE bench_bt_entries ON COMMIT DROP AS
       WITH g AS (
         SELECT i AS seq, i / 12 AS b, (i % 12)::int AS j, $2::timestamptz - ($1::bigint - 1 - i) * interval '${STEP_SECONDS} seconds' AS at
         FROM generate_series(0, $1::bigint - 1) AS i
       ), a AS (
         SELECT g.*,
           -- the invoice the entry is about (A B C D E = 0..4), or null
           CASE j WHEN 0 THEN 0 WHEN 1 THEN 1 WHEN 2 THEN 2 WHEN 3 THEN 0 WHEN 4 THEN 3 WHEN 5 THEN 1 WHEN 7 THEN 3 WHEN 10 THEN 4 END AS k,
           -- a held payment's hold ends with the release this many entries later
           CASE j WHEN 0 THEN 3 WHEN 1 THEN 4 WHEN 4 THEN 3 END AS hold,
           'rf_' || substr(md5('bench-bt-refund/' || b), 1, 24) AS refund,
           'po_' || (b + 1) AS payout
         FROM g
       ), m AS (
         SELECT a.*,
           CASE WHEN k IS NOT NULL THEN ${net('k')} WHEN j IN (6, 8) THEN ${net('2')} / 4 ELSE (${net('0')} + ${net('1')}) / 2 END AS amount,
           md5('bench-bt-invoice/' || b || '/' || k)::uuid::text AS invoice
         FROM a
       )
       SELECT md5('bench-bt-entry/' || seq)::uuid AS entry_id, seq, b, j, at,
         CASE WHEN j IN (0, 1, 2, 4, 10) THEN 'payment_recorded' WHEN j IN (3, 5, 7) THEN 'hold_released' WHEN j IN (6, 9) THEN 'funds_reserved'
              WHEN (j = 8 AND b % 5 = 4) OR (j = 11 AND b % 10 = 9) THEN 'reservation_released' ELSE 'reservation_settled' END AS kind,
         CASE WHEN j IN (0, 1, 2, 4, 10) THEN 'payment:' || invoice WHEN j IN (3, 5, 7) THEN 'hold_release:' || invoice
              ELSE CASE WHEN j IN (6, 9) THEN 'reserve:' WHEN (j = 8 AND b % 5 = 4) OR (j = 11 AND b % 10 = 9) THEN 'release:' ELSE 'settle:' END
                   || CASE WHEN j IN (6, 8) THEN refund ELSE payout END END AS cause,
         -- a hold whose release is not in the history ends a week after it (the hold worker leaves it alone meanwhile)
         CASE WHEN hold IS NULL THEN NULL WHEN seq + hold < $1::bigint THEN at + hold * interval '${STEP_SECONDS} seconds' ELSE $2::timestamptz + interval '7 days' END
           AS available_at,
         amount,
         CASE WHEN j IN (0, 1, 4) THEN ARRAY['acquiring_clearing', 'pending', 'fees']
              WHEN j IN (2, 10) THEN ARRAY['acquiring_clearing', 'available', 'fees']
              WHEN j IN (3, 5, 7) THEN ARRAY['pending', 'available']
              WHEN j IN (6, 9) THEN ARRAY['available', 'reserved']
              WHEN (j = 8 AND b % 5 = 4) OR (j = 11 AND b % 10 = 9) THEN ARRAY['reserved', 'available']
              WHEN j = 8 THEN ARRAY['reserved', 'refunds_paid']
              ELSE ARRAY['reserved', 'payouts_sent', 'fees'] END AS accounts,
         CASE WHEN j IN (0, 1, 2, 4, 10) THEN ARRAY[-(amount + amount / 33), amount, amount / 33]
              WHEN j = 11 AND b % 10 <> 9 THEN ARRAY[-amount, amount - amount / 100, amount / 100]
              ELSE ARRAY[-amount, amount] END AS amounts
       FROM m`,
      [entries, newestAt],
    );
    await db.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position, available_at)
       SELECT entry_id, $1, 'live', seq, kind, cause, at, (1000 + seq) || '/' || (1000 + seq), available_at FROM bench_bt_entries ORDER BY seq`,
      [accountId],
    );
    // Each merchant bucket's posting carries the bucket's balance after it; in seq order, as the projection appends them.
    await db.query(
      `INSERT INTO ledger_postings (entry_id, ordinal, account, amount, balance_after)
       SELECT entry_id, ordinal, account, amount,
              CASE WHEN account IN ('pending', 'available', 'reserved') THEN (sum(amount) OVER (PARTITION BY account ORDER BY seq, ordinal))::bigint END
       FROM (SELECT e.entry_id, e.seq, (p.n - 1)::smallint AS ordinal, p.account, p.amount
             FROM bench_bt_entries e, unnest(e.accounts, e.amounts) WITH ORDINALITY AS p(account, amount, n)) x
       ORDER BY seq, ordinal`,
    );
    await db.query(
      `INSERT INTO ledger_balances (account_id, mode, account, balance)
       SELECT $1, 'live', p.account, sum(p.amount) FROM bench_bt_entries e, unnest(e.accounts, e.amounts) AS p(account, amount) GROUP BY p.account`,
      [accountId],
    );
    await db.query(
      `INSERT INTO ledger_open_holds (account_id, mode, invoice_id, amount, release_at)
       SELECT $1, 'live', substr(cause, 9), amount, available_at FROM bench_bt_entries WHERE kind = 'payment_recorded' AND available_at > $2`,
      [accountId, newestAt],
    );
    await db.query('COMMIT');
  } catch (error) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  await db.query('ANALYZE ledger_entries, ledger_postings, ledger_balances, ledger_open_holds');
  // The ledger's own rules, checked on what was written: every entry balances, no bucket goes below zero, each
  // bucket's last balance_after is its balance, and pending is the open holds.
  const broken = await db.query<{ problem: string }>(
    `WITH p AS (SELECT e.seq, p.* FROM ledger_entries e JOIN ledger_postings p USING (entry_id) WHERE e.account_id = $1 AND e.mode = 'live')
     SELECT 'unbalanced entry ' || seq AS problem FROM p GROUP BY seq HAVING sum(amount) <> 0
     UNION ALL SELECT 'negative ' || account || ' at ' || seq FROM p WHERE balance_after < 0
     UNION ALL SELECT 'balance of ' || b.account || ' differs' FROM ledger_balances b
       WHERE b.account_id = $1 AND b.mode = 'live' AND b.account IN ('pending', 'available', 'reserved')
         AND b.balance IS DISTINCT FROM (SELECT balance_after FROM p WHERE p.account = b.account ORDER BY seq DESC, ordinal DESC LIMIT 1)
     UNION ALL SELECT 'open holds differ from pending' FROM ledger_balances b
       WHERE b.account_id = $1 AND b.mode = 'live' AND b.account = 'pending'
         AND b.balance <> (SELECT coalesce(sum(amount), 0) FROM ledger_open_holds WHERE account_id = $1 AND mode = 'live')
     LIMIT 5`,
    [accountId],
  );
  if (broken.rows.length > 0) throw new Error(`the seeded ledger breaks the ledger's rules: ${broken.rows.map((r) => r.problem).join('; ')}`);
  const counts = await db.query<{ entries: string; postings: string; transactions: string }>(
    `SELECT count(DISTINCT e.entry_id)::text AS entries, count(*)::text AS postings,
            count(*) FILTER (WHERE p.account IN ('pending', 'available', 'reserved'))::text AS transactions
     FROM ledger_entries e JOIN ledger_postings p USING (entry_id) WHERE e.account_id = $1 AND e.mode = 'live'`,
    [accountId],
  );
  const blocks = Math.floor(entries / 12);
  const payoutIds = Array.from({ length: Math.min(1000, blocks) }, (_, i) => 1 + Math.floor((i * blocks) / Math.min(1000, blocks)));
  return {
    entries: Number(counts.rows[0]!.entries),
    postings: Number(counts.rows[0]!.postings),
    transactions: Number(counts.rows[0]!.transactions),
    newestAt,
    payoutIds,
  };
}

function tables(results: readonly { measure: Measure; rounds: readonly Round[] }[], settings: Settings, seeded: Seeded, seedSeconds: number): Table[] {
  const ms = fixed(2);
  const codes = (r: Round) =>
    [...r.statusCodes]
      .sort(([a], [b]) => a - b)
      .map(([code, n]) => `${code}:${n}`)
      .join(' ');
  const rows: (string | number)[][] = [];
  const summary: SummaryRow[] = [];
  for (const { measure, rounds } of results) {
    rounds.forEach((r, i) => rows.push([measure.name, String(i + 1), integer(measure.requests), ms(r.p50), ms(r.p99), ms(r.max), codes(r), '']));
    const p50 = median(rounds.map((r) => r.p50));
    const p99 = median(rounds.map((r) => r.p99));
    rows.push([measure.name, 'median', integer(measure.requests), ms(p50), ms(p99), ms(median(rounds.map((r) => r.max))), '', measure.goal ?? '']);
    summary.push({
      measure: `GET /v1/balance/transactions ${measure.name}, ${seeded.entries} entries`,
      figure: measure.goal ? `p99 ${ms(p99)} ms (goal < ${GOAL_P99_MS} ms)` : `p99 ${ms(p99)} ms`,
      p50: ms(p50),
      p99: ms(p99),
    });
  }
  const footnote = [
    `Notes: the client (this process), the API, the projector and PostgreSQL share this machine's ${os.cpus().length} cores.`,
    `  One live ledger of ${seeded.entries} entries (${seeded.postings} postings, ${seeded.transactions} balance transactions, ${STEP_SECONDS} s apart),`,
    `  written into the ledger read model, analyzed and checked in ${fixed(1)(seedSeconds)} s; ${PROJECTS} projects (live keys) of that one account.`,
    `  Requests one at a time on one keep-alive connection, keys in turn, at most ${MAX_PER_KEY_PER_SECOND} per key per second (the default limit is 60);`,
    `  latency to the whole body; warm-up ${settings.warmup} requests per measure; p50, p99, max per round; median over ${settings.rounds} rounds.`,
    '  First page: the default limit (20). payoutId: payouts spread over the history, in turn. CSV, the last hour: format=csv&from=<an hour',
    '  before the newest entry> (about 180 rows; a CSV has no pages, so a period is the way to ask for a few rows).',
  ];
  return [
    {
      title: `GET /v1/balance/transactions on a ledger of ${seeded.entries} entries (api + projector, sequential requests)`,
      headers: ['request', 'round', 'requests', 'p50 ms', 'p99 ms', 'max ms', 'status codes', 'goal'],
      rows,
      summary,
    },
    { title: footnote[0]!, headers: [footnote[1]!], rows: footnote.slice(2).map((line) => [line]) },
  ];
}
