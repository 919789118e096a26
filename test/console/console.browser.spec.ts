/**
 * The operator console in a real browser (Debian's Chromium through playwright-core,
 * the set-up of the payment page's browser test; never a downloaded browser): log in
 * through the form, open a merchant, see the plot, resend a webhook and see its new
 * attempt; once with JavaScript on and once with it off (the console has no script).
 * A merchant named with 255 letters and no space keeps every table inside its card (axe-core
 * finds no violation on its pages); an unclosed right-to-left override in a
 * project name reverses none of the values after it.
 * Screenshots of the login, merchants, merchant and system pages are written to
 * .tmp/console/*.png (test artifacts; docs/images/console-*.png are a copy of one run).
 */
import { createPublicKey, randomUUID, verify } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { axeViolations } from '../support/axe';
import { launchDebianChromium } from '../support/chromium';
import { ROOT, RunningGateway, startGateway } from '../support/gateway-process';
import { Merchant, Operator, api, expectStatus, poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';

const ADMIN_TOKEN = 'operator-token-for-console-browser-test-0108';
const SCREENSHOTS = path.join(ROOT, '.tmp', 'console');

describe('operator console in a real browser (Debian Chromium via playwright-core)', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let receiver: WebhookReceiver;
  let browser: Browser;
  let operator: Operator;
  let merchant: Merchant;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    receiver = await startWebhookReceiver();
    // CLOCK=manual: the console's times are moved by the test. WEBHOOK_ALLOW_PRIVATE_NETWORKS: the receiver listens on 127.0.0.1.
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN, CLOCK: 'manual', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    await operator.merchant({ name: 'Цветочный магазин', holdHours: 0 });
    const accountId = await operator.createAccount('Книжная лавка');
    merchant = await operator.merchant({ name: 'Книжная лавка — сайт', holdHours: 36, webhookUrl: receiver.url } as never, accountId);
    // A few days of payments: each held 36 hours in pending, then available.
    const amounts = ['2490.00', '990.00', '4150.50', '1200.00', '3300.00'];
    for (const [day, amount] of amounts.entries()) {
      for (let k = 0; k <= day % 2; k += 1) {
        const created = await merchant.test.post('/v1/invoices', { amount, orderId: `book-${randomUUID()}`, method: 'sbp' });
        expectStatus(created, 201);
        expectStatus(await operator.payment(created.body.id, 'paid'), 200);
      }
      await poll(
        () => operator.http.get(`/admin/v1/accounts/${accountId}/ledger?mode=test&limit=100`),
        (r) =>
          r.status === 200 &&
          r.body.items.filter((e: { kind: string }) => e.kind === 'payment_recorded').length ===
            amounts.slice(0, day + 1).reduce((n, _, i) => n + 1 + (i % 2), 0),
        'the day’s payments in the ledger',
      );
      await operator.advance(24 * 3600);
    }
    await receiver.waitFor((r) => r.some((w) => w.headers['x-service-event'] === 'invoice.paid'), 'an invoice.paid webhook');
    browser = await launchDebianChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await gateway?.kill();
    await receiver?.close();
    await db?.drop();
  });

  /** Logs in with the operator token and waits for the merchants page. */
  async function logIn(page: Page): Promise<void> {
    await page.goto(`${gateway.baseUrl}/admin/login`);
    await page.getByLabel('Токен оператора (ADMIN_TOKEN)').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Войти' }).click();
    await page.waitForURL(`${gateway.baseUrl}/admin`);
  }

  async function screenshot(page: Page, name: string, save: boolean): Promise<void> {
    if (!save) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  /** The number of attempts shown in the first invoice.paid delivery row. */
  const attemptsShown = (page: Page) => page.locator('tr.delivery', { hasText: 'invoice.paid' }).first().locator('li.attempt').count();

  it.each([
    ['with JavaScript', true],
    ['without JavaScript', false],
  ])('%s: log in, open the merchant, see the plot, resend a webhook and see the new attempt', async (_, javaScriptEnabled) => {
    const save = javaScriptEnabled;
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'ru-RU', javaScriptEnabled });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    try {
      // No session: the console sends the browser to its login form.
      await page.goto(`${gateway.baseUrl}/admin`);
      expect(new URL(page.url()).pathname).toBe('/admin/login');
      expect(await page.title()).toBe('Вход в консоль оператора');
      await screenshot(page, 'login', save);

      await page.getByLabel('Токен оператора (ADMIN_TOKEN)').fill('a wrong token');
      await page.getByRole('button', { name: 'Войти' }).click();
      await page.getByRole('alert').waitFor();
      expect(await page.getByRole('alert').textContent()).toContain('Неверный токен оператора');
      // That page's 401 is the browser's only expected complaint.
      expect(problems.splice(0)).toEqual(['Failed to load resource: the server responded with a status of 401 (Unauthorized)']);

      await page.getByLabel('Токен оператора (ADMIN_TOKEN)').fill(ADMIN_TOKEN);
      await page.getByRole('button', { name: 'Войти' }).click();
      await page.waitForURL(`${gateway.baseUrl}/admin`);
      expect(await page.locator('h1').textContent()).toBe('Мерчанты и балансы');
      const cookies = await context.cookies();
      expect(cookies.find((c) => c.name === 'operator_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/admin' });
      await screenshot(page, 'merchants', save);

      await page.getByRole('link', { name: 'Книжная лавка', exact: true }).click();
      await page.getByRole('link', { name: 'тестовый режим' }).click();
      await page.waitForURL(/mode=test/);
      expect(await page.locator('h1').textContent()).toBe('Книжная лавка');

      const plot = page.locator('svg.plot');
      const box = await plot.boundingBox();
      expect(box!.width).toBeGreaterThan(100);
      expect(box!.height).toBeGreaterThan(100);
      // The plot fills its card's width: as wide as the card's heading, a block within the padding.
      const heading = await page.locator('.card', { has: plot }).locator('h2').boundingBox();
      expect(Math.round(box!.width)).toBe(Math.round(heading!.width));
      const series = page.locator('svg.plot path.series');
      expect(await series.count()).toBe(3);
      expect(await series.evaluateAll((paths) => paths.map((p) => p.getAttribute('data-series')))).toEqual(['pending', 'available', 'reserved']);
      for (let i = 0; i < 3; i += 1) expect((await series.nth(i).boundingBox())!.width).toBeGreaterThan(100);
      expect(await page.locator('table.volumes tbody tr').count()).toBe(5);
      await screenshot(page, 'merchant', save);

      await poll(
        async () => {
          await page.reload();
          return attemptsShown(page);
        },
        (n) => n >= 1,
        'a delivered invoice.paid with its attempt',
      );
      const before = await attemptsShown(page);
      await page.locator('tr.delivery', { hasText: 'invoice.paid' }).first().getByRole('button', { name: 'Отправить снова' }).click();
      await page.waitForURL(/#webhooks$/);
      const after = await poll(
        async () => {
          await page.reload();
          return attemptsShown(page);
        },
        (n) => n === before + 1,
        'the resent delivery’s new attempt on the page',
        20_000,
      );
      expect(after).toBe(before + 1);

      await page.getByRole('link', { name: 'Система' }).click();
      await page.waitForURL(`${gateway.baseUrl}/admin/system`);
      expect(await page.locator('table.lags tr.projection').count()).toBeGreaterThanOrEqual(5);
      expect(await page.locator('table.checkpoint').textContent()).toMatch(/[0-9a-f]{64}/);
      // The signed text as a copy from the page gives it (innerText): its four lines,
      // verifying under the signature shown and the key published at GET /v1/audit/keys.
      const cell = (label: string) =>
        page
          .locator('table.checkpoint tr', { has: page.locator('th', { hasText: label }) })
          .locator('td')
          .innerText();
      const [signedText, signature, kid] = [await cell('Подписанный текст'), await cell('Подпись'), await cell('Ключ подписи')];
      expect(signedText.split('\n')).toEqual([
        'gateway-log-checkpoint-v1',
        expect.any(String),
        expect.stringMatching(/^\d+$/),
        expect.stringMatching(/^[0-9a-f]{64}$/),
      ]);
      const keys = (await api(gateway.baseUrl).get('/v1/audit/keys')).body.keys as { kid: string; publicKey: string }[];
      const key = keys.find((k) => k.kid === kid);
      expect(key).toBeDefined();
      expect(verify(null, Buffer.from(signedText, 'utf8'), createPublicKey(key!.publicKey), Buffer.from(signature, 'base64'))).toBe(true);
      await screenshot(page, 'system', save);

      await page.getByRole('button', { name: 'Выйти' }).click();
      await page.waitForURL(`${gateway.baseUrl}/admin/login`);
      await page.goto(`${gateway.baseUrl}/admin`);
      expect(new URL(page.url()).pathname).toBe('/admin/login');
      // No CSP violation, no missing stylesheet.
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('a 255-character name without spaces (account and project): at 1280 px every table fits its card, and axe finds no violation', async () => {
    const accountId = await operator.createAccount('Ш'.repeat(255));
    const long = await operator.merchant({ name: 'Щ'.repeat(255), holdHours: 0, webhookUrl: receiver.url } as never, accountId);
    const created = await long.test.post('/v1/invoices', { amount: '500.00', orderId: `long-${randomUUID()}`, method: 'sbp' });
    expectStatus(created, 201);
    expectStatus(await operator.payment(created.body.id, 'paid'), 200);
    await poll(
      () => operator.http.get(`/admin/v1/webhook-deliveries?projectId=${long.projectId}`),
      (r) => r.status === 200 && r.body.items.length > 0,
      'the long-named project’s webhook delivery',
    );
    // bypassCSP: axe is injected as a script (the page's own headers are unchanged).
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'ru-RU', bypassCSP: true });
    const page = await context.newPage();
    try {
      await logIn(page);
      const found: Record<string, { overflowing: string[]; pageWidth: number; violations: string[] }> = {};
      for (const [name, address] of [
        ['merchants', '/admin'],
        ['merchant, test mode', `/admin/accounts/${accountId}?mode=test`],
      ] as const) {
        await page.goto(`${gateway.baseUrl}${address}`);
        if (name === 'merchant, test mode') expect(await page.locator('table.deliveries tr.delivery').count()).toBeGreaterThan(0);
        // A card wider inside than it shows scrolls sideways (its balances off-screen).
        const overflowing = (await page.evaluate(`[...document.querySelectorAll('.card')]
          .filter((card) => card.scrollWidth > card.clientWidth)
          .map((card) => (card.querySelector('h2')?.textContent ?? 'card') + ': ' + card.scrollWidth + ' px in ' + card.clientWidth)`)) as string[];
        const pageWidth = (await page.evaluate('document.documentElement.scrollWidth')) as number;
        // Before the fix: scrollable-region-focusable (serious) on the «Балансы» card, a region scrolling with nothing to focus.
        const violations = await axeViolations(page);
        found[name] = { overflowing, pageWidth, violations };
      }
      expect(found).toEqual({
        merchants: { overflowing: [], pageWidth: 1280, violations: [] },
        'merchant, test mode': { overflowing: [], pageWidth: 1280, violations: [] },
      });
    } finally {
      await context.close();
    }
  });

  it('a project name with an unclosed right-to-left override (U+202E) reverses none of the gateway’s values drawn after it', async () => {
    const accountId = await operator.createAccount('Аккаунт с RLO');
    const rlo = await operator.merchant({ name: 'Магазин', holdHours: 0, webhookUrl: receiver.url } as never, accountId);
    expectStatus(await operator.http.patch(`/admin/v1/projects/${rlo.projectId}`, { name: 'Магазин \u202E' }), 200);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'ru-RU' });
    const page = await context.newPage();
    try {
      await logIn(page);
      // Each text matched: does it read left to right on screen, its first character left of its last?
      const leftToRight = (selector: string) =>
        page.evaluate(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((element) => {
          const text = document.createTreeWalker(element, NodeFilter.SHOW_TEXT).nextNode();
          const range = document.createRange();
          const left = (i) => (range.setStart(text, i), range.setEnd(text, i + 1), range.getBoundingClientRect().left);
          return [text.data, left(0) < left(text.data.length - 1)];
        })`);
      await page.goto(`${gateway.baseUrl}/admin/accounts/${accountId}?mode=test`);
      // The project's line: its name, status, id and webhook URL (the id and URL after the name).
      expect(await page.locator('main li').count()).toBe(1);
      // In the page's plain-text title, the name is isolated by U+2068 … U+2069.
      expect(await page.title()).toBe('\u2068Аккаунт с RLO\u2069 — консоль оператора');
      expect(await leftToRight('main li .mono')).toEqual([
        [rlo.projectId, true],
        [receiver.url, true],
      ]);
    } finally {
      await context.close();
    }
  });
});
