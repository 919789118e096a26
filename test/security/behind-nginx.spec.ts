/**
 * The gateway behind deploy/nginx.conf as docs/operations.md deploys it (nginx in
 * TRUSTED_PROXIES): what the API learns from the proxy's headers about where a request
 * was sent (Host, with its port) and how (the proxy's scheme, not the client's
 * X-Forwarded-Proto) decides which pages are the gateway itself (docs/security.md,
 * "Cross-site requests") and whether the console's cookie is Secure (docs/console.md).
 *
 * Debian's nginx runs the documented file with only its addresses substituted (as `npm
 * run deploy:check` runs it).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findNginx, renderNginxConf, RunningNginx, startNginx } from '../../scripts/deploy-check/nginx';
import { freePort } from '../../scripts/deploy-check/processes';
import { ROOT, RunningGateway, startGateway } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const nginx = findNginx();
const ADMIN_TOKEN = 'operator-token-for-behind-nginx-tests-01';

describe('the gateway behind deploy/nginx.conf', () => {
  if (!nginx) {
    console.warn('behind-nginx test skipped: nginx is not installed (Debian: apt-get install -y nginx; .ci/run installs it)');
    it.skip('forwards where and how a request was sent (nginx is not installed)', () => undefined);
    return;
  }

  let db: TestDatabase;
  let gateway: RunningGateway;
  let dir: string;
  let running: RunningNginx;
  /** nginx's address: the gateway's origin as a browser sees it. */
  let base: string;
  let testKey: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    gateway = await startGateway('gateway', {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      // Behind the proxy, as documented: nginx (127.0.0.1 here) is trusted for X-Forwarded-*.
      TRUSTED_PROXIES: '127.0.0.1',
      // Reads one invoice twice in a row to see what was recorded; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
    });
    dir = mkdtempSync(path.join(os.tmpdir(), 'behind-nginx-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const rendered = renderNginxConf(readFileSync(path.join(ROOT, 'deploy/nginx.conf'), 'utf8'), {
      listen: `127.0.0.1:${port}`,
      upstreams: [new URL(gateway.baseUrl).host],
    });
    running = startNginx(nginx, dir, rendered);
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${base}/health/live`)).status === 200) break;
      } catch (error) {
        if (i > 100) throw error;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const account = await json('POST', '/admin/v1/accounts', { name: 'Кофейня', email: 'coffee@example.com' }, ADMIN_TOKEN);
    const project = await json('POST', '/admin/v1/projects', { accountId: account.body.id, name: 'Кофейня онлайн' }, ADMIN_TOKEN);
    expect([account.status, project.status]).toEqual([201, 201]);
    testKey = project.body.keys.test.secretKey;
  });
  afterAll(async () => {
    await running?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await gateway?.kill();
    await db?.drop();
  });

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function json(method: string, path: string, body: unknown, authorization: string): Promise<{ status: number; body: any }> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${authorization}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  }

  async function submit(path: string, form: Record<string, string>, headers: Record<string, string>): Promise<number> {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form).toString(),
    });
    await response.text();
    return response.status;
  }

  it("a payment-page form from the same host on another port or under the other scheme is another site's: 403, nothing recorded", async () => {
    const created = await json('POST', '/v1/invoices', { amount: '100.00', orderId: `nginx-${randomUUID()}` }, testKey);
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const elsewhere = ['http://127.0.0.1', 'https://127.0.0.1', base.replace('http:', 'https:')];
    for (const origin of elsewhere) {
      expect({ origin, status: await submit(`/pay/${id}/method`, { method: 'sbp' }, { origin }) }).toEqual({ origin, status: 403 });
      expect({ origin, status: await submit(`/pay/${id}/sandbox`, { outcome: 'paid' }, { referer: `${origin}/evil.html` }) }).toEqual({ origin, status: 403 });
    }
    const untouched = await json('GET', `/v1/invoices/${id}`, undefined, testKey);
    expect([untouched.body.status, untouched.body.method]).toEqual(['created', null]);
    // The gateway's own origin, as the browser sent it to nginx, is accepted.
    expect(await submit(`/pay/${id}/method`, { method: 'card' }, { origin: base })).toBe(303);
    expect((await json('GET', `/v1/invoices/${id}`, undefined, testKey)).body.method).toBe('card');
  });

  it("a client's own X-Forwarded-Proto: https over plain http does not make the console's session cookie Secure", async () => {
    for (const headers of [{}, { 'x-forwarded-proto': 'https' }] as Record<string, string>[]) {
      const login = await fetch(`${base}/admin/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams({ token: ADMIN_TOKEN }).toString(),
      });
      await login.text();
      expect(login.status).toBe(303);
      const attributes = login.headers
        .get('set-cookie')!
        .split(';')
        .map((a) => a.trim());
      expect({ headers, attributes }).toEqual({ headers, attributes: expect.arrayContaining(['HttpOnly', 'SameSite=Strict']) });
      expect({ headers, attributes }).toEqual({ headers, attributes: expect.not.arrayContaining(['Secure']) });
    }
  });
});
