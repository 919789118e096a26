/**
 * examples/merchant-integration runs as a merchant would run it: the compiled gateway
 * (`node dist/apps/gateway/src/main.js`, as `npm start`, webhooks to loopback allowed)
 * and the example as a child process of plain Node on the built SDK (libs/sdk/dist,
 * built by the jest set-up, as `npm run example` builds it). It must exit 0 and print
 * each step: invoice created, paid on the sandbox page, invoice.paid verified, refund
 * requested, refund.succeeded verified, the balance.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { InvoiceGateway, startInvoiceGateway } from '../support/merchant-fixtures';

const ROOT = path.resolve(__dirname, '../..');

function runExample(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['examples/merchant-integration/index.mjs'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('examples/merchant-integration against a started gateway', () => {
  let gw: InvoiceGateway;
  beforeAll(async () => {
    // CLOCK=manual: the test ticks the gateway's clock while the example runs. REFUND_PROCESSING_SECONDS=1: refunds complete within the
    // test's wait. WEBHOOK_ALLOW_PRIVATE_NETWORKS: the example's receiver listens on 127.0.0.1.
    gw = await startInvoiceGateway({ CLOCK: 'manual', REFUND_PROCESSING_SECONDS: '1', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  });
  afterAll(() => gw?.close());

  it('exits 0 after every step of the integration, each printed', async () => {
    // The sandbox refund completes REFUND_PROCESSING_SECONDS after it was asked for, on the gateway clock.
    const ticking = setInterval(() => void gw.operator.advance(1).catch(() => undefined), 500);
    let result: Awaited<ReturnType<typeof runExample>>;
    try {
      result = await runExample({ GATEWAY_URL: gw.baseUrl, ADMIN_TOKEN: gw.gateway.adminToken, WEBHOOK_PORT: '0', TIMEOUT_SECONDS: '30' });
    } finally {
      clearInterval(ticking);
    }
    if (result.code !== 0) throw new Error(`the example exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
    const lines = result.stdout.trim().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(/^0\. sandbox project [0-9a-f-]{36}, webhooks to http:\/\/127\.0\.0\.1:\d+\/webhooks$/),
      expect.stringMatching(/^1\. invoice created: [0-9a-f-]{36}, 1500\.00 RUB, the buyer pays \d+\.\d{2}, page http:\/\/\S+\/pay\/[0-9a-f-]{36}$/),
      '2. paid on the sandbox payment page',
      expect.stringMatching(/^3\. webhook invoice\.paid verified: event \S+, invoice paid, net \d+\.\d{2}$/),
      expect.stringMatching(/^4\. refund requested: rf_\S+, 500\.00 RUB, pending$/),
      '5. webhook refund.succeeded verified: refund succeeded, invoice partially_refunded',
      expect.stringMatching(/^6\. balance: available \d+\.\d{2}, pending 0\.00, reserved 0\.00 RUB$/),
      'done',
    ]);
    expect(result.stderr).toBe('');
  });
});
