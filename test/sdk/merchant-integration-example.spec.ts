/**
 * examples/merchant-integration run as docs/sdk.md tells a merchant to run it: the
 * gateway as `WEBHOOK_ALLOW_PRIVATE_NETWORKS=true npm start` starts it (the embedded
 * server, its real clock, the operator token it generates and prints), then
 * `ADMIN_TOKEN=<the printed token> npm run example` (which builds the SDK first). It must
 * exit 0 and print each step: invoice created, paid on the sandbox page, invoice.paid
 * verified, refund requested, refund.succeeded verified (after the default
 * REFUND_PROCESSING_SECONDS), the balance.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, RunningGateway, startGateway, temporaryDataDir } from '../support/gateway-process';

function npmRunExample(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '--silent', 'example'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? ROOT, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe("docs/sdk.md's example against a gateway started as the page says", () => {
  let gw: RunningGateway;
  const data = temporaryDataDir();
  beforeAll(async () => {
    const page = readFileSync(path.join(ROOT, 'docs/sdk.md'), 'utf8');
    expect(page).toContain('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true npm start');
    expect(page).toContain('ADMIN_TOKEN=<the printed operator token> npm run example');
    // DATA_DIR: a fresh folder of the test's own instead of ./data (its embedded server, its secrets key).
    gw = await startGateway('gateway', { DATA_DIR: data.dir, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  });
  afterAll(async () => {
    await gw?.kill();
    data.remove();
  });

  it('exits 0 after every step of the integration, each printed', async () => {
    // GATEWAY_URL and WEBHOOK_PORT=0: the gateway listens on a free port, and the receiver takes one, where the page's
    // defaults (3000, 4000) may be taken by another test file running beside this one.
    const result = await npmRunExample({ GATEWAY_URL: gw.baseUrl, ADMIN_TOKEN: gw.adminToken, WEBHOOK_PORT: '0' });
    if (result.code !== 0) throw new Error(`npm run example exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
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
  }, 120_000);
});
