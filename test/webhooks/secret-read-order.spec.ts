/**
 * Reads of the webhook secret's rotation value (the dispatcher's look, a claim, a renewal)
 * go out on several connections and reach the server in any order: which one is in force
 * must follow the server's order of snapshots, not the order they were asked or answered
 * in. Here the database is a stand-in that answers each statement when the test says (a
 * real server cannot be made to take two snapshots in a chosen order): a renewal asked
 * after the look, but whose snapshot came before a change of the secret, answers last with
 * the old value. Values are `<server>:<row version>:<counter>`, read at a snapshot's xmax.
 */
import type { Pool } from 'pg';
import type { Registry } from '#payments/merchants';
import { AttemptResult, WebhookDispatcher, WebhookPoster, webhookSignature } from '#payments/webhooks';
import type { Clock } from '#platform/clock';

interface Held {
  answer(value: unknown): void;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await turn();
};

/** A dispatcher on the stand-in database: one slot, a lease so short that a delivery that waited at all is renewed before it is sent. */
function harness() {
  const asked: { claim: Held[]; look: Held[]; renew: Held[] } = { claim: [], look: [], renew: [] };
  const statement = (kind: keyof typeof asked) =>
    new Promise((resolve) => {
      asked[kind].push({ answer: resolve });
    });
  const pool = {
    query(q: string | { text: string; values?: unknown[] }, values?: unknown[]) {
      const text = typeof q === 'string' ? q : q.text;
      const vals = (typeof q === 'string' ? values : q.values) ?? [];
      if (text.includes('claimed AS')) return statement('claim');
      if (text.includes('WITH renewed AS')) return statement('renew');
      if (text.includes('AS read_at')) return statement('look');
      // The records of attempts: each attempt's row is its own.
      if (text.includes('WITH attempt AS MATERIALIZED'))
        return Promise.resolve({ rows: (vals[0] as unknown[]).map((_, i) => ({ ord: String(i + 1), ours: true })) });
      return Promise.resolve({ rows: [] });
    },
  } as unknown as Pool;
  const sent: { id: string; secret: string }[] = [];
  const replies: ((result: AttemptResult) => void)[] = [];
  const client: WebhookPoster = {
    post(_url, body, headers) {
      const secret = ['old', 'new'].find((s) => headers['x-service-signature'] === webhookSignature(body, s)) ?? 'other';
      sent.push({ id: (JSON.parse(body) as { id: string }).id, secret });
      return new Promise((resolve) => replies.push(resolve));
    },
    close: async () => undefined,
  };
  const registry = { openWebhookSecret: (_project: string, sealed: string) => sealed } as unknown as Registry;
  const clock = { now: () => new Date() } as unknown as Clock;
  const dispatcher = new WebhookDispatcher(pool, registry, clock, {
    concurrency: 1,
    perUrlConcurrency: 1,
    prefetchPerUrl: 8,
    client,
    allowPrivateNetworks: false,
    leaseSeconds: 2,
    timeoutMs: 1500,
    recordGatherMs: 0,
  });
  const row = (id: string, generation: string, readAt: string) => ({
    id,
    event_id: `e-${id}`,
    event_type: 'invoice.paid',
    project_id: 'p',
    url: 'https://shop.example/hooks',
    body: JSON.stringify({ id }),
    is_test: true,
    lease_token: `t-${id}`,
    attempts_made: 0,
    schedule_base: 0,
    webhook_secret: 'old',
    secret_generation: generation,
    secret_read_at: readAt,
  });
  return { asked, sent, replies, dispatcher, row };
}

/**
 * d1, d2, d3 claimed with the old secret (`claimed` read at 100); d1 is sent. The secret
 * changes; the next round's look is asked, d1 answers and d2 (having waited) goes to a
 * renewal asked after the look. The look answers `looked`, then the renewal answers
 * `renewedLate` with the old secret. Answers what was sent with the old secret after d1.
 */
async function lateRenewal(claimed: string, looked: [string, string], renewedLate: [string, string]) {
  const { asked, sent, replies, dispatcher, row } = harness();
  const first = dispatcher.tick();
  await turn();
  asked.claim[0]!.answer({ rows: [row('d1', claimed, '100'), row('d2', claimed, '100'), row('d3', claimed, '100')] });
  await first;
  expect(sent).toEqual([{ id: 'd1', secret: 'old' }]);
  void dispatcher.tick();
  await turn();
  expect(asked.look).toHaveLength(1);
  replies[0]!({ statusCode: 200, body: 'ok', durationMs: 1, error: null });
  await turn();
  expect(asked.renew).toHaveLength(1);
  asked.look[0]!.answer({ rows: [{ generation: looked[0], read_at: looked[1] }] });
  await turn();
  asked.renew[0]!.answer({ rows: [{ id: 'd2', webhook_secret: 'old', secret_generation: renewedLate[0], secret_read_at: renewedLate[1] }] });
  await turns(5);
  const oldAfterD1 = sent.slice(1).filter((s) => s.secret === 'old');
  // Renewed again (what a later read answers), d2 goes with the new secret.
  if (asked.renew.length === 2) {
    asked.renew[1]!.answer({ rows: [{ id: 'd2', webhook_secret: 'new', secret_generation: looked[0], secret_read_at: '300' }] });
    await turns(5);
  }
  return { oldAfterD1, sent };
}

it.each([
  ['a renewal that read before a rotation, answering after a look that read after it', 'S:a:1', ['S:b:2', '200'], ['S:a:1', '150']],
  ['one that read before the counter was set back and raised again (a higher counter, but an earlier snapshot)', 'S:a:5', ['S:c:1', '130'], ['S:a:5', '110']],
] as [string, string, [string, string], [string, string]][])('%s does not put the old secret back in force', async (_what, claimed, looked, renewedLate) => {
  const { oldAfterD1, sent } = await lateRenewal(claimed, looked, renewedLate);
  expect(oldAfterD1).toEqual([]);
  expect(sent).toEqual([
    { id: 'd1', secret: 'old' },
    { id: 'd2', secret: 'new' },
  ]);
});
