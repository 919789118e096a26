import { randomUUID } from 'node:crypto';
import { evolveInvoice, initialInvoice, invoiceStatusAt, PersistentMap } from '#domain';
import type { InvoiceCreatedData, OpenInvoice, PaidInvoice } from '#domain';
import { formatRubles, renderInvoicePage, safeHttpUrl } from '../../apps/api/src/pay/payment-page.html';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-payment-page-tests-7';

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' http: https:; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
};

/** How many times the buyer may choose the method of one invoice (docs/api.md, "Payment page"). */
const METHOD_CHOICE_LIMIT = 20;

/** What a browser asks for when it follows a link. */
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

/** The page's text with non-breaking spaces as plain spaces ("1 030,00 ₽"). */
const plain = (html: string) => html.replace(/\u00a0/g, ' ');

describe('payment page over HTTP (GET /pay/{id}, POST /pay/{id}/method, POST /pay/{id}/sandbox)', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let testKey: string;
  let liveKey: string;
  let orders = 0;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function json(method: string, path: string, body: unknown, authorization: string): Promise<{ status: number; body: any }> {
    const response = await fetch(`${gateway.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${authorization}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function createInvoice(fields: Record<string, unknown>, key = testKey): Promise<{ id: string; url: string; [k: string]: any }> {
    const created = await json('POST', '/v1/invoices', { amount: '1000.00', orderId: `order-${++orders}-${randomUUID()}`, ...fields }, key);
    expect(created.status).toBe(201);
    return created.body;
  }

  async function invoiceStatus(id: string, key = testKey): Promise<string> {
    const got = await json('GET', `/v1/invoices/${id}`, undefined, key);
    expect(got.status).toBe(200);
    return got.body.status;
  }

  async function page(pathOrUrl: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; html: string }> {
    const response = await fetch(pathOrUrl.startsWith('http') ? pathOrUrl : `${gateway.baseUrl}${pathOrUrl}`, { redirect: 'manual', headers });
    return { status: response.status, headers: response.headers, html: plain(await response.text()) };
  }

  /**
   * A form POST as the buyer's browser sends it from the page: with the page's own
   * Origin (the gateway). `headers` replaces that (another site's Origin, none, a
   * Referer), `form` may carry the page's formToken.
   */
  async function submit(
    path: string,
    form: Record<string, string>,
    headers: Record<string, string> = { origin: gateway.baseUrl },
  ): Promise<{ status: number; location: string | null; headers: Headers; html: string }> {
    const response = await fetch(`${gateway.baseUrl}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form).toString(),
    });
    return { status: response.status, location: response.headers.get('location'), headers: response.headers, html: plain(await response.text()) };
  }

  /** The form token of a rendering of the invoice's page. */
  async function formTokenOf(id: string, query = ''): Promise<string> {
    const shown = await page(`/pay/${id}${query}`);
    const match = /<input type="hidden" name="formToken" value="([^"]+)">/.exec(shown.html);
    if (!match) throw new Error(`no form token on the page of ${id}:\n${shown.html}`);
    return match[1]!;
  }

  /** What the sandbox form of the invoice's page carries as shown to the buyer: its method and payable total (hidden fields). */
  async function shownTerms(id: string): Promise<{ method: string; payableAmount: string }> {
    const shown = await page(`/pay/${id}`);
    const method = /<input type="hidden" name="method" value="([^"]+)">/.exec(shown.html)?.[1];
    const payableAmount = /<input type="hidden" name="payableAmount" value="([^"]+)">/.exec(shown.html)?.[1];
    if (method === undefined || payableAmount === undefined) throw new Error(`no method and total in the sandbox form of ${id}:\n${shown.html}`);
    return { method, payableAmount };
  }

  function expectHtml(headers: Headers): void {
    expect(headers.get('content-type')).toBe('text/html; charset=utf-8');
  }

  function expectSecurityHeaders(headers: Headers): void {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect({ name, value: headers.get(name) }).toEqual({ name, value });
  }

  /** A page of the payment page: its status, HTML, and the security headers every page carries. */
  function expectPage(reply: { status: number; headers: Headers }, status: number): void {
    expect(reply.status).toBe(status);
    expectHtml(reply.headers);
    expectSecurityHeaders(reply.headers);
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    gateway = await startGateway('gateway', {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      // A day and a minute pass on the operator's clock: the form token's age, an invoice's lifetime.
      CLOCK: 'manual',
      // Reads one invoice (or payout) several times in a row to follow its state; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
    });
    const account = await json('POST', '/admin/v1/accounts', { name: 'Кофейня', email: 'coffee@example.com' }, ADMIN_TOKEN);
    expect(account.status).toBe(201);
    const project = await json('POST', '/admin/v1/projects', { accountId: account.body.id, name: 'Кофейня онлайн' }, ADMIN_TOKEN);
    expect(project.status).toBe(201);
    testKey = project.body.keys.test.secretKey;
    liveKey = project.body.keys.live.secretKey;
  });
  afterAll(async () => {
    await gateway?.kill();
    await db?.drop();
  });

  it('shows the description, the amount, the buyer fee, the total and the expiry of a method-fixed test invoice, with sandbox buttons', async () => {
    const invoice = await createInvoice({ method: 'card', description: 'Два капучино и круассан' });
    expect(invoice.url).toBe(`${gateway.baseUrl}/pay/${invoice.id}`);
    const shown = await page(invoice.url);
    expect(shown.status).toBe(200);
    expectHtml(shown.headers);
    expect(shown.html).toContain('<html lang="ru">');
    expect(shown.html).toContain('Два капучино и круассан');
    expect(shown.html).toContain('<dt>Сумма заказа</dt><dd>1 000,00 ₽</dd>');
    expect(shown.html).toContain('<dt>Сервисный сбор</dt><dd>30,00 ₽</dd>');
    expect(shown.html).toContain('1 030,00 ₽'); // total = payableAmount
    expect(invoice.payableAmount).toBe('1030.00');
    expect(shown.html).toContain('Банковская карта');
    expect(shown.html).toContain('Оплатить до');
    expect(shown.html).toContain(`<time datetime="${invoice.expiresAt}">`);
    expect(shown.html).toContain('Тестовый счёт');
    expect(shown.html).toContain(`action="/pay/${invoice.id}/sandbox"`);
    expect(shown.html).toContain('value="paid">Оплатить</button>');
    expect(shown.html).toContain('value="failed">Отклонить</button>');
    // The merchant fixed the method: no choice offered.
    expect(shown.html).not.toContain('/method"');
    expect(shown.html).not.toContain('<script');
  });

  it('lets the buyer choose among the invoice methods, with what each costs, then offers to pay (303 back to the page)', async () => {
    const invoice = await createInvoice({ description: 'Абонемент' });
    const before = await page(`/pay/${invoice.id}`);
    expect(before.status).toBe(200);
    expect(before.html).toContain(`<form method="post" action="/pay/${invoice.id}/method"`);
    // SBP 1.5 %, card 3 % (crypto is off in this project); the whole rate on the buyer by default.
    expect(before.html).toContain(
      'name="method" value="sbp"><span class="title">СБП (Система быстрых платежей)</span> <span class="sum">1 015,00 ₽</span> <span class="fee">сервисный сбор 15,00 ₽</span>',
    );
    expect(before.html).toContain('name="method" value="card"><span class="title">Банковская карта</span> <span class="sum">1 030,00 ₽</span>');
    expect(before.html).not.toContain('value="crypto"');
    expect(before.html).toContain('<span class="nw">от 1 015,00 ₽</span> <span class="nw">до 1 030,00 ₽</span>');
    expect(before.html).not.toContain('/sandbox"');

    const unknown = await submit(`/pay/${invoice.id}/method`, { method: 'crypto' });
    expect(unknown.status).toBe(400);
    expectHtml(unknown.headers);
    expect(unknown.html).toContain('Способ оплаты недоступен');
    expect((await submit(`/pay/${invoice.id}/method`, {})).status).toBe(400);

    const chosen = await submit(`/pay/${invoice.id}/method`, { method: 'sbp' });
    expect(chosen.status).toBe(303);
    expect(chosen.location).toBe(`/pay/${invoice.id}`);
    expectSecurityHeaders(chosen.headers);

    const after = await page(`/pay/${invoice.id}`);
    expect(after.html).toContain('<dt>Сервисный сбор</dt><dd>15,00 ₽</dd>');
    expect(after.html).toContain('<dd class="total">1 015,00 ₽</dd>');
    expect(after.html).toContain('<dt>Способ оплаты</dt><dd>СБП (Система быстрых платежей)</dd>');
    expect(after.html).toContain(`action="/pay/${invoice.id}/sandbox"`);
    expect(after.html).not.toContain('/method"');
    expect(after.html).toContain(`href="/pay/${invoice.id}?change=1"`);

    // The buyer may still switch while the invoice is open.
    const change = await page(`/pay/${invoice.id}?change=1`);
    expect(change.html).toContain(`action="/pay/${invoice.id}/method"`);
    expect((await submit(`/pay/${invoice.id}/method`, { method: 'card' })).status).toBe(303);
    const view = await json('GET', `/v1/invoices/${invoice.id}`, undefined, testKey);
    expect(view.body).toMatchObject({ status: 'pending', method: 'card', customerFeeAmount: '30.00', payableAmount: '1030.00' });
  });

  it('a method turned off after an invoice was created stays choosable on it (docs/api.md "Fees"); new invoices do not get it', async () => {
    const account = await json('POST', '/admin/v1/accounts', { name: 'Пекарня', email: 'bakery@example.com' }, ADMIN_TOKEN);
    const project = await json('POST', '/admin/v1/projects', { accountId: account.body.id, name: 'Пекарня онлайн' }, ADMIN_TOKEN);
    const key = project.body.keys.test.secretKey;
    const open = await createInvoice({}, key);
    const off = await json('PATCH', `/admin/v1/projects/${project.body.id}`, { methods: { card: { enabled: false } } }, ADMIN_TOKEN);
    expect(off.status).toBe(200);
    expect((await json('GET', '/v1/methods', undefined, key)).body.methods).toEqual(
      expect.arrayContaining([expect.objectContaining({ code: 'card', enabled: false })]),
    );
    const refused = await json('POST', '/v1/invoices', { amount: '1000.00', orderId: `order-off-${randomUUID()}`, method: 'card' }, key);
    expect({ status: refused.status, code: refused.body.error?.code }).toEqual({ status: 422, code: 'method_unavailable' });

    expect((await page(`/pay/${open.id}`)).html).toContain('name="method" value="card"');
    expect((await submit(`/pay/${open.id}/method`, { method: 'card' })).status).toBe(303);
    expect((await json('GET', `/v1/invoices/${open.id}`, undefined, key)).body).toMatchObject({ status: 'pending', method: 'card' });
  });

  it(`bounds the buyer's method choices at ${METHOD_CHOICE_LIMIT} an invoice (then a 409 page, the method kept); the same method again records nothing`, async () => {
    const invoice = await createInvoice({});
    const methodEvents = async () =>
      (
        await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE stream_name = $1 AND event_type = 'InvoiceMethodChosen'`, [
          `invoice-${invoice.id}`,
        ])
      ).rows[0]!.n;
    expect((await submit(`/pay/${invoice.id}/method`, { method: 'sbp' })).status).toBe(303);
    expect((await submit(`/pay/${invoice.id}/method`, { method: 'sbp' })).status).toBe(303);
    expect(await methodEvents()).toBe(1);
    // Switching back and forth: choices 2..20, the last one card.
    for (let choice = 2; choice <= METHOD_CHOICE_LIMIT; choice++) {
      const method = choice % 2 === 0 ? 'card' : 'sbp';
      expect({ choice, status: (await submit(`/pay/${invoice.id}/method`, { method })).status }).toEqual({ choice, status: 303 });
    }
    expect(await methodEvents()).toBe(METHOD_CHOICE_LIMIT);
    expect((await page(`/pay/${invoice.id}`)).html).not.toContain('?change=1');

    const refused = await submit(`/pay/${invoice.id}/method`, { method: 'sbp' });
    expectPage(refused, 409);
    expect(refused.html).toContain('<h1>Способ оплаты больше не изменить</h1>');
    expect(refused.html).toContain('Остаётся выбранный: Банковская карта.');
    expect(refused.html).toContain(`href="/pay/${invoice.id}"`);
    expect(await methodEvents()).toBe(METHOD_CHOICE_LIMIT);
    // The chosen method again is still answered as before.
    expect((await submit(`/pay/${invoice.id}/method`, { method: 'card' })).status).toBe(303);
    expect(await methodEvents()).toBe(METHOD_CHOICE_LIMIT);
    const view = await json('GET', `/v1/invoices/${invoice.id}`, undefined, testKey);
    expect(view.body).toMatchObject({ status: 'pending', method: 'card', payableAmount: '1030.00' });
    // The acquirer's report of the method paid with is not the buyer's choice: it is recorded.
    const paid = await json('POST', `/admin/v1/invoices/${invoice.id}/payment`, { outcome: 'paid', method: 'sbp' }, ADMIN_TOKEN);
    expect(paid.status).toBe(200);
    expect(paid.body).toMatchObject({ status: 'paid', method: 'sbp', payableAmount: '1015.00' });
  });

  it('the paid page does not claim the shop already knows of the payment (its webhook may still be failing)', async () => {
    const invoice = await createInvoice({ method: 'card' });
    expect((await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid', ...(await shownTerms(invoice.id)) })).status).toBe(303);
    const shown = await page(`/pay/${invoice.id}`);
    expect(shown.html).toContain('<h1>Оплачено</h1>');
    expect(shown.html).not.toContain('уже знает');
    expect(shown.html).toContain('Статус заказа в магазине может обновиться не сразу.');
  });

  it('sandbox "Оплатить" records the payment and redirects (303) to successUrl; the invoice is paid', async () => {
    const successUrl = 'https://shop.example/thanks?order=42&src=pay';
    const invoice = await createInvoice({ method: 'sbp', successUrl, failUrl: 'https://shop.example/sorry' });
    const paid = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid', ...(await shownTerms(invoice.id)) });
    expect(paid.status).toBe(303);
    expect(paid.location).toBe(successUrl);
    expectSecurityHeaders(paid.headers);
    expect(await invoiceStatus(invoice.id)).toBe('paid');

    const shown = await page(`/pay/${invoice.id}`);
    expect(shown.status).toBe(200);
    expect(shown.html).toContain('<h1>Оплачено</h1>');
    expect(shown.html).toContain('href="https://shop.example/thanks?order=42&amp;src=pay"');
    expect(shown.html).not.toContain('/sandbox"');

    // A second click answers as the first; the opposite outcome is refused (409, HTML).
    const again = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' });
    expect(again.status).toBe(303);
    expect(again.location).toBe(successUrl);
    const decline = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'failed' });
    expect(decline.status).toBe(409);
    expectHtml(decline.headers);
    expect(decline.html).toContain('<h1>Оплачено</h1>');
    const choose = await submit(`/pay/${invoice.id}/method`, { method: 'card' });
    expect(choose.status).toBe(409);
  });

  it('"Оплатить" pays the method and total the page showed: changed since (another tab), missing or altered, it is a 409 page with the invoice now; nothing recorded', async () => {
    const successUrl = 'https://shop.example/paid';
    const invoice = await createInvoice({ successUrl });
    const paidEvents = async () =>
      (
        await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE stream_name = $1 AND event_type = 'InvoicePaid'`, [
          `invoice-${invoice.id}`,
        ])
      ).rows[0]!.n;
    expect((await submit(`/pay/${invoice.id}/method`, { method: 'sbp' })).status).toBe(303);
    // Tab A shows SBP at 1 015,00 ₽, and its form carries them.
    const tabA = await page(`/pay/${invoice.id}`);
    expect(tabA.html).toContain('<dd class="total">1 015,00 ₽</dd>');
    const seen = await shownTerms(invoice.id);
    expect(seen).toEqual({ method: 'sbp', payableAmount: '1015.00' });
    // Tab B switches to the card (1 030,00 ₽); then tab A's "Оплатить".
    expect((await submit(`/pay/${invoice.id}/method`, { method: 'card' })).status).toBe(303);
    const staleForms: Record<string, string>[] = [
      { outcome: 'paid', ...seen },
      { outcome: 'paid' },
      { outcome: 'paid', method: 'card' },
      { outcome: 'paid', method: 'card', payableAmount: '1015.00' },
      { outcome: 'paid', method: 'card', payableAmount: '1030' },
    ];
    for (const form of staleForms) {
      const stale = await submit(`/pay/${invoice.id}/sandbox`, form);
      expectPage(stale, 409);
      expect(stale.html).toContain('Способ оплаты или сумма к оплате изменились');
      // The invoice as it is now, with a form to confirm it again.
      expect(stale.html).toContain('<dd class="total">1 030,00 ₽</dd>');
      expect(stale.html).toContain('<dt>Способ оплаты</dt><dd>Банковская карта</dd>');
      expect(stale.html).toContain('<input type="hidden" name="method" value="card">');
      expect(stale.html).toContain('<input type="hidden" name="payableAmount" value="1030.00">');
      expect(stale.html).toMatch(/<input type="hidden" name="formToken" value="[^"]+">/);
      expect(await paidEvents()).toBe(0);
    }
    expect(await json('GET', `/v1/invoices/${invoice.id}`, undefined, testKey)).toMatchObject({ body: { status: 'pending', method: 'card' } });
    // Confirmed again, as now shown: paid with the card at 1 030,00 ₽.
    const confirmed = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid', ...(await shownTerms(invoice.id)) });
    expect(confirmed.status).toBe(303);
    expect(confirmed.location).toBe(successUrl);
    expect(await paidEvents()).toBe(1);
    const paid = await json('GET', `/v1/invoices/${invoice.id}`, undefined, testKey);
    expect(paid.body).toMatchObject({ status: 'paid', method: 'card', payableAmount: '1030.00' });
  });

  it('sandbox "Оплатить" sent several times at once (two tabs, a retried request): each answered with the same redirect', async () => {
    const successUrl = 'https://shop.example/ok';
    for (let round = 0; round < 3; round++) {
      const invoice = await createInvoice({ method: 'card', successUrl });
      const terms = await shownTerms(invoice.id);
      const clicks = await Promise.all(Array.from({ length: 4 }, () => submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid', ...terms })));
      expect(clicks.map((c) => [c.status, c.location])).toEqual(Array.from({ length: 4 }, () => [303, successUrl]));
      expect(await invoiceStatus(invoice.id)).toBe('paid');
    }
  });

  it('sandbox "Отклонить" records the decline and redirects (303) to failUrl; the invoice is failed', async () => {
    const failUrl = 'http://shop.example/failed';
    const invoice = await createInvoice({ method: 'card', successUrl: 'https://shop.example/ok', failUrl });
    const declined = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'failed' });
    expect(declined.status).toBe(303);
    expect(declined.location).toBe(failUrl);
    expect(await invoiceStatus(invoice.id)).toBe('failed');
    const shown = await page(`/pay/${invoice.id}`);
    expect(shown.html).toContain('<h1>Платёж отклонён</h1>');
    expect(shown.html).toContain(`href="${failUrl}"`);
    expect((await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' })).status).toBe(409);
  });

  it('without successUrl / failUrl the sandbox redirects back to the page; a bad outcome or no method yet is refused', async () => {
    const noMethod = await createInvoice({});
    const early = await submit(`/pay/${noMethod.id}/sandbox`, { outcome: 'paid' });
    expect(early.status).toBe(409);
    expectHtml(early.headers);
    expect(early.html).toContain('Сначала выберите способ оплаты');

    const invoice = await createInvoice({ method: 'sbp' });
    const bad = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'maybe' });
    expect(bad.status).toBe(400);
    expectHtml(bad.headers);
    const paid = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid', ...(await shownTerms(invoice.id)) });
    expect(paid.status).toBe(303);
    expect(paid.location).toBe(`/pay/${invoice.id}`);
    expect((await page(`/pay/${invoice.id}`)).html).toContain('<h1>Оплачено</h1>');
  });

  it('a live invoice has no sandbox buttons, says the payment happens at the bank, and refuses POST sandbox (403)', async () => {
    const invoice = await createInvoice({ method: 'card', description: 'Боевой заказ' }, liveKey);
    const shown = await page(`/pay/${invoice.id}`);
    expect(shown.status).toBe(200);
    expect(shown.html).toContain('Боевой заказ');
    expect(shown.html).toContain('1 030,00 ₽');
    expect(shown.html).toContain('Оплата проводится на стороне банка');
    expect(shown.html).toContain('не реализовано');
    expect(shown.html).not.toContain('/sandbox"');
    expect(shown.html).not.toContain('>Оплатить</button>');
    expect(shown.html).not.toContain('Тестовый');

    const refused = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' });
    expectPage(refused, 403);
    expect(refused.html).toContain('Тестовая оплата недоступна');
    expect(await invoiceStatus(invoice.id, liveKey)).toBe('created');
  });

  it('answers an unknown or malformed id with a 404 HTML page', async () => {
    for (const path of [`/pay/${randomUUID()}`, '/pay/not-an-invoice', `/pay/${randomUUID()}/sandbox`, '/pay/%3Cscript%3E/method']) {
      const response = path.endsWith('sandbox') || path.endsWith('method') ? await submit(path, { outcome: 'paid', method: 'sbp' }) : await page(path);
      expect({ path, status: response.status }).toEqual({ path, status: 404 });
      expectHtml(response.headers);
      expectSecurityHeaders(response.headers);
      expect(response.html).toContain('Счёт не найден');
      expect(response.html).not.toContain('"error"');
      expect(response.html).not.toContain('<script');
    }
  });

  // These were the API's JSON to a browser too: no controller of the page was reached.
  it('a browser gets HTML pages for an address the page does not have, a malformed one and a form too large', async () => {
    const invoice = await createInvoice({ method: 'sbp' });
    const browser = { accept: BROWSER_ACCEPT };
    for (const [path, status] of [
      ['/pay', 404],
      ['/pay/', 404],
      [`/pay/${invoice.id}/nothing`, 404],
      ['/pay/%ZZ', 400],
    ] as const) {
      const response = await page(path, browser);
      expect({ path, status: response.status }).toEqual({ path, status });
      expectHtml(response.headers);
      expectSecurityHeaders(response.headers);
      expect(response.html).not.toContain('"error"');
    }
    const tooLarge = await submit(`/pay/${invoice.id}/method`, { method: 'sbp', padding: 'x'.repeat(70 * 1024) }, { origin: gateway.baseUrl, ...browser });
    expectPage(tooLarge, 413);
    expect(tooLarge.html).toContain('Некорректный запрос');
    // A client that does not ask for HTML gets the error shape there, and the APIs always.
    const notFound = await fetch(`${gateway.baseUrl}/pay/`);
    expect({ status: notFound.status, type: notFound.headers.get('content-type') }).toEqual({ status: 404, type: 'application/json; charset=utf-8' });
    const api = await fetch(`${gateway.baseUrl}/v1/nothing`, { headers: browser });
    expect({ status: api.status, type: api.headers.get('content-type'), body: await api.json() }).toEqual({
      status: 404,
      type: 'application/json; charset=utf-8',
      body: { error: { code: 'not_found', message: expect.any(String) } },
    });
  });

  it('a page form sent as another media type (multipart, XML) is a 415 page saying to send the form, whatever Accept says; nothing recorded', async () => {
    const invoice = await createInvoice({});
    const multipart = new FormData();
    multipart.set('method', 'card');
    const bodies: [string, RequestInit][] = [
      ['multipart', { body: multipart }],
      ['xml', { body: '<method>card</method>', headers: { 'content-type': 'application/xml' } }],
    ];
    for (const accept of [undefined, '*/*', 'application/json', BROWSER_ACCEPT]) {
      for (const [kind, init] of bodies) {
        for (const form of ['method', 'sandbox']) {
          const response = await fetch(`${gateway.baseUrl}/pay/${invoice.id}/${form}`, {
            method: 'POST',
            redirect: 'manual',
            ...init,
            headers: { origin: gateway.baseUrl, ...(accept === undefined ? {} : { accept }), ...(init.headers as Record<string, string> | undefined) },
          });
          const html = plain(await response.text());
          const seen = { accept, kind, form, status: response.status, title: /<h1>([^<]*)<\/h1>/.exec(html)?.[1] };
          expect(seen).toEqual({ accept, kind, form, status: 415, title: 'Форма не принята' });
          expectPage(response, 415);
          expect(html).toContain('application/x-www-form-urlencoded');
          expect(html).toContain(`href="/pay/${invoice.id}"`);
        }
      }
    }
    expect(await json('GET', `/v1/invoices/${invoice.id}`, undefined, testKey)).toMatchObject({ body: { status: 'created', method: null } });
    // A body over 64 KB is not read as anyone's form: the error shape for a client that does not ask for HTML (the page for a browser: above).
    const tooLarge = await submit(`/pay/${invoice.id}/method`, { method: 'sbp', padding: 'x'.repeat(70 * 1024) });
    expect({ status: tooLarge.status, type: tooLarge.headers.get('content-type') }).toEqual({ status: 413, type: 'application/json; charset=utf-8' });
  });

  it('a wrong method or a trailing slash under an invoice\'s address is a 405 (with Allow) or 404 page, not "Счёт не найден"', async () => {
    const invoice = await createInvoice({ method: 'sbp' });
    const browser = { accept: BROWSER_ACCEPT };
    const cases = [
      ['GET', `/pay/${invoice.id}/method`, 405, 'POST'],
      ['GET', `/pay/${invoice.id}/sandbox`, 405, 'POST'],
      ['PUT', `/pay/${invoice.id}/method`, 405, 'POST'],
      ['POST', `/pay/${invoice.id}`, 405, 'GET, HEAD'],
      ['DELETE', `/pay/${invoice.id}`, 405, 'GET, HEAD'],
      ['GET', `/pay/${invoice.id}/`, 404, null],
      ['GET', `/pay/${invoice.id}/method/`, 404, null],
    ] as const;
    for (const [method, path, status, allow] of cases) {
      const response = await fetch(`${gateway.baseUrl}${path}`, {
        method,
        redirect: 'manual',
        headers: { ...browser, origin: gateway.baseUrl, ...(method === 'GET' ? {} : { 'content-type': 'application/x-www-form-urlencoded' }) },
        body: method === 'GET' ? undefined : 'method=sbp',
      });
      const html = plain(await response.text());
      expect({ method, path, status: response.status, allow: response.headers.get('allow') }).toEqual({ method, path, status, allow });
      expectHtml(response.headers);
      expectSecurityHeaders(response.headers);
      expect(html).not.toContain('Счёт не найден');
      expect(html).toContain(status === 405 ? '<h1>Запрос не поддерживается</h1>' : '<h1>Страница не найдена</h1>');
      expect(html).toContain(`href="/pay/${invoice.id}"`);
    }
    // What Allow names is taken; the invoice was left as it was.
    expect((await fetch(`${gateway.baseUrl}/pay/${invoice.id}`, { method: 'HEAD', headers: browser })).status).toBe(200);
    expect(await invoiceStatus(invoice.id)).toBe('created');
    // An unknown invoice keeps its page.
    const unknown = await page(`/pay/${randomUUID()}`, browser);
    expect(unknown.status).toBe(404);
    expect(unknown.html).toContain('Счёт не найден');
  });

  it('escapes every merchant-supplied string', async () => {
    const invoice = await createInvoice({
      method: 'sbp',
      orderId: `<b>${randomUUID()}</b>`,
      description: '<script>alert("x")</script> & \'quotes\'',
      successUrl: 'https://shop.example/ok?q="><script>alert(1)</script>',
    });
    const shown = await page(`/pay/${invoice.id}`);
    expect(shown.html).not.toContain('<script');
    expect(shown.html).not.toContain('<b>');
    expect(shown.html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quotes&#39;');
    expect(shown.html).toContain('&lt;b&gt;');
    const paid = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid', ...(await shownTerms(invoice.id)) });
    expect(paid.status).toBe(303);
    expect(paid.location).toBe('https://shop.example/ok?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E');
    const done = await page(`/pay/${invoice.id}`);
    expect(done.html).not.toContain('<script');
    expect(done.html).toContain('href="https://shop.example/ok?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E"');
  });

  describe('cross-site requests (CSRF)', () => {
    const ELSEWHERE = { origin: 'https://evil.example' };

    async function expectRefusedForm(reply: { status: number; headers: Headers; html: string }, invoiceId: string): Promise<void> {
      expectPage(reply, 403);
      expect(reply.html).toContain('<h1>Запрос отклонён</h1>');
      expect(reply.html).toContain('не со страницы счёта');
      expect(reply.html).toContain(`href="/pay/${invoiceId}"`);
    }

    it("a form POST from another site's page (its Origin, no form token) is refused with a 403 page that says why; nothing is recorded", async () => {
      const open = await createInvoice({});
      await expectRefusedForm(await submit(`/pay/${open.id}/method`, { method: 'sbp' }, ELSEWHERE), open.id);
      const fixed = await createInvoice({ method: 'card' });
      await expectRefusedForm(await submit(`/pay/${fixed.id}/sandbox`, { outcome: 'paid' }, ELSEWHERE), fixed.id);
      await expectRefusedForm(await submit(`/pay/${fixed.id}/sandbox`, { outcome: 'failed' }, ELSEWHERE), fixed.id);
      expect(await invoiceStatus(open.id)).toBe('created');
      expect((await json('GET', `/v1/invoices/${open.id}`, undefined, testKey)).body.method).toBeNull();
      expect(await invoiceStatus(fixed.id)).toBe('created');
    });

    it('without a token: no Origin and no Referer, Origin "null", or another site\'s Referer are refused; the Referer of the gateway itself is accepted', async () => {
      const invoice = await createInvoice({ method: 'sbp' });
      await expectRefusedForm(await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' }, {}), invoice.id);
      await expectRefusedForm(await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' }, { origin: 'null' }), invoice.id);
      await expectRefusedForm(await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' }, { referer: 'https://evil.example/pay' }), invoice.id);
      await expectRefusedForm(await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' }, { origin: `${gateway.baseUrl}.evil.example` }), invoice.id);
      // The gateway's host under the other scheme (served over http here) is another origin.
      await expectRefusedForm(
        await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid' }, { origin: gateway.baseUrl.replace('http:', 'https:') }),
        invoice.id,
      );
      expect(await invoiceStatus(invoice.id)).toBe('created');
      const viaReferer = await submit(
        `/pay/${invoice.id}/sandbox`,
        { outcome: 'paid', ...(await shownTerms(invoice.id)) },
        { referer: `${gateway.baseUrl}/pay/${invoice.id}` },
      );
      expect(viaReferer.status).toBe(303);
      expect(await invoiceStatus(invoice.id)).toBe('paid');
    });

    it('the form token of a rendering of the page is accepted, also with Origin "null" (what a browser sends under no-referrer)', async () => {
      const invoice = await createInvoice({});
      const chosen = await submit(`/pay/${invoice.id}/method`, { method: 'card', formToken: await formTokenOf(invoice.id) }, { origin: 'null' });
      expect(chosen.status).toBe(303);
      // Every rendering has a token of its own.
      const first = await formTokenOf(invoice.id);
      const second = await formTokenOf(invoice.id);
      expect(first).not.toBe(second);
      const paid = await submit(`/pay/${invoice.id}/sandbox`, { outcome: 'paid', formToken: first, ...(await shownTerms(invoice.id)) }, {});
      expect(paid.status).toBe(303);
      expect(await invoiceStatus(invoice.id)).toBe('paid');
    });

    it("another invoice's token, an altered token, or one older than a day is refused", async () => {
      const a = await createInvoice({ method: 'sbp' });
      const b = await createInvoice({ method: 'sbp', expire: 1440 });
      const tokenOfA = await formTokenOf(a.id);
      await expectRefusedForm(await submit(`/pay/${b.id}/sandbox`, { outcome: 'paid', formToken: tokenOfA }, ELSEWHERE), b.id);
      const tokenOfB = await formTokenOf(b.id);
      const [issuedAt, nonce, mac] = tokenOfB.split('.') as [string, string, string];
      const altered = [
        `${Number(issuedAt) + 1}.${nonce}.${mac}`,
        `${issuedAt}.${nonce.slice(0, -1)}${nonce.endsWith('A') ? 'B' : 'A'}.${mac}`,
        // The first character of the MAC (its last one may carry padding bits only).
        `${issuedAt}.${nonce}.${mac.startsWith('A') ? 'B' : 'A'}${mac.slice(1)}`,
        `${issuedAt}.${nonce}`,
        'garbage',
      ];
      for (const formToken of altered) await expectRefusedForm(await submit(`/pay/${b.id}/sandbox`, { outcome: 'paid', formToken }, ELSEWHERE), b.id);
      expect(await invoiceStatus(b.id)).toBe('created');

      // A day later (on the clock) the page's token is refused (the invoice has expired by then too).
      const advanced = await json('POST', '/admin/v1/clock/advance', { seconds: 86_401 }, ADMIN_TOKEN);
      expect(advanced.status).toBe(200);
      await expectRefusedForm(await submit(`/pay/${b.id}/sandbox`, { outcome: 'paid', formToken: tokenOfB }, ELSEWHERE), b.id);
    });
  });

  it('sends the security headers on the page', async () => {
    const invoice = await createInvoice({});
    const shown = await page(`/pay/${invoice.id}`);
    expectSecurityHeaders(shown.headers);
    expect(shown.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('shows an invoice past its lifetime as expired (by the gateway clock) and refuses method choice and payment', async () => {
    const withMethod = await createInvoice({ method: 'sbp', expire: 1, failUrl: 'https://shop.example/again' });
    const withoutMethod = await createInvoice({ expire: 1 });
    expect((await page(`/pay/${withMethod.id}`)).html).toContain('>Оплатить</button>');

    const advanced = await json('POST', '/admin/v1/clock/advance', { seconds: 61 }, ADMIN_TOKEN);
    expect(advanced.status).toBe(200);

    for (const invoice of [withMethod, withoutMethod]) {
      const shown = await page(`/pay/${invoice.id}`);
      expect(shown.status).toBe(200);
      expect(shown.html).toContain('<h1>Срок оплаты истёк</h1>');
      expect(shown.html).not.toContain('<form');
      // Nothing is left to pay: no "to pay" total, and no range of fees for a method never chosen.
      expect(shown.html).not.toContain('Итого к оплате');
    }
    expect((await page(`/pay/${withoutMethod.id}`)).html).not.toContain('Сервисный сбор');
    expect((await page(`/pay/${withMethod.id}`)).html).toContain('href="https://shop.example/again"');

    const pay = await submit(`/pay/${withMethod.id}/sandbox`, { outcome: 'paid' });
    expect(pay.status).toBe(409);
    expectHtml(pay.headers);
    expect(pay.html).toContain('Срок оплаты истёк');
    const choose = await submit(`/pay/${withoutMethod.id}/method`, { method: 'sbp' });
    expect(choose.status).toBe(409);
    expect(choose.html).toContain('Срок оплаты истёк');

    expect(['pending', 'created', 'expired']).toContain(await invoiceStatus(withMethod.id));
    expect(['created', 'expired']).toContain(await invoiceStatus(withoutMethod.id));
  });
});

describe('payment page rendering (pure)', () => {
  const created: InvoiceCreatedData = {
    invoiceId: '0b6f3c1e-8d2a-4c59-9a3e-5f1d2c3b4a59',
    projectId: 'p',
    accountId: 'a',
    mode: 'test',
    orderId: 'A-1',
    amount: 150_000,
    method: null,
    methodRates: { sbp: 15_000, card: 30_000 },
    customerFee: { kind: 'pct', pct: 10_000 },
    amounts: { feePct: 30_000, feeAmount: 4_500, customerFeePct: 10_000, customerFeeAmount: 1_500, payableAmount: 151_500, netAmount: 147_000 },
    description: null,
    customer: {},
    customFields: null,
    successUrl: 'javascript:alert(1)',
    failUrl: null,
    createdAt: '2026-03-01T09:00:00.000Z',
    expiresAt: '2026-03-01T10:00:00.000Z',
  };
  const folded = evolveInvoice(evolveInvoice(initialInvoice(), { type: 'InvoiceCreated', data: created }), {
    type: 'InvoiceMethodChosen',
    data: {
      invoiceId: created.invoiceId,
      method: 'sbp',
      amounts: { feePct: 15_000, feeAmount: 2_250, customerFeePct: 10_000, customerFeeAmount: 1_500, payableAmount: 151_500, netAmount: 149_250 },
      at: '2026-03-01T09:10:00.000Z',
    },
  });
  if (folded.status !== 'pending') throw new Error(`expected a pending invoice, got ${folded.status}`);
  const open: OpenInvoice = folded;
  const paidOn = (at: string): PaidInvoice => ({
    ...open,
    status: 'paid',
    method: 'sbp',
    paidAt: at,
    availableAt: null,
    refundedAmount: 0,
    refundPendingAmount: 0,
    refunds: PersistentMap.empty(),
    refundsRefused: 0,
  });

  it('an open invoice past expiresAt but not yet marked expired shows as expired, with no forms', () => {
    expect(open.status).toBe('pending');
    expect(invoiceStatusAt(open, '2026-03-01T09:59:59.999Z')).toBe('pending');
    expect(invoiceStatusAt(open, '2026-03-01T10:00:00.000Z')).toBe('expired');
    const before = renderInvoicePage(open, new Date('2026-03-01T09:30:00.000Z'));
    expect(before).toContain('>Оплатить</button>');
    expect(plain(before).replace(/<[^>]+>/g, '')).toContain('Оплатить до1 марта 2026, 13:00 (МСК)');
    const after = renderInvoicePage(open, new Date('2026-03-01T10:00:01.000Z'));
    expect(after).toContain('<h1>Срок оплаты истёк</h1>');
    expect(after).not.toContain('<form');
  });

  it('a fee range whose cheapest method is free reads "до", not "от 0,00 ₽"', () => {
    const choice = evolveInvoice(initialInvoice(), { type: 'InvoiceCreated', data: { ...created, methodRates: { sbp: 0, card: 30_000 } } });
    if (choice.status !== 'created') throw new Error(`expected a created invoice, got ${choice.status}`);
    const html = plain(renderInvoicePage(choice, new Date('2026-03-01T09:30:00.000Z')));
    expect(html).toContain('<dt>Сервисный сбор</dt><dd><span class="nw">до 15,00 ₽</span></dd>');
    expect(html).toContain('<span class="nw">от 1 500,00 ₽</span> <span class="nw">до 1 515,00 ₽</span>');
  });

  it('formats rubles exactly and links only to http(s) URLs', () => {
    expect(plain(formatRubles(123_456_789))).toBe('1 234 567,89 ₽');
    expect(plain(formatRubles(5))).toBe('0,05 ₽');
    expect([100_00, 1_030_00, 123_456_00, -1_234_567_00].map((k) => plain(formatRubles(k)))).toEqual([
      '100,00 ₽',
      '1 030,00 ₽',
      '123 456,00 ₽',
      '-1 234 567,00 ₽',
    ]);
    expect(safeHttpUrl('javascript:alert(1)')).toBeNull();
    expect(safeHttpUrl('data:text/html,hi')).toBeNull();
    expect(safeHttpUrl('/relative')).toBeNull();
    expect(safeHttpUrl('https://shop.example/ok')).toBe('https://shop.example/ok');
    const paidState = evolveInvoice(open, {
      type: 'InvoicePaid',
      data: {
        invoiceId: created.invoiceId,
        accountId: 'a',
        mode: 'test',
        method: 'sbp',
        paidAt: '2026-03-01T09:20:00.000Z',
        availableAt: null,
        netAmount: 149_250,
        feeAmount: 2_250,
      },
    });
    if (paidState.status !== 'paid') throw new Error(`expected a paid invoice, got ${paidState.status}`);
    const paid = renderInvoicePage(paidState, new Date('2026-03-01T09:21:00.000Z'));
    expect(paid).toContain('<h1>Оплачено</h1>');
    expect(paid).not.toContain('javascript:');
    expect(plain(paid)).toContain('Заказ № A-1');
  });

  it('has a clear page for refunded and partially refunded invoices, saying how much went back (the order amount at most, not the fee)', () => {
    const now = new Date('2026-03-02T00:00:00.000Z');
    const refunded = plain(renderInvoicePage({ ...paidOn('2026-03-01T09:20:00.000Z'), status: 'refunded', refundedAmount: 150_000 }, now));
    expect(refunded).toContain('<h1>Платёж возвращён</h1>');
    expect(refunded).toContain('<dt class="total">Итого</dt><dd class="total">1 515,00 ₽</dd>');
    expect(refunded).toContain('<dt>Возвращено покупателю</dt><dd>1 500,00 ₽</dd>');
    expect(refunded).not.toContain('полностью');
    const partly = plain(renderInvoicePage({ ...paidOn('2026-03-01T09:20:00.000Z'), status: 'partially_refunded', refundedAmount: 30_000 }, now));
    expect(partly).toContain('<h1>Платёж частично возвращён</h1>');
    expect(partly).toContain('<dt>Возвращено покупателю</dt><dd>300,00 ₽</dd>');
  });
});
