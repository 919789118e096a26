/**
 * The operator console's pages: server-rendered HTML without any script, styled by
 * the stylesheet at /admin/console.css (the CSP allows no inline style). Every string
 * from merchants or the database goes through escapeHtml; amounts are kopecks
 * formatted by formatRubles (exact, no floats).
 */
import type { BalancePoint, DailyVolume } from '#ledger';
import { escapeHtml, formatRubles } from '../pay/payment-page.html';
import { renderBalancePlot } from './balance-plot.svg';
import { plural } from '../http/plural';

export const CONSOLE_CSS = `*{box-sizing:border-box}
body{margin:0;background:#f2f4f7;color:#1b2330;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Liberation Sans","DejaVu Sans",sans-serif}
header{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem 1.5rem;background:#1b2330;color:#fff;padding:.6rem 1.25rem}
header .brand{font-weight:700}
header nav{display:flex;gap:1rem;flex:1}
header a{color:#d0d5dd;text-decoration:none}
header a:hover,header a.current{color:#fff;text-decoration:underline}
header form{margin:0}
header button{background:transparent;color:#d0d5dd;border:1px solid #667085;border-radius:6px;padding:.25rem .7rem;font:inherit;cursor:pointer}
main{max-width:72rem;margin:0 auto;padding:1.25rem}
h1{font-size:1.5rem;margin:.25rem 0 1rem;overflow-wrap:anywhere}
h2{font-size:1.15rem;margin:1.75rem 0 .6rem}
.card>h2:first-child{margin-top:.25rem}
h3{font-size:1rem;margin:1rem 0 .4rem;overflow-wrap:anywhere}
.card{background:#fff;border-radius:10px;box-shadow:0 1px 2px rgba(16,24,40,.08);padding:1rem 1.25rem;margin-bottom:1rem;overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e4e7ec;vertical-align:top}
th{color:#475467;font-weight:600;font-size:.85rem}
td.num,th.num{text-align:right;white-space:nowrap}
.muted{color:#667085}
.nw{white-space:nowrap}
.small{font-size:.85rem}
.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.85rem;overflow-wrap:anywhere}
/* The signed checkpoint text keeps its lines: a copy of the page's text verifies. */
.signed{white-space:pre-wrap}
/* A merchant's string (a name, an e-mail, a URL) may be one long word: it breaks anywhere, its table stays in its card. */
.given{overflow-wrap:anywhere}
.badge{display:inline-block;padding:0 .45rem;border-radius:999px;background:#eef4ff;color:#1e3a8a;font-size:.8rem}
.badge.test{background:#fff4d6;color:#7a4b00}
.badge.bad{background:#fef3f2;color:#b42318}
.badge.ok{background:#ecfdf3;color:#027a48}
.modes a{margin-right:.75rem}
.modes a.current{font-weight:700;color:#1b2330;text-decoration:none}
.pager{margin-top:.6rem}
.bar{fill:#2e6be6}
.plot{width:100%;height:auto}
form.inline{display:inline;margin:0}
button.resend{font:inherit;font-size:.85rem;padding:.2rem .6rem;border-radius:6px;border:1px solid #2e6be6;background:#fff;color:#2e6be6;cursor:pointer}
.login{max-width:24rem;margin:4rem auto}
.login label{display:block;font-weight:600;margin-bottom:.35rem}
.login input{width:100%;font:inherit;padding:.55rem .7rem;border:1px solid #d0d5dd;border-radius:8px}
.login button{margin-top:.9rem;width:100%;font:inherit;font-weight:600;padding:.6rem;border:0;border-radius:8px;background:#2e6be6;color:#fff;cursor:pointer}
.error{background:#fef3f2;border:1px solid #fda29b;color:#b42318;border-radius:8px;padding:.6rem .8rem;margin-bottom:.9rem}
.attempts{margin:.2rem 0 0;padding-left:1.1rem}
`;

