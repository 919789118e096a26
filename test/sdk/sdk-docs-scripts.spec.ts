/**
 * The two scripts of docs/sdk.md ("Recovery and reconciliation"), read from the page
 * and run with the SDK against a started gateway, so the docs cannot drift: a receiver
 * that was down recovers every event it missed; every paid payout reconciles with its
 * balance transactions. Also: errors carry the request id.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expectStatus, InvoiceGateway, Merchant, orderId, poll } from '../support/merchant-fixtures';
import { fund, payoutAddress, PHONE, transition } from '../support/money-out-fixtures';
import { hookedGateway, WebhookReceiver } from '../support/webhook-receiver';
import { PaymentGatewayClient, PaymentGatewayError } from '../../libs/sdk/src';

const SDK_DOC = readFileSync(path.join(__dirname, '../../docs/sdk.md'), 'utf8');
/** The script of docs/sdk.md fenced as ```js <name>, as an async function of the names it uses. */
function script(name: string, ...params: string[]): (...args: unknown[]) => Promise<void> {
  const code = new RegExp(`\`\`\`js ${name}\\n([\\s\\S]*?)\`\`\``).exec(SDK_DOC)?.[1];
  if (code === undefined) throw new Error(`docs/sdk.md has no \`\`\`js ${name} block`);
  const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor as new (...args: string[]) => (...args: unknown[]) => Promise<void>;
  return new AsyncFunction(...params, code);
}

describe('the scripts of docs/sdk.md', () => {
  let gw: InvoiceGateway;
  let receiver: WebhookReceiver;
  let shop: Merchant;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ gw, receiver, shop, close } = await hookedGateway({ holdHours: 0 }));
  });
  afterAll(() => close?.());
  const client = (m: Merchant, mode: 'test' | 'live') =>
    new PaymentGatewayClient({ baseUrl: `${gw.baseUrl}/v1`, auth: { secretKey: m.keys[mode].secretKey }, sleep: async () => undefined });

  it('the recovery loop handles every event the receiver missed', async () => {
    receiver.answer = () => ({ status: 503, body: 'down' });
    for (let i = 0; i < 3; i++) {
      const created = await shop.test.post('/v1/invoices', { amount: '150.00', orderId: orderId('docs'), method: 'sbp' });
      expectStatus(created, 201);
      expectStatus(await gw.operator.payment(created.body.id, 'paid'), 200);
    }
    await receiver.waitFor((r) => r.length === 3, 'three failed attempts');
    await poll(
      async () => (await client(shop, 'test').listEvents({ deliveryStatus: 'failing' })).items.length,
      (n) => n === 3,
      'three failing events',
    );
    const handled: string[] = [];
    await script('recovery', 'client', 'handle')(client(shop, 'test'), async (event: { id: string }) => handled.push(event.id));
    expect(handled.sort()).toEqual(receiver.received.map((w) => w.body.id).sort());
  });

  it('the reconciliation script finds every paid payout matching its balance transactions', async () => {
    await fund(gw.operator, shop, 'live', ['1000.00', '800.00']);
    const address = await payoutAddress(gw.operator, shop.accountId, { method: 'sbp', account: PHONE });
    const sdk = client(shop, 'live');
    const paid = [];
    for (const amount of ['300.00', '250.00']) {
      const payout = await sdk.createPayout({ amount, addressId: address.id, orderId: orderId('docs') });
      for (const t of ['approve', 'process', 'pay']) expectStatus(await transition(gw.operator, payout.id, t), 200);
      paid.push(payout.id);
    }
    const rejected = await sdk.createPayout({ amount: '120.00', addressId: address.id, orderId: orderId('docs') });
    expectStatus(await transition(gw.operator, rejected.id, 'reject', { reason: 'отказ' }), 200);
    await poll(
      async () => (await sdk.listBalanceTransactions({ type: 'payout_paid' })).items.length,
      (n) => n === 2,
      'both payouts paid in the ledger',
    );
    const mismatches: unknown[] = [];
    const seen: number[] = [];
    const counting = { ...sdk, iteratePayouts: sdk.iteratePayouts.bind(sdk), iterateBalanceTransactions: sdk.iterateBalanceTransactions.bind(sdk) };
    const iterate = counting.iterateBalanceTransactions;
    counting.iterateBalanceTransactions = (query) => (seen.push(query!.payoutId!), iterate(query));
    await script('reconciliation', 'client', 'mismatch')(counting, (...args: unknown[]) => mismatches.push(args));
    expect(mismatches).toEqual([]);
    expect(seen.sort()).toEqual(paid.sort());
    // Not reconciled: a payout whose transactions were not what it paid is reported.
    const broken = { ...counting, iterateBalanceTransactions: async function* () {} };
    await script('reconciliation', 'client', 'mismatch')(broken, (...args: unknown[]) => mismatches.push(args));
    expect(mismatches).toHaveLength(2);
  });

  it("a gateway error carries the answer's request id", async () => {
    const failed = await client(shop, 'test')
      .getEvent('00000000-0000-4000-8000-000000000000')
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(PaymentGatewayError);
    expect((failed as PaymentGatewayError).code).toBe('not_found');
    expect((failed as PaymentGatewayError).requestId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
