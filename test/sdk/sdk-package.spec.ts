/**
 * The SDK as a package: its types are what openapi-typescript makes of the served
 * document now (a change to the document without `npm run sdk:types` fails here), `npm
 * pack` lists the built files and nothing else, and the built code needs nothing but
 * Node's own modules. Then examples/merchant-integration run as docs/sdk.md tells a
 * merchant to: the gateway as `WEBHOOK_ALLOW_PRIVATE_NETWORKS=true npm start` starts it
 * (the embedded server, its real clock, the operator token it prints), then
 * `ADMIN_TOKEN=<the printed token> npm run example`, each step printed. One file: `npm
 * run sdk:pack` and `npm run example` each build libs/sdk/dist again, in place, which a
 * file running beside them would read half written.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CreatePayoutRequest, Event, WebhookEvent } from '../../libs/sdk/src';
import { OPENAPI_DOCUMENT } from '../../apps/api/src/docs/openapi-document';
import { RunningGateway, startGateway, temporaryDataDir } from '../support/gateway-process';

const ROOT = path.resolve(__dirname, '../..');
const SDK = path.join(ROOT, 'libs/sdk');

describe('the SDK package (libs/sdk)', () => {
  it('the committed types equal what npm run sdk:types generates from GET /v1/openapi.json now', () => {
    // The compiled script (the jest set-up built dist/), as `npm run sdk:types` runs it.
    const run = spawnSync(process.execPath, ['dist/scripts/sdk-types.js', '--print'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    expect(run.status).toBe(0);
    const generated = run.stdout;
    expect(generated).toContain('export interface components');
    expect(generated).toContain('createInvoice: {');
    // toBe, not a diff of 2,000 lines: the message says what to do.
    const committed = readFileSync(path.join(SDK, 'src/generated/openapi.ts'), 'utf8');
    if (committed !== generated) throw new Error('libs/sdk/src/generated/openapi.ts is out of date: run `npm run sdk:types` and commit it');
    expect(committed).toBe(generated);
  });

  it('request bodies are typed from the document: a payout body with a misspelt field or without its amount does not compile', () => {
    // The checks are the @ts-expect-error lines: `npm test` type-checks this file first (a body typed `unknown` fails there).
    const payoutBody = (body: CreatePayoutRequest) => body;
    // @ts-expect-error amout is not a field
    payoutBody({ amout: '100.00', addressId: 1 });
    // @ts-expect-error amount is required
    payoutBody({ addressId: 1 });
    expect(payoutBody({ amount: '100.00', method: 'sbp', account: '+79161234567' })).toEqual({ amount: '100.00', method: 'sbp', account: '+79161234567' });
  });

  it("an event of the list is typed as the webhook body it carries: docs/sdk.md's recovery loop hands it to a webhook handler", () => {
    // Type-checked by `npm test` first: with `data` typed as any object, handle(event) did not compile.
    const handled: unknown[] = [];
    const handle = (event: WebhookEvent) => {
      switch (event.type) {
        case 'payout.paid':
        case 'payout.rejected':
          return handled.push(event.data.payout.id);
        case 'refund.succeeded':
        case 'refund.failed':
          return handled.push(event.data.refund.id);
        default:
          return handled.push(event.data.invoice.id);
      }
    };
    const listed = JSON.parse(
      '{"id":"evt_1","type":"payout.paid","createdAt":"2026-11-29T00:00:00Z","isTest":false,"deliveryStatus":"failing","data":{"payout":{"id":7}}}',
    ) as Event;
    handle(listed);
    if (listed.type === 'payout.paid') expect(listed.data.payout.status).toBeUndefined();
    expect(handled).toEqual([7]);
  });

  it('npm pack lists the built files (dist: JavaScript and declarations), package.json and README, no sources', () => {
    // The jest set-up built libs/sdk/dist; --ignore-scripts: no second build here.
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const result = spawnSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: SDK, encoding: 'utf8' });
    expect(result.status).toBe(0);
    const [pack] = JSON.parse(result.stdout) as [{ name: string; files: { path: string }[] }];
    expect(pack.name).toBe('@payment-gateway/sdk');
    const files = pack.files.map((f) => f.path).sort();
    for (const file of [
      'package.json',
      'README.md',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/client.js',
      'dist/client.d.ts',
      'dist/webhooks.js',
      'dist/webhooks.d.ts',
      'dist/errors.js',
      'dist/generated/openapi.d.ts',
    ]) {
      expect(files).toContain(file);
    }
    expect(files.filter((f) => f.startsWith('src/') || (f.endsWith('.ts') && !f.endsWith('.d.ts')))).toEqual([]);
  });

  it("docs/sdk.md's method table names every operation of the document, each with a method of the client", () => {
    const operations = Object.values(OPENAPI_DOCUMENT.paths).flatMap((item) =>
      Object.values(item as Record<string, { operationId?: string }>).flatMap((op) => (typeof op === 'object' && op?.operationId ? [op.operationId] : [])),
    );
    const doc = readFileSync(path.join(ROOT, 'docs/sdk.md'), 'utf8');
    const table = doc.slice(doc.indexOf('| Method | Operation |'));
    const named = new Set([...table.slice(0, table.indexOf('\n\n')).matchAll(/`(\w+)\(/g)].map((m) => m[1]!));
    const client = readFileSync(path.join(SDK, 'src/client.ts'), 'utf8');
    expect(operations.length).toBeGreaterThan(10);
    expect(operations.filter((id) => !named.has(id) || !new RegExp(`^  (async )?${id}\\(`, 'm').test(client))).toEqual([]);
  });

  it("docs/sdk.md names the tarball that sdk:pack makes now (the package's version)", () => {
    const { version } = JSON.parse(readFileSync(path.join(SDK, 'package.json'), 'utf8')) as { version: string };
    const named = [...readFileSync(path.join(ROOT, 'docs/sdk.md'), 'utf8').matchAll(/payment-gateway-sdk-[^\s)`]*\.tgz/g)].map((m) => m[0]);
    expect(named.length).toBeGreaterThan(0);
    expect(new Set(named)).toEqual(new Set([`payment-gateway-sdk-${version}.tgz`]));
  });

  it('installs from the tarball `npm run sdk:pack` makes into an empty project, as docs/sdk.md says, and loads there with plain Node', () => {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const { version } = JSON.parse(readFileSync(path.join(SDK, 'package.json'), 'utf8')) as { version: string };
    const tarball = path.join(SDK, `payment-gateway-sdk-${version}.tgz`);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sdk-consumer-'));
    try {
      const packed = spawnSync(npm, ['run', '--silent', 'sdk:pack'], { cwd: ROOT, encoding: 'utf8' });
      expect({ status: packed.status, stderr: packed.status === 0 ? '' : packed.stderr }).toEqual({ status: 0, stderr: '' });
      expect(existsSync(tarball)).toBe(true);
      writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'merchant-shop', version: '1.0.0', private: true }));
      // --offline: the package has no dependency to fetch, and the run must not depend on the registry; --no-audit, --no-fund: no notices.
      const installed = spawnSync(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: dir, encoding: 'utf8' });
      expect({ status: installed.status, stderr: installed.status === 0 ? '' : installed.stderr }).toEqual({ status: 0, stderr: '' });
      const script = [
        "const sdk = require('@payment-gateway/sdk');",
        "const client = new sdk.PaymentGatewayClient({ baseUrl: 'http://127.0.0.1:1/v1', auth: { secretKey: 'sk_test_x' } });",
        'console.log(JSON.stringify([typeof client.createInvoice, typeof client.iterateInvoices, typeof sdk.verifyWebhook, sdk.MAX_RETRIES]));',
      ].join('\n');
      const run = spawnSync(process.execPath, ['-e', script], { cwd: dir, encoding: 'utf8' });
      expect(run.stderr).toBe('');
      expect(JSON.parse(run.stdout)).toEqual(['function', 'function', 'function', 4]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(tarball, { force: true });
    }
  });

  it('compiles for a consumer with exactOptionalPropertyTypes (tsc --init): every option and query parameter takes undefined as not given', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sdk-exact-'));
    try {
      const consumer = [
        `import { PaymentGatewayClient, PaymentGatewayConnectionError, retryDelayMs, verifyStatement, verifyWebhook } from ${JSON.stringify(path.join(SDK, 'dist/index.js'))};`,
        'declare const text: string | undefined;',
        'declare const count: number | undefined;',
        'declare const signal: AbortSignal | undefined;',
        // The tsconfig below is in effect: an explicit undefined for a property declared without it does not compile.
        '// @ts-expect-error exactOptionalPropertyTypes',
        'export const exact: { a?: string } = { a: text };',
        'const options = { maxRetries: count, timeoutMs: count, fetch: undefined, sleep: undefined, now: undefined, clockOffsetSeconds: count };',
        "const client = new PaymentGatewayClient({ baseUrl: 'http://127.0.0.1:1/v1', auth: { secretKey: 'sk_test_x' }, ...options, newIdempotencyKey: undefined });",
        'export const calls = [',
        "  client.refundInvoice('id', {}, { idempotencyKey: text, signal }),",
        '  client.getBalance({ signal }),',
        '  client.listInvoices({ limit: count, cursor: text }),',
        '  client.listPayouts({ cursor: text }),',
        '  client.listEvents({ cursor: text }),',
        '  client.listBalanceTransactions({ cursor: text, payoutId: count }),',
        "  client.getStatement({ from: '2026-01-01T00:00:00Z', to: '2026-02-01T00:00:00Z' }),",
        '];',
        "export const event = verifyWebhook('{}', {}, 'whsec_x', { toleranceSeconds: count, requireTimestamp: undefined, now: undefined });",
        "export const lost = new PaymentGatewayConnectionError('m', 'GET /balance', 1, { idempotencyKey: text, outcomeUnknown: undefined });",
        "export const delay = retryDelayMs({ kind: 'answer', status: 503, code: text, retryAfterSeconds: count }, { retriesSoFar: 0, maxRetries: 4, repeatable: true });",
        "export const verified = verifyStatement('{}', [{ kid: 'k', alg: 'Ed25519', publicKey: 'p', validFrom: text }]);",
      ];
      writeFileSync(path.join(dir, 'consumer.ts'), `${consumer.join('\n')}\n`);
      // What `tsc --init` (TypeScript 6) writes that bears on types, with the declarations checked too (skipLibCheck off).
      const compilerOptions = {
        strict: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        skipLibCheck: false,
        noEmit: true,
        target: 'ES2022',
        module: 'node20',
        typeRoots: [path.join(ROOT, 'node_modules/@types')],
        types: ['node'],
      };
      writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['consumer.ts'] }));
      const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', '.'], { cwd: dir, encoding: 'utf8' });
      expect({ status: tsc.status, output: tsc.stdout + tsc.stderr }).toEqual({ status: 0, output: '' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has no runtime dependency: the built code requires only node: modules and its own files', () => {
    const manifest = JSON.parse(readFileSync(path.join(SDK, 'package.json'), 'utf8'));
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.private).toBe(false);
    expect([manifest.main, manifest.types]).toEqual(['dist/index.js', 'dist/index.d.ts']);
    const required = new Set<string>();
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(file);
        else if (entry.name.endsWith('.js')) for (const m of readFileSync(file, 'utf8').matchAll(/require\("([^"]+)"\)/g)) required.add(m[1]!);
      }
    };
    walk(path.join(SDK, 'dist'));
    expect([...required].filter((m) => !m.startsWith('node:') && !m.startsWith('./'))).toEqual([]);
    expect(required).toContain('node:crypto');
  });
});

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