/** The gateway's icon: the console's, and `/favicon.ico` for every other page. */
export const CONSOLE_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1b2330"/><path d="M3 12 H6 V8 H9 V5 H13" fill="none" stroke="#34d399" stroke-width="2"/></svg>`;

export interface ConsoleChrome {
  /** The logged-in operator's form token (the logout form); none on the login and error pages without a session. */
  readonly formToken?: string;
  readonly current?: 'merchants' | 'system';
}

function document(title: string, body: string, chrome: ConsoleChrome | null): string {
  const nav =
    chrome && chrome.formToken !== undefined
      ? `<header><span class="brand">Платёжный шлюз · консоль оператора</span><nav>` +
        `<a href="/admin"${chrome.current === 'merchants' ? ' class="current"' : ''}>Мерчанты</a>` +
        `<a href="/admin/system"${chrome.current === 'system' ? ' class="current"' : ''}>Система</a></nav>` +
        `<form method="post" action="/admin/logout">${formTokenField(chrome.formToken)}<button type="submit">Выйти</button></form></header>`
      : `<header><span class="brand">Платёжный шлюз · консоль оператора</span></header>`;
  return `<!DOCTYPE html>
<html lang="ru">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/admin/console.css">
<link rel="icon" href="/admin/favicon.svg" type="image/svg+xml">
</head>
<body>
${nav}
<main>
${body}
</main>
</body>
</html>
`;
}

export const FORM_TOKEN_FIELD = 'formToken';
const formTokenField = (token: string) => `<input type="hidden" name="${FORM_TOKEN_FIELD}" value="${escapeHtml(token)}">`;

/**
 * A card's tables may be wider than a narrow screen (a phone, a high zoom): the card then
 * scrolls sideways, so it takes keyboard focus (arrow keys scroll it) and is named by its
 * heading, as axe's scrollable-region-focusable asks.
 */
const scrolls = (label: string, role: 'region' | 'status' = 'region') => ` tabindex="0" role="${role}" aria-label="${escapeHtml(label)}"`;

const time = (at: Date | string) => {
  const iso = typeof at === 'string' ? at : at.toISOString();
  return `<time datetime="${escapeHtml(iso)}">${escapeHtml(
    iso
      .replace('T', ' ')
      .replace(/\.\d{3}Z$/, ' UTC')
      .replace(/Z$/, ' UTC'),
  )}</time>`;
};
/**
 * A string a merchant gave (a name, an e-mail, a URL, a receiver's error text), escaped;
 * it wraps anywhere (class given), and <bdi> isolates its direction: an unclosed
 * right-to-left override in it cannot reverse what the page draws after it.
 */
const given = (text: string) => `<bdi class="given">${escapeHtml(text)}</bdi>`;
/** C0 and C1 controls and the bidi marks, embeddings, overrides and isolates: in a receiver's reply they would act, not show. */
// eslint-disable-next-line no-control-regex
const ACTING = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
/**
 * A text from outside (a receiver's reply) as one readable line: whitespace runs as a
 * space, at most its first `max` characters (code points), cut between two graphemes (a
 * letter keeps its accents, a flag its two halves), then «…», every control or bidi
 * character as a visible \uXXXX (an override in it reverses nothing). Escape it for HTML after.
 */
