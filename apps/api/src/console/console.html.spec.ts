import type { BalancePoint, DailyVolume } from '#ledger';
import { AccountPage, excerpt, renderAccountPage } from './console.html';

/** A merchant page with `entries` ledger entries (each a point of the plot) and payments on `days` days. */
function accountPage(entries: number, days: number, deliveries: AccountPage['deliveries'] = []): string {
  const points: BalancePoint[] = Array.from({ length: entries }, (_, i) => ({
    at: new Date(Date.UTC(2026, 0, 1) + i * 3_600_000).toISOString(),
    entry: i + 1,
    pending: 0,
    available: (i + 1) * 100,
    reserved: 0,
  }));
  const volumes: DailyVolume[] = Array.from({ length: days }, (_, i) => ({
    day: new Date(Date.UTC(2026, 0, 1) + i * 86_400_000).toISOString().slice(0, 10),
    count: 1,
    amount: 100,
  }));
  const page: AccountPage = {
    account: { id: '3f0c5a4e-0000-4000-8000-000000000001', name: 'Книжная лавка', email: 'owner@example.com', createdAt: new Date(Date.UTC(2026, 0, 1)) },
    mode: 'test',
    projects: [],
    balances: { pending: 0, available: entries * 100, reserved: 0 },
    history: { entries, points, days: volumes },
    entries: [],
    nextEntriesAfter: null,
    entriesPaged: false,
    deliveries,
    transactions: [],
  };
  return renderAccountPage(page, { formToken: 'token', current: 'merchants' });
}

describe('the merchant page’s counts agree with their nouns (Russian plurals)', () => {
  it.each([
    [1, '(1 проводка, показано точек: 1)'],
    [3, '(3 проводки, показано точек: 3)'],
    [11, '(11 проводок, показано точек: 11)'],
    [72, '(72 проводки, показано точек: 72)'],
  ])('%i entries folded in the plot: «%s»', (entries, text) => {
    expect(accountPage(entries, 1)).toContain(text);
  });

  it('more than 31 days with payments: «Показаны последние 31 день», not «31 дней»', () => {
    expect(accountPage(1, 40)).toContain('Показаны последние 31 день с оплатами из 40.');
  });
});

describe('the merchant page’s webhook deliveries', () => {
  it('each «Отправить снова» button has a name of its own, starting with its visible label (a screen reader tells them apart)', () => {
    const delivery = (id: string, minute: number): AccountPage['deliveries'][number] => ({
      id,
      projectName: 'Магазин',
      eventType: 'invoice.paid',
      url: 'https://shop.example/hooks',
      status: 'delivered',
      isTest: true,
      createdAt: new Date(Date.UTC(2026, 0, 1, 12, minute)),
      nextAttemptAt: null,
      attempts: [],
    });
    const html = accountPage(1, 1, [delivery('0b1e2c3d-0000-4000-8000-000000000001', 0), delivery('0b1e2c3d-0000-4000-8000-000000000002', 0)]);
    const names = [...html.matchAll(/<button type="submit" class="resend" aria-label="([^"]*)">Отправить снова<\/button>/g)].map((m) => m[1]);
    expect(names).toEqual([
      'Отправить снова invoice.paid 2026-01-01 12:00:00 UTC, доставка 0b1e2c3d-0000-4000-8000-000000000001',
      'Отправить снова invoice.paid 2026-01-01 12:00:00 UTC, доставка 0b1e2c3d-0000-4000-8000-000000000002',
    ]);
  });
});

describe("a receiver's reply under its attempt (excerpt)", () => {
  it.each([
    ['a short reply whole', 200, 'bad signature', 'bad signature'],
    ['whitespace runs as one space', 200, '  <h1>Error</h1>\r\n\t<p>bad\n\nsignature</p>\n', '<h1>Error</h1> <p>bad signature</p>'],
    [
      'bidi marks, overrides and isolates, and controls as visible escapes',
      200,
      'a\u202Eb\u2066c\u200Fd\u0000e\u001Bf\u0085g',
      'a\\u202Eb\\u2066c\\u200Fd\\u0000e\\u001Bf\\u0085g',
    ],
    ['its first characters then «…» (code points: an emoji stays whole)', 5, '🌼🌼🌼🌼🌼🌼', '🌼🌼🌼🌼🌼…'],
    ['exactly as long as shown: no «…»', 5, 'abcde', 'abcde'],
    ['cut between graphemes: an accent is not left off its letter', 4, 'cafe\u0301', 'caf…'],
    ['cut between graphemes: a flag is not halved', 4, 'ab 🇷🇺 cd', 'ab …'],
    ['a first grapheme longer than shown: its first code points', 5, `e${'\u0301'.repeat(10)}xyz`, `e${'\u0301'.repeat(4)}…`],
    ['nothing', 5, '', ''],
    ['a flag that fits stays whole', 7, 'ab 🇷🇺 cd', 'ab 🇷🇺 c…'],
  ] as const)('%s', (_, max, body, shown) => {
    expect(excerpt(body, max)).toBe(shown);
  });
});
