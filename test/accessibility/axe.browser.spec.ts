/**
 * Every page a person meets, checked by axe-core in Debian's Chromium (playwright-core,
 * never a downloaded browser): /docs, the payment page in each of its states, and every
 * page of the operator console. Zero violations of any impact (issue 37 found
 * scrollable-region-focusable and heading-order on /docs, color-contrast on the payment
 * page's footer, empty-table-header on the console's merchant page). The pages carry a
 * CSP without scripts; the browser context bypasses it to inject axe (the page's own
 * headers are unchanged).
 */
import { randomUUID } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { axeViolations as violations } from '../support/axe';
import { launchDebianChromium } from '../support/chromium';
import { expectStatus, InvoiceGateway, Merchant, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';

describe('accessibility: axe-core finds no violation on any page', () => {
  let gw: InvoiceGateway;
  let browser: Browser;
  let context: BrowserContext;
  let merchant: Merchant;
  let receiver: WebhookReceiver;
  const pay: Record<string, string> = {};

  async function invoice(mode: 'test' | 'live', method?: string): Promise<string> {
    const created = await merchant[mode].post('/v1/invoices', { amount: '1500.00', orderId: `a11y-${randomUUID()}`, ...(method ? { method } : {}) });
    expectStatus(created, 201);
    return created.body.id as string;
  }

  beforeAll(async () => {
    // CLOCK=manual: an invoice expires and a refund completes when the test moves the clock.
    // WEBHOOK_ALLOW_PRIVATE_NETWORKS: a receiver on this host that answers 500 with a text, so the merchant's page lists deliveries with their replies.
    gw = await startInvoiceGateway({ CLOCK: 'manual', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    receiver = await startWebhookReceiver();
    receiver.answer = () => ({ status: 500, body: '<html><body><h1>500</h1> invalid signature \u202Ekcatta</body></html>' });
    merchant = await gw.operator.merchant({ name: 'Книжная лавка', holdHours: 0, webhookUrl: receiver.url } as never);
    const expiring = await invoice('test', 'sbp');
    await gw.operator.advance(2 * 3600);
    pay['expired'] = expiring;
    pay['created: choose a method'] = await invoice('test');
    pay['created: the sandbox buttons'] = await invoice('test', 'sbp');
    pay['live: paid at the bank'] = await invoice('live', 'card');
    for (const [state, outcome] of [
      ['paid', 'paid'],
      ['failed', 'failed'],
      ['refunded', 'paid'],
      ['partially refunded', 'paid'],
    ] as const) {
      pay[state] = await invoice('test', 'sbp');
      expectStatus(await gw.operator.payment(pay[state], outcome), 200);
    }
    await poll(
      () => merchant.test.get('/v1/balance'),
      (r) => r.body.available !== '0.00',
      'the payments available',
    );
    expectStatus(await merchant.test.post(`/v1/invoices/${pay['refunded']}/refund`, {}), 202);
    expectStatus(await merchant.test.post(`/v1/invoices/${pay['partially refunded']}/refund`, { amount: '100.00' }), 202);
    await gw.operator.advance(60);
    for (const id of [pay['refunded']!, pay['partially refunded']!]) {
      await poll(
        () => merchant.test.get(`/v1/invoices/${id}`),
        (r) => /refunded$/.test(r.body.status),
        'the refund done',
      );
    }
    await poll(
      () => gw.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${merchant.projectId}`),
      (r) => r.body.items.some((d: { attempts: { body: string | null }[] }) => d.attempts.some((a) => a.body)),
      'a webhook delivery listed with the reply to its attempt',
    );
    browser = await launchDebianChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'ru-RU', bypassCSP: true });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    await receiver?.close();
  });

  async function check(path: string): Promise<string[]> {
    const page = await context.newPage();
    try {
      await page.goto(`${gw.baseUrl}${path}`);
      return await violations(page);
    } finally {
      await page.close();
    }
  }

  it('/docs', async () => {
    expect(await check('/docs')).toEqual([]);
  });

  it('the payment page in each of its states, and its error page', async () => {
    const found: Record<string, string[]> = {};
    for (const [state, id] of Object.entries(pay)) found[state] = await check(`/pay/${id}`);
    found['created: changing the method'] = await check(`/pay/${pay['created: the sandbox buttons']}?change=1`);
    found['unknown invoice'] = await check(`/pay/${randomUUID()}`);
    expect(Object.keys(found)).toHaveLength(10);
    expect(found).toEqual(Object.fromEntries(Object.keys(found).map((k) => [k, []])));
  });

  it('the payment page reflows at 320 CSS px (WCAG 1.4.10): no sideways scrolling in any state, the largest amount too; its method buttons read apart', async () => {
    const largest = await merchant.test.post('/v1/invoices', { amount: '999999.99', orderId: `a11y-${randomUUID()}` });
    expectStatus(largest, 201);
    // A million: every method's total passes 1 000 000 ₽ (issue: its buttons stuck out of the card, the page 342 px wide).
    const million = await merchant.test.post('/v1/invoices', { amount: '1000000.00', orderId: `a11y-${randomUUID()}` });
    expectStatus(million, 201);
    const narrow = await browser.newContext({ viewport: { width: 320, height: 640 }, locale: 'ru-RU' });
    try {
      const widths: Record<string, number> = {};
      let buttons: string[] = [];
      const outside: Record<string, number> = {};
      for (const [state, id] of [
        ...Object.entries(pay),
        ['created: 999 999,99 ₽, no method', largest.body.id as string],
        ['created: 1 000 000,00 ₽, no method', million.body.id as string],
      ]) {
        const page = await narrow.newPage();
        await page.goto(`${gw.baseUrl}/pay/${id}`);
        widths[state] = (await page.evaluate('document.documentElement.scrollWidth')) as number;
        // The buttons stay inside the card: how many stick out past its right edge.
        outside[state] = (await page.evaluate(
          `[...document.querySelectorAll('.card button')].filter((b) => b.getBoundingClientRect().right > b.closest('.card').getBoundingClientRect().right + 0.5).length`,
        )) as number;
        if (state === 'created: choose a method')
          buttons = (await page.evaluate(`[...document.querySelectorAll('button.method')].map((b) => b.textContent)`)) as string[];
        // Stacked, the total's label and amount stay together: a rule above the label, none between them.
        const rules = (await page.evaluate(`[...document.querySelectorAll('dd.total')].map((d) => getComputedStyle(d).borderTopWidth)`)) as string[];
        expect({ state, rules }).toEqual({ state, rules: rules.map(() => '0px') });
        await page.close();
      }
      expect(widths).toEqual(Object.fromEntries(Object.keys(widths).map((k) => [k, 320])));
      expect(outside).toEqual(Object.fromEntries(Object.keys(outside).map((k) => [k, 0])));
      // Without its style sheet too (a reader, a text browser): title, total and fee with spaces between them.
      expect(buttons.length).toBeGreaterThan(0);
      for (const text of buttons) expect(text).toMatch(/\S \d[\d\s\u00a0\u202f]*,\d\d\s?₽ \S/);
    } finally {
      await narrow.close();
    }
  });

  /** Logs in on the login page the browser shows, with the operator token, and waits for the merchants page. */
  const logIn = async (page: Page): Promise<void> => {
    await page.getByLabel('Токен оператора (ADMIN_TOKEN)').fill(gw.gateway.adminToken);
    await page.getByRole('button', { name: 'Войти' }).click();
    await page.waitForURL(`${gw.baseUrl}/admin`);
  };

  it('every console page: login (and its error), merchants, a merchant in both modes, system, an error page', async () => {
    const page = await context.newPage();
    const found: Record<string, string[]> = {};
    try {
      await page.goto(`${gw.baseUrl}/admin/login`);
      found['login'] = await violations(page);
      await page.getByLabel('Токен оператора (ADMIN_TOKEN)').fill('a wrong token');
      await page.getByRole('button', { name: 'Войти' }).click();
      await page.getByRole('alert').waitFor();
      found['login: wrong token'] = await violations(page);
      await logIn(page);
      for (const [name, path] of [
        ['merchants', '/admin'],
        ['merchant, test mode', `/admin/accounts/${merchant.accountId}?mode=test`],
        ['merchant, live mode', `/admin/accounts/${merchant.accountId}?mode=live`],
        ['system', '/admin/system'],
        ['unknown account', `/admin/accounts/${randomUUID()}`],
      ]) {
        await page.goto(`${gw.baseUrl}${path}`);
        // The test mode's page has the table of webhook deliveries (with its «Отправить снова» column).
        if (name === 'merchant, test mode') expect(await page.locator('table.deliveries li.attempt', { hasText: 'ответ:' }).count()).toBeGreaterThan(0);
        found[name!] = await violations(page);
      }
    } finally {
      await page.close();
    }
    expect(found).toEqual(Object.fromEntries(Object.keys(found).map((k) => [k, []])));
  });

  it('the console at 390 px (a phone, or 1280 px at about 330 % zoom): cards that scroll sideways take focus, no violation', async () => {
    const narrow = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'ru-RU', bypassCSP: true });
    const page = await narrow.newPage();
    const found: Record<string, string[]> = {};
    const widths: Record<string, number> = {};
    try {
      await page.goto(`${gw.baseUrl}/admin/login`);
      await logIn(page);
      for (const [name, path] of [
        ['merchants', '/admin'],
        ['merchant, test mode', `/admin/accounts/${merchant.accountId}?mode=test`],
        ['system', '/admin/system'],
      ] as const) {
        await page.goto(`${gw.baseUrl}${path}`);
        // Before the fix: scrollable-region-focusable (serious) on #transactions and on the system page's cards.
        found[name] = await violations(page);
        widths[name] = (await page.evaluate('document.documentElement.scrollWidth')) as number;
      }
      // At least one card does scroll sideways at this width (else the check above would prove nothing).
      const scrolling = (await page.evaluate(`[...document.querySelectorAll('.card')].filter((c) => c.scrollWidth > c.clientWidth).length`)) as number;
      expect(scrolling).toBeGreaterThan(0);
    } finally {
      await narrow.close();
    }
    expect(found).toEqual(Object.fromEntries(Object.keys(found).map((k) => [k, []])));
    // The page itself does not scroll sideways (the header wraps; «Выйти» stays on screen).
    expect(widths).toEqual(Object.fromEntries(Object.keys(widths).map((k) => [k, 390])));
  });
});