export function excerpt(text: string, max: number): string {
  // 2·max+2 code units hold max+1 code points: enough to decide the cut, whatever the length of the text.
  const line = text
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 2 * max + 2);
  let shown = '';
  let count = 0;
  for (const { segment } of GRAPHEMES.segment(line)) {
    const size = [...segment].length;
    if (count + size > max) {
      // A first grapheme longer than max (a letter under many marks): its first code points.
      shown = count === 0 ? `${[...segment].slice(0, max).join('')}…` : `${shown}…`;
      break;
    }
    shown += segment;
    count += size;
  }
  return shown.replace(ACTING, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`);
}
/** The same isolation in plain text (a page title, the plot's title): FIRST STRONG ISOLATE … POP DIRECTIONAL ISOLATE. */
const isolated = (text: string) => `\u2068${text}\u2069`;
const money = (kopecks: number) => `<span class="nw">${escapeHtml(formatRubles(kopecks))}</span>`;

export function renderLoginPage(error: string | null): string {
  return document(
    'Вход в консоль оператора',
    `<div class="card login">
<h1>Вход в консоль оператора</h1>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/admin/login">
<label for="token">Токен оператора (ADMIN_TOKEN)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Войти</button>
</form>
</div>`,
    null,
  );
}

export function renderMessagePage(title: string, message: string, chrome: ConsoleChrome | null, back?: { href: string; label: string }): string {
  return document(
    title,
    `<div class="card"><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>${back ? `<p><a href="${escapeHtml(back.href)}">${escapeHtml(back.label)}</a></p>` : ''}</div>`,
    chrome,
  );
}

export type Mode = 'test' | 'live';
export const MODES: readonly Mode[] = ['test', 'live'];
const modeTitle = (mode: Mode) => (mode === 'test' ? 'тестовый' : 'боевой');

export interface Balances {
  readonly pending: number;
  readonly available: number;
  readonly reserved: number;
}

export interface MerchantRow {
  readonly id: string;
  readonly name: string;
  readonly email: string;
  readonly createdAt: Date;
  readonly projects: readonly { readonly id: string; readonly name: string; readonly status: string }[];
  readonly balances: Readonly<Record<Mode, Balances>>;
}

export const accountPath = (id: string, mode: Mode) => `/admin/accounts/${encodeURIComponent(id)}?mode=${mode}`;

export function renderMerchantsPage(rows: readonly MerchantRow[], nextAfter: string | null, chrome: ConsoleChrome): string {
  const body = rows
    .map((row) => {
      const projects = row.projects.length
        ? row.projects
            .map((p) => `<div>${given(p.name)} <span class="badge${p.status === 'active' ? ' ok' : ' bad'}">${escapeHtml(p.status)}</span></div>`)
            .join('')
        : '<span class="muted">нет проектов</span>';
      const cells = MODES.map((mode) => {
        const b = row.balances[mode];
        return `<td class="num"><a href="${escapeHtml(accountPath(row.id, mode))}">${money(b.available)}</a><div class="small muted">ожид. ${money(b.pending)} · резерв ${money(b.reserved)}</div></td>`;
      }).join('');
      return `<tr data-account="${escapeHtml(row.id)}"><td><a class="merchant" href="${escapeHtml(accountPath(row.id, 'live'))}">${given(row.name)}</a><div class="small muted">${given(row.email)}</div><div class="small muted mono">${escapeHtml(row.id)}</div></td><td>${projects}</td>${cells}</tr>`;
    })
    .join('\n');
  const table = rows.length
    ? `<table><thead><tr><th>Аккаунт</th><th>Проекты</th><th class="num">Тестовый режим: доступно</th><th class="num">Боевой режим: доступно</th></tr></thead><tbody>
${body}
</tbody></table>`
    : '<p class="muted">Аккаунтов нет.</p>';
  const pager = nextAfter ? `<p class="pager"><a href="/admin?after=${encodeURIComponent(nextAfter)}">Следующая страница →</a></p>` : '';
  return document(
    'Мерчанты',
    `<h1>Мерчанты и балансы</h1><div class="card"${scrolls('Мерчанты и балансы')}>${table}${pager}<p class="small muted">Балансы — из модели чтения ledger_balances и записей журнала, которые она ещё не учла: текущие.</p></div>`,
    chrome,
  );
}

export interface LedgerEntryView {
  readonly seq: number;
  readonly kind: string;
  readonly cause: string;
  readonly occurredAt: Date;
  readonly postings: readonly { readonly account: string; readonly amount: number }[];
}

export interface DeliveryView {
  readonly id: string;
  readonly projectName: string;
  readonly eventType: string;
  readonly url: string;
  readonly status: string;
  readonly isTest: boolean;
  readonly createdAt: Date;
  readonly nextAttemptAt: Date | null;
  readonly attempts: readonly {
    readonly attempt: number;
    readonly at: string;
    readonly statusCode: number | null;
    readonly error: string | null;
    /** The receiver's reply body as kept (up to 4 KiB), or null. */
    readonly body: string | null;
    readonly durationMs: number;
    readonly superseded: boolean;
  }[];
}

export interface AccountPage {
  readonly account: { readonly id: string; readonly name: string; readonly email: string; readonly createdAt: Date };
  readonly mode: Mode;
  readonly projects: readonly {
    readonly id: string;
    readonly name: string;
    readonly status: string;
    readonly webhookUrl: string | null;
    readonly webhookDisabledAt: Date | null;
  }[];
  readonly balances: Balances;
  readonly history: { readonly entries: number; readonly points: readonly BalancePoint[]; readonly days: readonly DailyVolume[] };
  readonly entries: readonly LedgerEntryView[];
  /** The cursor of the next page of entries, or null on the last page. */
  readonly nextEntriesAfter: number | null;
  /** Whether this page is not the first of the entries. */
  readonly entriesPaged: boolean;
  readonly deliveries: readonly DeliveryView[];
  /** The latest balance transactions of the mode (GET /v1/balance/transactions's rows). */
  readonly transactions: readonly {
    readonly type: string;
    readonly bucket: string;
    readonly amount: number;
    readonly balanceAfter: number;
    readonly createdAt: Date;
    readonly invoiceId: string | null;
    readonly refundId: string | null;
    readonly payoutId: number | null;
  }[];
}

export const TRANSACTIONS_SHOWN = 20;

function transactionsSection(page: AccountPage): string {
  if (page.transactions.length === 0) return '<p class="muted">Движений нет.</p>';
  const rows = page.transactions
    .map((t) => {
      const cause = t.invoiceId ?? t.refundId ?? (t.payoutId === null ? '' : `выплата ${t.payoutId}`);
      return `<tr class="transaction"><td>${time(t.createdAt)}</td><td>${escapeHtml(t.type)}<div class="small muted mono">${escapeHtml(cause)}</div></td><td class="mono">${escapeHtml(t.bucket)}</td><td class="num">${money(t.amount)}</td><td class="num">${money(t.balanceAfter)}</td></tr>`;
    })
    .join('');
  return `<table class="transactions"><thead><tr><th>Когда</th><th>Тип</th><th>Корзина</th><th class="num">Сумма</th><th class="num">Остаток корзины</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** Days of volumes shown on the merchant page (the most recent with a payment). */
export const VOLUME_DAYS_SHOWN = 31;

function volumesSection(days: readonly DailyVolume[]): string {
  if (days.length === 0) return '<p class="muted">Оплат нет.</p>';
  const shown = days.slice(0, VOLUME_DAYS_SHOWN);
  const max = Math.max(...shown.map((d) => d.amount), 1);
  const rows = shown
    .map(
      (d) =>
        `<tr><td>${escapeHtml(d.day)}</td><td class="num">${d.count}</td><td class="num">${money(d.amount)}</td>` +
        `<td><svg class="bars" width="200" height="12" viewBox="0 0 200 12" aria-hidden="true"><rect class="bar" x="0" y="1" height="10" width="${Math.max(1, Math.round((Math.max(0, d.amount) / max) * 200))}"/></svg></td></tr>`,
    )
    .join('');
  return `<table class="volumes"><thead><tr><th>День (UTC)</th><th class="num">Оплат</th><th class="num">Сумма</th><th>График</th></tr></thead><tbody>${rows}</tbody></table>${
    days.length > shown.length
      ? `<p class="small muted">Показаны последние ${VOLUME_DAYS_SHOWN} ${plural(VOLUME_DAYS_SHOWN, 'день', 'дня', 'дней')} с оплатами из ${days.length}.</p>`
      : ''
  }`;
}

function entriesSection(page: AccountPage): string {
  const base = accountPath(page.account.id, page.mode);
  if (page.entries.length === 0)
    return `<p class="muted">Проводок нет.</p>${page.entriesPaged ? `<p class="pager"><a href="${escapeHtml(base)}">← К началу журнала</a></p>` : ''}`;
  const rows = page.entries
    .map((e) => {
      const postings = e.postings.map((p) => `<tr><td class="mono">${escapeHtml(p.account)}</td><td class="num">${money(p.amount)}</td></tr>`).join('');
      return `<tr><td class="num">${e.seq}</td><td>${time(e.occurredAt)}</td><td>${escapeHtml(e.kind)}<div class="small muted mono">${escapeHtml(e.cause)}</div></td><td><table class="postings">${postings}</table></td></tr>`;
    })
    .join('');
  const links = [
    page.entriesPaged ? `<a href="${escapeHtml(base)}">← К началу журнала</a>` : '',
    page.nextEntriesAfter !== null
      ? `<a class="next-entries" href="${escapeHtml(`${base}&entriesAfter=${page.nextEntriesAfter}#ledger`)}">Следующие проводки →</a>`
      : '',
  ]
    .filter(Boolean)
    .join(' · ');
  return `<table class="entries"><thead><tr><th class="num">№</th><th>Время</th><th>Проводка</th><th>Движения</th></tr></thead><tbody>${rows}</tbody></table>${links ? `<p class="pager">${links}</p>` : ''}`;
}

/** A button that POSTs to `action` from the merchant page (back to it afterwards). */
/** A button that posts `action`; `named`: its accessible name where several alike stand on one page (it starts with the label, as WCAG 2.5.3 asks). */
const postButton = (action: string, page: AccountPage, formToken: string, label: string, named?: string) =>
  `<form class="inline" method="post" action="${action}">${formTokenField(formToken)}` +
  `<input type="hidden" name="accountId" value="${escapeHtml(page.account.id)}"><input type="hidden" name="mode" value="${page.mode}">` +
  `<button type="submit" class="resend"${named === undefined ? '' : ` aria-label="${escapeHtml(named)}"`}>${label}</button></form>`;

/** A project's webhook endpoint disabled for failing: since when, and the button that re-enables it. */
const endpointState = (p: AccountPage['projects'][number], page: AccountPage, formToken: string) =>
  p.webhookDisabledAt
    ? ` <span class="badge bad">вебхуки отключены ${time(p.webhookDisabledAt)}</span> ${postButton(`/admin/projects/${encodeURIComponent(p.id)}/webhook-endpoint/enable`, page, formToken, 'Включить и отправить долг')}`
    : '';

/** What the receiver answered, shortened, under its attempt (a blank reply: nothing). */
const reply = (body: string | null) => {
  const shown = body === null ? '' : excerpt(body, REPLY_SHOWN);
  return shown ? `<div class="small muted">ответ: ${given(shown)}</div>` : '';
};

function deliveriesSection(page: AccountPage, formToken: string): string {
  if (page.deliveries.length === 0) return '<p class="muted">Доставок нет.</p>';
  const rows = page.deliveries
    .map((d) => {
      const attempts = d.attempts.length
        ? `<ol class="attempts">${d.attempts
            .map(
              (a) =>
                `<li class="attempt">${time(a.at)} — ${a.statusCode === null ? 'без ответа' : `HTTP ${a.statusCode}`}${a.error ? `: ${given(a.error)}` : ''}, ${a.durationMs} мс${a.superseded ? ' <span class="muted">(не учтена)</span>' : ''}${reply(a.body)}</li>`,
            )
            .join('')}</ol>`
        : '<span class="muted small">попыток ещё не было</span>';
      const form = postButton(
        `/admin/webhook-deliveries/${encodeURIComponent(d.id)}/resend`,
        page,
        formToken,
        'Отправить снова',
        `Отправить снова ${d.eventType} ${d.createdAt
          .toISOString()
          .replace('T', ' ')
          .replace(/(\.\d{3})?Z$/, ' UTC')}, доставка ${d.id}`,
      );
      return `<tr class="delivery" data-delivery="${escapeHtml(d.id)}"><td>${escapeHtml(d.eventType)}${d.isTest ? ' <span class="badge test">test</span>' : ''}<div class="small muted">${given(d.projectName)}</div></td><td class="mono">${given(d.url)}</td><td><span class="badge${d.status === 'delivered' ? ' ok' : d.status === 'failed' ? ' bad' : ''}">${escapeHtml(d.status)}</span><div class="small muted">${time(d.createdAt)}</div>${d.nextAttemptAt ? `<div class="small muted">следующая: ${time(d.nextAttemptAt)}</div>` : ''}</td><td>${attempts}</td><td>${form}</td></tr>`;
    })
    .join('');
  return `<table class="deliveries"><thead><tr><th>Событие</th><th>Адрес</th><th>Статус</th><th>Попытки</th><th>Действие</th></tr></thead><tbody>${rows}</tbody></table>`;
}

export const DELIVERIES_SHOWN = 20;
/** Characters of a receiver's reply shown under its attempt (the operator API has it whole). */
export const REPLY_SHOWN = 200;

export function renderAccountPage(page: AccountPage, chrome: ConsoleChrome & { formToken: string }): string {
  const { account, mode } = page;
  const modes = MODES.map(
    (m) => `<a href="${escapeHtml(accountPath(account.id, m))}"${m === mode ? ' class="current" aria-current="page"' : ''}>${modeTitle(m)} режим</a>`,
  ).join('');
  const projects = page.projects.length
    ? `<ul>${page.projects.map((p) => `<li>${given(p.name)} <span class="badge">${escapeHtml(p.status)}</span> <span class="small muted mono">${escapeHtml(p.id)}</span>${p.webhookUrl ? ` <span class="small muted mono">${given(p.webhookUrl)}</span>` : ''}${endpointState(p, page, chrome.formToken)}</li>`).join('')}</ul>`
    : '<p class="muted">Проектов нет.</p>';
  const plotTitle = `Баланс аккаунта «${isolated(account.name)}» (${modeTitle(mode)} режим) по журналу`;
  return document(
    `${isolated(account.name)} — консоль оператора`,
    `<p class="small"><a href="/admin">← Мерчанты</a></p>
<h1>${given(account.name)}</h1>
<p class="small muted">${given(account.email)} · <span class="mono">${escapeHtml(account.id)}</span> · создан ${time(account.createdAt)}</p>
<p class="modes">${modes}</p>
<div class="card"${scrolls('Балансы')}><h2>Балансы</h2>
<table class="balances"><thead><tr><th class="num">Доступно</th><th class="num">В ожидании</th><th class="num">В резерве</th></tr></thead>
<tbody><tr><td class="num">${money(page.balances.available)}</td><td class="num">${money(page.balances.pending)}</td><td class="num">${money(page.balances.reserved)}</td></tr></tbody></table>
<p class="small muted">Текущие: модель чтения ledger_balances и записи журнала, которые она ещё не учла; график ниже построен по журналу (${page.history.entries} ${plural(page.history.entries, 'проводка', 'проводки', 'проводок')}, показано точек: ${page.history.points.length}).</p>
${projects}</div>
<div class="card"${scrolls('Баланс во времени')}><h2>Баланс во времени</h2>${renderBalancePlot(page.history.points, plotTitle)}</div>
<div class="card"${scrolls('Оплаты по дням')}><h2>Оплаты по дням</h2>${volumesSection(page.history.days)}</div>
<div class="card" id="transactions"${scrolls('Движения баланса')}><h2>Движения баланса</h2><p class="small muted">Последние ${TRANSACTIONS_SHOWN}, как их видит мерчант (GET /v1/balance/transactions).</p>${transactionsSection(page)}</div>
<div class="card" id="ledger"${scrolls('Проводки журнала')}><h2>Проводки журнала</h2>${entriesSection(page)}</div>
<div class="card" id="webhooks"${scrolls('Доставки вебхуков')}><h2>Доставки вебхуков</h2><p class="small muted">Последние ${DELIVERIES_SHOWN} ${plural(DELIVERIES_SHOWN, 'доставка', 'доставки', 'доставок')} каждого проекта аккаунта, обоих режимов.</p>${deliveriesSection(page, chrome.formToken)}</div>`,
    chrome,
  );
}

export interface SystemPage {
  /** Read models being rebuilt, with their progress (0..1). */
  readonly rebuilds: readonly { readonly projection: string; readonly startedAt: string; readonly progress: number }[];
  readonly lags: readonly { readonly projection: string; readonly checkpoint: string | null; readonly lagEvents: number }[];
  readonly lagLimit: number;
  readonly checkpoint:
    | {
        readonly position: string;
        readonly events: number;
        readonly hash: string;
        readonly kid: string;
        readonly signedText: string;
        readonly signature: string;
      }
    | { readonly unavailable: string };
}

export function renderSystemPage(page: SystemPage, chrome: ConsoleChrome): string {
  const lags = page.lags
    .map(
      (l) =>
        `<tr class="projection"><td class="mono">${escapeHtml(l.projection)}</td><td class="mono">${l.checkpoint === null ? '<span class="muted">нет</span>' : escapeHtml(l.checkpoint)}</td><td class="num">${l.lagEvents >= page.lagLimit ? `≥ ${l.lagEvents}` : l.lagEvents}</td></tr>`,
    )
    .join('');
  const c = page.checkpoint;
  const checkpoint =
    'unavailable' in c
      ? `<p class="muted">${escapeHtml(c.unavailable)}</p>`
      : `<table class="checkpoint"><tbody>
<tr><th>Позиция</th><td class="mono">${escapeHtml(c.position)}</td></tr>
<tr><th>Событий</th><td>${c.events}</td></tr>
<tr><th>Хеш (SHA-256, цепочка)</th><td class="mono">${escapeHtml(c.hash)}</td></tr>
<tr><th>Ключ подписи (kid)</th><td class="mono">${escapeHtml(c.kid)}</td></tr>
<tr><th>Подписанный текст</th><td class="mono signed">${escapeHtml(c.signedText)}</td></tr>
<tr><th>Подпись (Ed25519, base64)</th><td class="mono">${escapeHtml(c.signature)}</td></tr>
</tbody></table>`;
  const rebuilds =
    page.rebuilds.length === 0
      ? ''
      : `<div class="card notice"${scrolls('Идёт пересборка', 'status')}><h2>Идёт пересборка</h2>
<p>Пока данные пересобираются из журнала событий, их страницы и запросы API отвечают 503 и просят повторить позже.</p>
<table class="rebuilds"><thead><tr><th>Проекция</th><th>С (реальное время базы данных)</th><th class="num">Готово</th></tr></thead><tbody>${page.rebuilds
          .map(
            // The mark is written with the database's now() (real time, not the gateway clock): the header says so.
            (r) =>
              `<tr><td class="mono">${escapeHtml(r.projection)}</td><td>${time(r.startedAt)}</td><td class="num">${Math.floor(r.progress * 100)} %</td></tr>`,
          )
          .join('')}</tbody></table></div>`;
  return document(
    'Система',
    `<h1>Система</h1>
${rebuilds}<div class="card"${scrolls('Отставание проекций')}><h2>Отставание проекций</h2>
<table class="lags"><thead><tr><th>Проекция</th><th>Контрольная точка</th><th class="num">Отстаёт, событий</th></tr></thead><tbody>${lags}</tbody></table>
<p class="small muted">События журнала после сохранённой контрольной точки каждой проекции (считаются до ${page.lagLimit}).</p></div>
<div class="card"${scrolls('Контрольная точка аудита')}><h2>Контрольная точка аудита</h2>${checkpoint}</div>`,
    chrome,
  );
}
