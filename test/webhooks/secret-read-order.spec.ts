/**
 * Reads of the webhook secret's rotation value (the dispatcher's look, a claim, a renewal)
 * go out on several connections and reach the server in any order: which one is in force
 * must follow the server's order of snapshots, not the order they were asked in. Here the
 * database is a stand-in that answers each statement when the test says (a real server
 * cannot be made to take two snapshots in a chosen order): a renewal asked after the look,
 * but whose snapshot came before a rotation, answers last with the old value.
 */
import type { Pool } from 'pg';
import type { Registry } from '#payments/merchants';
import { AttemptResult, WebhookDispatcher, WebhookPoster, webhookSignature } from '#payments/webhooks';
import type { Clock } from '#platform/clock';

interface Held<T> {
  readonly values: unknown[];
  answer(value: T): void;
}

function held<T>(values: unknown[]): Held<T> & { readonly promise: Promise<T> } {
  let answer!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (answer = resolve));
  return { values, answer, promise };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

it('a renewal that read before a rotation, answering after a look that read after it, does not put the old secret back in force', async () => {
  const asked: { claim: Held<unknown>[]; look: Held<unknown>[]; renew: Held<unknown>[] } = { claim: [], look: [], renew: [] };
  const statement = (kind: keyof typeof asked, values: unknown[]) => {
    const h = held<unknown>(values);
    asked[kind].push(h);
    return h.promise;
  };
  const pool = {
    query(q: string | { text: string; values?: unknown[] }, values?: unknown[]) {
      const text = typeof q === 'string' ? q : q.text;
      const vals = (typeof q === 'string' ? values : q.values) ?? [];
      if (text.includes('claimed AS')) return statement('claim', vals);
      if (text.includes('WITH renewed AS')) return statement('renew', vals);
      if (/^\s*SELECT \(\(extract/.test(text)) return statement('look', vals);
      // The records of attempts: each attempt's row is its own.
      if (text.includes('WITH attempt AS MATERIALIZED'))
        return Promise.resolve({ rows: (vals[0] as unknown[]).map((_, i) => ({ ord: String(i + 1), ours: true })) });
      return Promise.resolve({ rows: [] });
    },
  } as unknown as Pool;
  const sent: { id: string; secret: 'old' | 'new' | 'other' }[] = [];
  const replies: ((result: AttemptResult) => void)[] = [];
  const client: WebhookPoster = {
    post(_url, body, headers) {
      const signature = headers['x-service-signature'];
      const secret = signature === webhookSignature(body, 'old') ? 'old' : signature === webhookSignature(body, 'new') ? 'new' : 'other';
      sent.push({ id: (JSON.parse(body) as { id: string }).id, secret });
      return new Promise((resolve) => replies.push(resolve));
    },
    close: async () => undefined,
  };
  const registry = { openWebhookSecret: (_project: string, sealed: string) => sealed } as unknown as Registry;
  const clock = { now: () => new Date() } as unknown as Clock;
  // One slot, a lease so short that a delivery that waited at all is renewed before it is sent.
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
  const row = (id: string) => ({
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
    secret_generation: 'S:1',
    secret_read_at: '100',
  });

  const first = dispatcher.tick();
  await turn();
  asked.claim[0]!.answer({ rows: [row('d1'), row('d2'), row('d3')] });
  await first;
  expect(sent).toEqual([{ id: 'd1', secret: 'old' }]);

  // The secret is rotated. The next round's look is asked; then d1 answers and d2, having
  // waited, goes to a renewal, asked after the look.
  const second = dispatcher.tick();
  await turn();
  expect(asked.look).toHaveLength(1);
  replies[0]!({ statusCode: 200, body: 'ok', durationMs: 1, error: null });
  await turn();
  expect(asked.renew).toHaveLength(1);
  // The look's snapshot came after the rotation; the renewal's before it, and it answers last.
  asked.look[0]!.answer({ rows: [{ generation: 'S:2', read_at: '200' }] });
  await turn();
  asked.renew[0]!.answer({ rows: [{ id: 'd2', webhook_secret: 'old', secret_generation: 'S:1', secret_read_at: '150' }] });
  for (let i = 0; i < 5; i++) await turn();

  // d2 is not sent with the old secret: it is renewed again, and sent with the new one.
  expect(sent.filter((s) => s.secret === 'old').map((s) => s.id)).toEqual(['d1']);
  expect(asked.renew).toHaveLength(2);
  asked.renew[1]!.answer({ rows: [{ id: 'd2', webhook_secret: 'new', secret_generation: 'S:2', secret_read_at: '220' }] });
  for (let i = 0; i < 5; i++) await turn();
  expect(sent).toEqual([
    { id: 'd1', secret: 'old' },
    { id: 'd2', secret: 'new' },
  ]);
  void second;
});
