/**
 * The operator console at /admin over HTTP, against the compiled gateway (API +
 * projector) and a second API process on the same database: login and session
 * cookie, sessions in PostgreSQL (the second process accepts them, logout and the
 * manual clock end them), the security headers of every page, CSRF form tokens,
 * escaping of merchant strings, 404/400 pages, and a webhook resend.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { ADMIN_TOKEN, Json, Merchant, Operator, expectStatus, poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';
import { CONSOLE_SECURITY_HEADERS, cookieOf, formTokenOf, login, request } from './console-fixture';

const HOSTILE_NAME = `<script>alert("x")</script> & 'Ромашка' <img src=x onerror=alert(1)>`;
/** The second API process refuses logins past this many failures per address. */
/** AUTH_FAILURE_LIMIT_PER_ADDRESS's default. */
const LOGIN_FAILURE_LIMIT = 20;

describe('operator console at /admin (HTTP)', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let second: RunningGateway;
  let receiver: WebhookReceiver;
  let operator: Operator;
  let merchant: Merchant;
  let invoiceId: string;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    receiver = await startWebhookReceiver();
    // CLOCK=manual: the console's times and the sessions' expiry are moved by the test. TRUSTED_PROXIES: the login
    // limit per client address (X-Forwarded-For) and the Secure cookie behind https are tested as behind a proxy.
    // WEBHOOK_ALLOW_PRIVATE_NETWORKS: the receiver listens on 127.0.0.1.
    const env = { DATABASE_URL: db.url, ADMIN_TOKEN, CLOCK: 'manual', TRUSTED_PROXIES: '127.0.0.1', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
    gateway = await startGateway('gateway', env);
    second = await startGateway('api', env);
    operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    const accountId = await operator.createAccount(HOSTILE_NAME);
    merchant = await operator.merchant({ name: `Проект "${HOSTILE_NAME}"`, holdHours: 0, webhookUrl: receiver.url } as never, accountId);
    const created = await merchant.test.post('/v1/invoices', { amount: '1000.00', orderId: `console-${randomUUID()}`, method: 'sbp' });
    expectStatus(created, 201);
    invoiceId = created.body.id;
    expectStatus(await operator.payment(invoiceId, 'paid'), 200);
    await receiver.waitFor((r) => r.some((w) => w.headers['x-service-event'] === 'invoice.paid'), 'the invoice.paid webhook');
    await poll(deliveries, (items) => items.length > 0 && items.every((d) => d.status === 'delivered'), 'every delivery delivered');
  });
  afterAll(async () => {
    await second?.kill();
    await gateway?.kill();
    await receiver?.close();
    await db?.drop();
  });

  const get = (path: string, cookie?: string | null) => request(gateway.baseUrl, 'GET', path, { cookie });
  async function deliveries(): Promise<Json[]> {
    const r = await operator.http.get(`/admin/v1/webhook-deliveries?projectId=${merchant.projectId}`);
    expectStatus(r, 200);
    return r.body.items;
  }
  const accountPage = (mode = 'test') => `/admin/accounts/${merchant.accountId}?mode=${mode}`;

  it('without a session every page answers 303 to /admin/login (and a POST does nothing)', async () => {
    for (const path of ['/admin', '/admin/system', accountPage(), `/admin/accounts/${randomUUID()}`, '/admin?after=bogus']) {
      const page = await get(path);
      expect({ path, status: page.status, location: page.location }).toEqual({ path, status: 303, location: '/admin/login' });
    }
    const [delivery] = await deliveries();
    const post = await request(gateway.baseUrl, 'POST', `/admin/webhook-deliveries/${delivery.id}/resend`, { form: { formToken: 'x' } });
    expect([post.status, post.location]).toEqual([303, '/admin/login']);
    // A cookie that is no session (well-formed or not) is none either.
    for (const cookie of [`operator_session=${'A'.repeat(43)}`, 'operator_session=garbage', 'other=1']) {
      expect((await get('/admin', cookie)).status).toBe(303);
    }
  });

  it('login: a wrong token → the form again with 401 and a Russian message, no cookie; the right one → 303 to /admin with the session cookie', async () => {
    const form = await get('/admin/login');
    expect(form.status).toBe(200);
    expect(form.html).toContain('<form method="post" action="/admin/login">');

    for (const token of ['wrong-token', '', ADMIN_TOKEN.slice(0, -1)]) {
      const wrong = await request(gateway.baseUrl, 'POST', '/admin/login', { form: { token } });
      expect(wrong.status).toBe(401);
      expect(wrong.setCookie).toBeNull();
      expect(wrong.html).toContain('Неверный токен оператора');
      expect(wrong.html).toContain('<form method="post" action="/admin/login">');
    }
    const missing = await request(gateway.baseUrl, 'POST', '/admin/login', { form: {} });
    expect(missing.status).toBe(401);

    const right = await request(gateway.baseUrl, 'POST', '/admin/login', { form: { token: ADMIN_TOKEN } });
    expect(right.status).toBe(303);
    expect(right.location).toBe('/admin');
    const attributes = right.setCookie!.split(';').map((a) => a.trim());
    expect(attributes[0]).toMatch(/^operator_session=[A-Za-z0-9_-]{43}$/);
    expect(attributes).toEqual(expect.arrayContaining(['Path=/admin', 'HttpOnly', 'SameSite=Strict']));
    // Served over plain http: not Secure (the browser would not send it back).
    expect(attributes).not.toContain('Secure');
    const merchants = await get('/admin', cookieOf(right.setCookie));
    expect(merchants.status).toBe(200);
  });

  it('a token pasted with spaces, tabs or newlines around it logs in and is no failure of the address; one with a space inside is wrong', async () => {
    const address = { 'x-forwarded-for': '203.0.113.78' };
    for (let i = 0; i < LOGIN_FAILURE_LIMIT + 1; i += 1) {
      const token = [` ${ADMIN_TOKEN}`, `${ADMIN_TOKEN} `, `\t${ADMIN_TOKEN}\r\n`, `\n ${ADMIN_TOKEN} \n`][i % 4]!;
      const padded = await request(second.baseUrl, 'POST', '/admin/login', { form: { token }, headers: address });
      expect({ token, status: padded.status, location: padded.location }).toEqual({ token, status: 303, location: '/admin' });
      expect(padded.setCookie).toMatch(/^operator_session=/);
    }
    // Past the limit's count of padded logins, a wrong token is still a first failure (401), not a 429.
    const inside = await request(second.baseUrl, 'POST', '/admin/login', {
      form: { token: `${ADMIN_TOKEN.slice(0, 8)} ${ADMIN_TOKEN.slice(8)}` },
      headers: address,
    });
    expect(inside.status).toBe(401);
  });

  it('a token holding a long run of spaces inside is answered 401 without holding the process (review 67)', async () => {
    // A trimming regex took quadratic time on it: 5 s of the event loop per 64 KiB login, no session needed.
    // Measured as the process's CPU (user + system, /proc), not as time on the wall: six such logins took 18–30 s
    // of it, a trim takes milliseconds; the bound is far from both.
    const cpuSeconds = () => {
      const stat = readFileSync(`/proc/${second.child.pid}/stat`, 'utf8');
      // Past the command's name in brackets (which may hold ") "): from field 3, state; utime and stime are fields 14 and 15.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) / 100;
    };
    const before = cpuSeconds();
    const token = `a${' '.repeat(65_000)}a`;
    for (let i = 0; i < 6; i += 1) {
      const answer = await request(second.baseUrl, 'POST', '/admin/login', { form: { token }, headers: { 'x-forwarded-for': '203.0.113.79' } });
      expect(answer.status).toBe(401);
    }
    expect(cpuSeconds() - before).toBeLessThan(3);
  });

  it('the cookie is Secure when the request came over https (X-Forwarded-Proto from a trusted proxy, TRUSTED_PROXIES)', async () => {
    const viaProxy = await request(gateway.baseUrl, 'POST', '/admin/login', { form: { token: ADMIN_TOKEN }, headers: { 'x-forwarded-proto': 'https' } });
    expect(viaProxy.status).toBe(303);
    expect(viaProxy.setCookie!.split(';').map((a) => a.trim())).toContain('Secure');
  });

  it('every console page carries the strict CSP and the security headers, and no script', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const [delivery] = await deliveries();
    const pages = [
      await get('/admin/login'),
      await get('/admin', cookie),
      await get(accountPage(), cookie),
      await get('/admin/system', cookie),
      await get(`/admin/accounts/${randomUUID()}`, cookie),
      await get(`${accountPage()}&entriesAfter=x`, cookie),
      await request(gateway.baseUrl, 'POST', '/admin/login', { form: { token: 'wrong' } }),
      await request(gateway.baseUrl, 'POST', `/admin/webhook-deliveries/${delivery.id}/resend`, { cookie, form: {} }),
      await get('/admin'),
    ];
    for (const page of pages) {
      for (const [name, value] of Object.entries(CONSOLE_SECURITY_HEADERS)) expect({ name, value: page.headers.get(name) }).toEqual({ name, value });
      expect(page.html).not.toMatch(/<script/i);
    }
    const css = await get('/admin/console.css');
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(css.headers.get('x-content-type-options')).toBe('nosniff');
    expect(pages[1]!.html).toContain('<link rel="stylesheet" href="/admin/console.css">');
  });

  it('a hostile merchant name is escaped on every page it shows on', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const escaped = '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;Ромашка&#39; &lt;img src=x onerror=alert(1)&gt;';
    for (const path of ['/admin', accountPage(), accountPage('live')]) {
      const page = await get(path, cookie);
      expect(page.status).toBe(200);
      expect(page.html).toContain(escaped);
      expect(page.html).not.toContain('<script');
      expect(page.html).not.toContain('<img');
      expect(page.html).not.toContain(`"${HOSTILE_NAME}"`);
    }
  });

  it("each webhook attempt shows the receiver's reply: escaped, its first 200 characters, a bidi override as a visible \\u202E", async () => {
    const failing = await startWebhookReceiver();
    const prefix = '<b>boom</b> & "x" \u202Eevil ';
    failing.answer = () => ({ status: 500, body: `${prefix}${'я'.repeat(300)}` });
    try {
      const shop = await operator.merchant({ name: 'Получатель отвечает 500', holdHours: 0, webhookUrl: failing.url } as never);
      const created = await shop.test.post('/v1/invoices', { amount: '10.00', orderId: `reply-${randomUUID()}`, method: 'sbp' });
      expectStatus(created, 201);
      expectStatus(await operator.payment(created.body.id, 'paid'), 200);
      const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
      const page = await poll(
        () => get(`/admin/accounts/${shop.accountId}?mode=test`, cookie),
        (p) => p.html.includes('HTTP 500'),
        'the failed attempt on the merchant page',
      );
      const shown = `&lt;b&gt;boom&lt;/b&gt; &amp; &quot;x&quot; \\u202Eevil ${'я'.repeat(200 - [...prefix].length)}…`;
      expect(page.html).toContain(`<div class="small muted">ответ: <bdi class="given">${shown}</bdi></div>`);
      expect(page.html).not.toContain('\u202E');
      expect(page.html).not.toContain('<b>boom');
    } finally {
      await failing.close();
    }
  });

  it('the merchant page: balances, the plot (three series from the log), volumes per UTC day, ledger entries with postings', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const page = await poll(
      () => get(accountPage(), cookie),
      (p) => p.status === 200 && p.html.includes('payment_recorded') && p.html.includes('data-series="pending"'),
      'the payment in the ledger (read model) and the log',
    );
    const paths = [...page.html.matchAll(/<path class="series" data-series="(\w+)"/g)].map((m) => m[1]);
    expect(paths).toEqual(['pending', 'available', 'reserved']);
    const volumes = /<table class="volumes">.*?<\/table>/s.exec(page.html)?.[0] ?? '';
    expect(volumes).toMatch(/<td>\d{4}-\d{2}-\d{2}<\/td><td class="num">1<\/td>/);
    expect(page.html).toContain(`payment:${invoiceId}`);
    expect(page.html).toContain('acquiring_clearing');
    // The balances are current (the read model and the log's entries past it), and the page says so.
    expect(page.html).toContain('Текущие: модель чтения ledger_balances и записи журнала, которые она ещё не учла');
    expect(page.html).not.toContain('Из модели чтения');
    // The live ledger has no entries: an empty plot, not an error.
    const live = await get(accountPage('live'), cookie);
    expect(live.status).toBe(200);
    expect(live.html).toContain('Проводок нет');
    // A page of entries after the last one: none, with a link back to the start.
    const after = await get(`${accountPage()}&entriesAfter=999`, cookie);
    expect(after.status).toBe(200);
    expect(after.html).toContain('К началу журнала');
  });

  it('ledger entries come 25 a page with a cursor link to the next page; merchants 50 a page with a link to the next page', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const busy = await operator.merchant({ name: 'Много оплат', holdHours: 0 });
    for (let i = 0; i < 27; i += 1) {
      const created = await busy.test.post('/v1/invoices', { amount: `${10 + i}.00`, orderId: `page-${randomUUID()}`, method: 'sbp' });
      expectStatus(created, 201);
      expectStatus(await operator.payment(created.body.id, 'paid'), 200);
    }
    const seqs = (html: string) => [...html.matchAll(/<tr><td class="num">(\d+)<\/td><td><time/g)].map((m) => Number(m[1]));
    const first = await poll(
      () => get(`/admin/accounts/${busy.accountId}?mode=test`, cookie),
      (p) => p.html.includes('Следующие проводки') && /\(27 проводок/.test(p.html),
      'the 27 entries in the ledger read model and the log',
    );
    expect(seqs(first.html)).toEqual(Array.from({ length: 25 }, (_, i) => i));
    const next = /<a class="next-entries" href="([^"]+)">/.exec(first.html)![1]!.replace(/&amp;/g, '&');
    expect(next).toBe(`/admin/accounts/${busy.accountId}?mode=test&entriesAfter=24#ledger`);
    // The count above is folded from the log; the entries are the ledger read model's,
    // which may still be applying the last entry.
    const second = await poll(
      () => get(next.replace(/#.*$/, ''), cookie),
      (p) => seqs(p.html).length >= 2,
      'the last entries in the ledger read model',
    );
    expect(seqs(second.html)).toEqual([25, 26]);
    expect(second.html).not.toContain('Следующие проводки');
    expect(second.html).toContain('К началу журнала');

    // Merchants: at least 51 accounts make two pages, without overlap.
    for (let i = 0; i < 50; i += 1) await operator.createAccount(`Аккаунт ${i}`);
    const accountsOf = (html: string) => [...html.matchAll(/<tr data-account="([^"]+)">/g)].map((m) => m[1]);
    const page1 = await get('/admin', cookie);
    expect(accountsOf(page1.html)).toHaveLength(50);
    const nextPage = /<a href="(\/admin\?after=[^"]+)">Следующая страница/.exec(page1.html)![1]!;
    const page2 = await get(nextPage, cookie);
    expect(page2.status).toBe(200);
    const rest = accountsOf(page2.html);
    expect(rest.length).toBeGreaterThan(0);
    expect(rest.filter((id) => accountsOf(page1.html).includes(id))).toEqual([]);
  });

  it('unknown account → 404 page; bad query values → 400 page; never a 500', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    for (const path of [`/admin/accounts/${randomUUID()}`, '/admin/accounts/not-a-uuid', `/admin/accounts/${'9'.repeat(1000)}`]) {
      const page = await get(path, cookie);
      expect({ path, status: page.status }).toEqual({ path, status: 404 });
      expect(page.html).toContain('Такого аккаунта нет');
    }
    for (const path of [
      `${accountPage()}&mode=bogus`.replace('mode=test&', ''),
      `/admin/accounts/${merchant.accountId}?mode=TEST`,
      `${accountPage()}&entriesAfter=-1`,
      `${accountPage()}&entriesAfter=1e3`,
      `${accountPage()}&entriesAfter=99999999999999999999`,
      `/admin/accounts/${merchant.accountId}?mode=test&mode=live`,
      '/admin?after=not-a-uuid',
      `/admin?after=${randomUUID()}`,
      '/admin?after=a&after=b',
    ]) {
      const page = await get(path, cookie);
      expect({ path, status: page.status }).toEqual({ path, status: 400 });
      expect(page.html).toContain('Некорректный запрос');
    }
  });

  it('a query parameter an address does not take (mistyped, bracketed) → a 400 page naming it and what the address takes; nothing done', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const account = `/admin/accounts/${merchant.accountId}`;
    const takesNothing = 'он не принимает параметров.';
    for (const [path, named, takes] of [
      [`${account}?Mode=TEST`, 'Mode', 'он принимает только mode (test или live), entriesAfter'],
      [`${account}?mode[]=test`, 'mode[]', 'он принимает только mode (test или live), entriesAfter'],
      [`${account}?mode=test&entriesafter=24`, 'entriesafter', 'он принимает только mode (test или live), entriesAfter'],
      ['/admin?foo=1', 'foo', 'он принимает только after (идентификатор аккаунта'],
      ['/admin?After=x', 'After', 'он принимает только after'],
      ['/admin/system?mode=test', 'mode', takesNothing],
      [`${account}?\u202Eevil=1`, '\\u202Eevil', 'он принимает только mode'],
    ] as const) {
      const page = await get(path, cookie);
      expect({ path, status: page.status }).toEqual({ path, status: 400 });
      expect(page.html).toContain('Некорректный запрос');
      expect(page.html).toContain(`Параметра «${named}» у этого адреса нет: ${takes}`);
    }
    const login400 = await get('/admin/login?next=/admin');
    expect([login400.status, login400.html.includes(`Параметра «next» у этого адреса нет: ${takesNothing}`)]).toEqual([400, true]);
    // A POST with one does nothing: the session stays open.
    const token = formTokenOf((await get('/admin', cookie)).html);
    const logout = await request(gateway.baseUrl, 'POST', '/admin/logout?x=1', { cookie, form: { formToken: token } });
    expect([logout.status, logout.setCookie]).toEqual([400, null]);
    expect((await get('/admin', cookie)).status).toBe(200);
  });

  // These were the API's JSON to a browser too: no controller of the console was reached.
  it('an address the console does not have, or a malformed one → an HTML page to a browser; the operator API keeps the error shape', async () => {
    const browser = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
    for (const [path, status] of [
      ['/admin/nothing', 404],
      ['/admin/accounts', 404],
      ['/admin/%ZZ', 400],
    ] as const) {
      const page = await request(gateway.baseUrl, 'GET', path, { headers: browser });
      expect({ path, status: page.status, type: page.headers.get('content-type') }).toEqual({ path, status, type: 'text/html; charset=utf-8' });
      expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(page.html).not.toContain('"error"');
      expect(page.html).not.toContain('в API');
    }
    // A form posted in another encoding is told how a console form is sent, not to send JSON.
    const multipart = new FormData();
    multipart.set('token', ADMIN_TOKEN);
    const posted = await fetch(`${gateway.baseUrl}/admin/login`, { method: 'POST', headers: browser, body: multipart, redirect: 'manual' });
    expect(posted.status).toBe(415);
    const text = await posted.text();
    expect(text).toContain('application/x-www-form-urlencoded');
    expect(text).not.toContain('application/json');
    const api = await request(gateway.baseUrl, 'GET', '/admin/v1/nothing', { headers: browser });
    expect({ status: api.status, type: api.headers.get('content-type') }).toEqual({ status: 404, type: 'application/json; charset=utf-8' });
    expect(JSON.parse(api.html)).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });

  it('a console address called with a method it does not take → 405 with Allow for a browser too, a page saying so, not «no such page»', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const browser = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
    for (const [method, path, allow] of [
      ['GET', '/admin/logout', 'POST'],
      ['PUT', '/admin', 'GET, HEAD'],
    ] as const) {
      const page = await fetch(`${gateway.baseUrl}${path}`, { method, headers: { ...browser, cookie }, redirect: 'manual' });
      const html = await page.text();
      expect({ method, path, status: page.status, allow: page.headers.get('allow'), type: page.headers.get('content-type') }).toEqual({
        method,
        path,
        status: 405,
        allow,
        type: 'text/html; charset=utf-8',
      });
      expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(html).toContain('Метод не поддерживается');
      expect(html).toContain(`Запрос ${method} по этому адресу консоли не используется: он принимает только ${allow}.`);
      expect(html).not.toContain('Такой страницы в консоли нет');
      // Without text/html: the API's 405 with the same Allow.
      const api = await fetch(`${gateway.baseUrl}${path}`, { method, headers: { cookie }, redirect: 'manual' });
      expect({ status: api.status, allow: api.headers.get('allow') }).toEqual({ status: 405, allow });
      expect(((await api.json()) as Json).error.code).toBe('method_not_allowed');
    }
    // The session was not ended by the GET of the logout address.
    expect((await get('/admin', cookie)).status).toBe(200);
  });

  it("a browser's request no console route takes is its 404 or 405 page whatever its body: not 400 for JSON that does not parse, not 415 for its type", async () => {
    const browser = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
    for (const [method, path, type, body, status, allow] of [
      ['PUT', '/admin', 'application/json', '{bad', 405, 'GET, HEAD'],
      ['POST', '/admin/nothing', 'application/json', '{bad', 404, null],
      ['POST', '/admin/nothing', 'application/xml', '<a/>', 404, null],
    ] as const) {
      const page = await fetch(`${gateway.baseUrl}${path}`, { method, headers: { ...browser, 'content-type': type }, body, redirect: 'manual' });
      expect({ method, path, type, status: page.status, allow: page.headers.get('allow'), html: page.headers.get('content-type') }).toEqual({
        method,
        path,
        type,
        status,
        allow,
        html: 'text/html; charset=utf-8',
      });
    }
  });

  it('a login or a resend posted as another content type, or with a repeated field, is refused without a 500 and opens nothing', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const delivery = (await deliveries())[0];
    const token = formTokenOf((await get('/admin', cookie)).html);
    for (const [path, body, type] of [
      ['/admin/login', `token=${ADMIN_TOKEN}`, 'text/plain'],
      ['/admin/login', `token=${ADMIN_TOKEN}&token=${ADMIN_TOKEN}`, 'application/x-www-form-urlencoded'],
      ['/admin/login', '%%%', 'application/x-www-form-urlencoded'],
      [`/admin/webhook-deliveries/${delivery.id}/resend`, `formToken=${token}&formToken=${token}`, 'application/x-www-form-urlencoded'],
    ] as const) {
      const response = await fetch(`${gateway.baseUrl}${path}`, { method: 'POST', headers: { cookie, 'content-type': type }, body, redirect: 'manual' });
      expect({ path, type, status: response.status < 500 && response.status !== 303 }).toEqual({ path, type, status: true });
      expect(response.headers.get('set-cookie')).toBeNull();
    }
  });

  it('the system page: projection lag per projection and the audit checkpoint (position, hash, signature)', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const page = await get('/admin/system', cookie);
    expect(page.status).toBe(200);
    for (const projection of ['ledger', 'invoices', 'payments_to_ledger', 'webhook_outbox']) expect(page.html).toContain(`<td class="mono">${projection}</td>`);
    const checkpoint = await operator.http.get('/admin/v1/audit/checkpoint');
    expectStatus(checkpoint, 200);
    expect(page.html).toMatch(/<th>Хеш \(SHA-256, цепочка\)<\/th><td class="mono">[0-9a-f]{64}<\/td>/);
    expect(page.html).toContain(`<td class="mono">${checkpoint.body.kid}</td>`);
    expect(page.html).toMatch(/<th>Подпись \(Ed25519, base64\)<\/th><td class="mono">[A-Za-z0-9+/]{86}==<\/td>/);
  });

  it('the system page shows a rebuild under way with its start formatted like every console time, marked as the real time of the database', async () => {
    // The mark `projections:rebuild` writes (rebuild_started_at, the database's now()), here on a name no projector
    // runs, with a known time, so that no read model of the other tests answers 503.
    const mark = 'console_rebuild_mark';
    await db.pool.query(`INSERT INTO projection_checkpoints (projection, rebuild_started_at) VALUES ($1, '2026-01-02T03:04:05.678Z')`, [mark]);
    try {
      const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
      const page = await poll(
        () => get('/admin/system', cookie),
        (p) => p.html.includes('Идёт пересборка'),
        'the rebuild listed',
      );
      expect(page.html).toContain('<th>С (реальное время базы данных)</th>');
      expect(page.html).toContain(`<tr><td class="mono">${mark}</td><td><time datetime="2026-01-02T03:04:05.678Z">2026-01-02 03:04:05 UTC</time></td>`);
    } finally {
      await db.pool.query('DELETE FROM projection_checkpoints WHERE projection = $1', [mark]);
    }
  });

  it('a second API process accepts the session (sessions live in PostgreSQL)', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const there = await request(second.baseUrl, 'GET', '/admin', { cookie });
    expect(there.status).toBe(200);
    expect(there.html).toContain('Мерчанты и балансы');
  });

  it('a gateway started with another ADMIN_TOKEN accepts none of the sessions opened with the old one', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const renewed = await startGateway('api', { DATABASE_URL: db.url, ADMIN_TOKEN: `${ADMIN_TOKEN}-rotated-0108` });
    try {
      const there = await request(renewed.baseUrl, 'GET', '/admin', { cookie });
      expect([there.status, there.location]).toEqual([303, '/admin/login']);
      // The old token does not open a session there either; the new one does.
      expect((await request(renewed.baseUrl, 'POST', '/admin/login', { form: { token: ADMIN_TOKEN } })).status).toBe(401);
      const fresh = await login(renewed.baseUrl, `${ADMIN_TOKEN}-rotated-0108`);
      expect((await request(renewed.baseUrl, 'GET', '/admin', { cookie: fresh })).status).toBe(200);
    } finally {
      await renewed.kill();
    }
    // The old gateway still accepts its own session.
    expect((await get('/admin', cookie)).status).toBe(200);
  });

  it('CSRF: a resend without the form token or with a wrong one → 403 page, nothing resent; with it → 303 back and a new attempt', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const page = await get(accountPage(), cookie);
    const token = formTokenOf(page.html);
    const delivery = (await deliveries()).find((d) => d.eventType === 'invoice.paid');
    expect(delivery.status).toBe('delivered');
    const attemptsBefore = delivery.attempts.length;
    const otherSession = formTokenOf((await get('/admin', await login(gateway.baseUrl, ADMIN_TOKEN))).html);
    for (const form of [
      {} as Record<string, string>,
      { formToken: '' },
      { formToken: token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A') },
      { formToken: otherSession },
    ]) {
      const refused = await request(gateway.baseUrl, 'POST', `/admin/webhook-deliveries/${delivery.id}/resend`, {
        cookie,
        form: { ...form, accountId: merchant.accountId, mode: 'test' },
      });
      expect(refused.status).toBe(403);
      expect(refused.html).toContain('Запрос отклонён');
    }
    const still = (await deliveries()).find((d) => d.id === delivery.id);
    expect({ status: still.status, attempts: still.attempts.length }).toEqual({ status: 'delivered', attempts: attemptsBefore });

    const resent = await request(gateway.baseUrl, 'POST', `/admin/webhook-deliveries/${delivery.id}/resend`, {
      cookie,
      form: { formToken: token, accountId: merchant.accountId, mode: 'test' },
    });
    expect(resent.status).toBe(303);
    expect(resent.location).toBe(`${accountPage()}#webhooks`);
    await poll(
      deliveries,
      (items) => items.find((d) => d.id === delivery.id)?.attempts.length === attemptsBefore + 1,
      'the resent delivery’s new attempt',
      20_000,
    );
    const after = await poll(
      () => get(accountPage(), cookie),
      (p) => (/<tr class="delivery"[^>]*>.*?<\/tr>/s.exec(p.html)?.[0].match(/<li class="attempt">/g) ?? []).length === attemptsBefore + 1,
      'the new attempt on the merchant page',
    );
    expect(after.status).toBe(200);
    // An unknown delivery: a 404 page.
    const unknown = await request(gateway.baseUrl, 'POST', `/admin/webhook-deliveries/${randomUUID()}/resend`, { cookie, form: { formToken: token } });
    expect(unknown.status).toBe(404);
  });

  it('a form from a page of an ended session (logout and login in another tab) → 403 telling to reload the page, nothing resent; a missing token keeps its text', async () => {
    const old = await login(gateway.baseUrl, ADMIN_TOKEN);
    const oldToken = formTokenOf((await get(accountPage(), old)).html);
    // Tab 2 logs out and in again: the browser now sends the new session's cookie from every tab.
    expect((await request(gateway.baseUrl, 'POST', '/admin/logout', { cookie: old, form: { formToken: oldToken } })).status).toBe(303);
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const delivery = (await deliveries()).find((d) => d.eventType === 'invoice.paid');
    const attemptsBefore = delivery.attempts.length;
    // Tab 1 presses «Отправить снова» on the page it still shows.
    const stale = await request(gateway.baseUrl, 'POST', `/admin/webhook-deliveries/${delivery.id}/resend`, {
      cookie,
      form: { formToken: oldToken, accountId: merchant.accountId, mode: 'test' },
    });
    expect(stale.status).toBe(403);
    expect(stale.html).toContain('Ничего не сделано: обновите страницу и повторите действие.');
    expect(stale.html).not.toContain('не со страницы консоли');
    expect(stale.html).toContain(`href="${accountPage()}"`);
    const missing = await request(gateway.baseUrl, 'POST', `/admin/webhook-deliveries/${delivery.id}/resend`, {
      cookie,
      form: { formToken: 'forged', accountId: merchant.accountId, mode: 'test' },
    });
    expect(missing.status).toBe(403);
    expect(missing.html).toContain('не со страницы консоли');
    const still = (await deliveries()).find((d) => d.id === delivery.id);
    expect(still.attempts.length).toBe(attemptsBefore);
  });

  it('logout ends the session: the old cookie then gets 303 to the login form (here and on the second process); a logout without the form token is refused', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    const token = formTokenOf((await get('/admin', cookie)).html);
    const refused = await request(gateway.baseUrl, 'POST', '/admin/logout', { cookie, form: {} });
    expect(refused.status).toBe(403);
    expect((await get('/admin', cookie)).status).toBe(200);

    const out = await request(gateway.baseUrl, 'POST', '/admin/logout', { cookie, form: { formToken: token } });
    expect([out.status, out.location]).toEqual([303, '/admin/login']);
    expect(out.setCookie).toMatch(/^operator_session=; Path=\/admin; Max-Age=0; HttpOnly; SameSite=Strict/);
    expect((await get('/admin', cookie)).location).toBe('/admin/login');
    expect((await request(second.baseUrl, 'GET', '/admin', { cookie })).location).toBe('/admin/login');
  });

  it('failed-auth limits apply to the login form: past them a wrong token is answered 429 and opens nothing; the right token still logs in', async () => {
    const forwarded = { 'x-forwarded-for': '203.0.113.77' };
    for (let i = 0; i < LOGIN_FAILURE_LIMIT; i += 1) {
      const wrong = await request(second.baseUrl, 'POST', '/admin/login', { form: { token: `wrong-${i}` }, headers: forwarded });
      expect(wrong.status).toBe(401);
    }
    const limited = await request(second.baseUrl, 'POST', '/admin/login', { form: { token: 'wrong-again' }, headers: forwarded });
    expect(limited.status).toBe(429);
    expect(limited.setCookie).toBeNull();
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.html).toContain('Слишком много');
    expect(limited.headers.get('content-security-policy')).toBe(CONSOLE_SECURITY_HEADERS['content-security-policy']);
    // The operator behind the same address: the right token is never refused.
    const right = await request(second.baseUrl, 'POST', '/admin/login', { form: { token: ADMIN_TOKEN }, headers: forwarded });
    expect(right.status).toBe(303);
    expect(right.setCookie).toMatch(/^operator_session=/);
  });

  // Last: these move the gateway clock.
  it('a session ends after 30 minutes without a request (idle), by the gateway clock', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    await operator.advance(29 * 60);
    expect((await get('/admin', cookie)).status).toBe(200);
    // The request above restarted the idle time.
    await operator.advance(29 * 60);
    expect((await get('/admin', cookie)).status).toBe(200);
    await operator.advance(30 * 60);
    const expired = await get('/admin', cookie);
    expect([expired.status, expired.location]).toEqual([303, '/admin/login']);
  });

  it('a session ends 12 hours after the login however busy (absolute lifetime)', async () => {
    const cookie = await login(gateway.baseUrl, ADMIN_TOKEN);
    let elapsed = 0;
    while (elapsed + 25 * 60 < 12 * 3600) {
      await operator.advance(25 * 60);
      elapsed += 25 * 60;
      expect({ elapsed, status: (await get('/admin', cookie)).status }).toEqual({ elapsed, status: 200 });
    }
    await operator.advance(12 * 3600 - elapsed);
    expect((await get('/admin', cookie)).location).toBe('/admin/login');
  });
});
