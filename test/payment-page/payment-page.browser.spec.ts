import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { launchDebianChromium } from '../support/chromium';
import { ROOT, RunningGateway, startGateway } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-payment-page-browser-test-3';
const SCREENSHOT = path.join(ROOT, '.tmp', 'payment-page.png');

describe('payment page in a real browser (Debian Chromium via playwright-core)', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let browser: Browser;
  let shop: Server;
  let shopUrl: string;
  let testKey: string;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function json(method: string, pathname: string, body: unknown, token: string): Promise<{ status: number; body: any }> {
    const response = await fetch(`${gateway.baseUrl}${pathname}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  }

  beforeAll(async () => {
    // The merchant's shop: answers its successUrl with a thank-you page.
    // Its /attack/<invoice id> is another site's page that submits the sandbox form by itself (a CSRF attempt).
    shop = createServer((request, response) => {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      const attack = /^\/attack\/([0-9a-f-]{36})$/.exec(request.url ?? '');
      if (attack) {
        response.end(
          `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Win a prize</title></head><body>` +
            `<form id="f" method="post" action="${gateway.baseUrl}/pay/${attack[1]}/sandbox"><input type="hidden" name="outcome" value="paid"></form>` +
            `<script>document.getElementById('f').submit()</script></body></html>`,
        );
        return;
      }
      response.end(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head><body><h1>thank you</h1><p>Your order is paid.</p></body></html>',
      );
    });
    await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
    shopUrl = `http://127.0.0.1:${(shop.address() as AddressInfo).port}`;

    db = await createTestDatabase();
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    const account = await json('POST', '/admin/v1/accounts', { name: 'Книжная лавка', email: 'books@example.com' }, ADMIN_TOKEN);
    expect(account.status).toBe(201);
    const project = await json('POST', '/admin/v1/projects', { accountId: account.body.id, name: 'Книжная лавка' }, ADMIN_TOKEN);
    expect(project.status).toBe(201);
    testKey = project.body.keys.test.secretKey;

    browser = await launchDebianChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await gateway?.kill();
    await db?.drop();
    await new Promise<void>((resolve) => (shop ? shop.close(() => resolve()) : resolve()));
  });

  it('the buyer opens the invoice url, chooses a method, clicks "Оплатить" and lands on successUrl; the invoice is paid', async () => {
    const successUrl = `${shopUrl}/thank-you?order=book-1`;
    const created = await json(
      'POST',
      '/v1/invoices',
      { amount: '2490.00', orderId: `book-${randomUUID()}`, description: 'Книга «Мастер и Маргарита», подарочное издание', successUrl },
      testKey,
    );
    expect(created.status).toBe(201);
    const invoice = created.body as { id: string; url: string };

    const context = await browser.newContext({ viewport: { width: 420, height: 900 }, locale: 'ru-RU' });
    const page = await context.newPage();
    const consoleErrors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    try {
      const response = await page.goto(invoice.url);
      expect(response?.status()).toBe(200);
      expect(await page.title()).toBe('Оплата заказа');
      await expect(page.locator('h1').textContent()).resolves.toBe('Оплата заказа');
      expect(await page.locator('.lead').textContent()).toBe('Книга «Мастер и Маргарита», подарочное издание');

      mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });

      await page.getByRole('button', { name: /Банковская карта/ }).click();
      const pay = page.getByRole('button', { name: 'Оплатить', exact: true });
      await pay.waitFor();
      expect(page.url()).toBe(invoice.url);
      expect((await page.locator('dd.total').textContent())?.replace(/\u00a0/g, ' ')).toBe('2 564,70 ₽');
      await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, '-sandbox.png'), fullPage: true });

      await pay.click();
      await page.waitForURL(successUrl);
      expect(page.url()).toBe(successUrl);
      expect(await page.locator('body').textContent()).toContain('thank you');
      expect(consoleErrors).toEqual([]);
    } finally {
      await context.close();
    }

    const paid = await json('GET', `/v1/invoices/${invoice.id}`, undefined, testKey);
    expect(paid.status).toBe(200);
    expect(paid.body).toMatchObject({ status: 'paid', method: 'card', payableAmount: '2564.70' });
  });

  it("another site's page that submits the sandbox form by itself lands on a 403 page that says why; the invoice is not paid", async () => {
    const created = await json('POST', '/v1/invoices', { amount: '990.00', orderId: `book-${randomUUID()}`, method: 'sbp' }, testKey);
    expect(created.status).toBe(201);
    const invoice = created.body as { id: string; url: string };
    const context = await browser.newContext({ locale: 'ru-RU' });
    const page = await context.newPage();
    try {
      const refused = page.waitForResponse((r) => r.url() === `${invoice.url}/sandbox`);
      await page.goto(`${shopUrl}/attack/${invoice.id}`);
      expect((await refused).status()).toBe(403);
      await page.locator('h1').waitFor();
      expect(await page.locator('h1').textContent()).toBe('Запрос отклонён');
      expect(await page.locator('body').textContent()).toContain('не со страницы счёта');
    } finally {
      await context.close();
    }
    const still = await json('GET', `/v1/invoices/${invoice.id}`, undefined, testKey);
    expect(still.body.status).toBe('created');
  });
});
