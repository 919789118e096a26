/**
 * The buyer's payment page (GET /pay/{id}): pure functions from an invoice and the
 * gateway's "now" to HTML strings. Russian UI, inline CSS, no JavaScript. Every
 * merchant-supplied string (description, orderId, URLs) goes through `escapeHtml`.
 */
import { DEFAULT_METHODS, METHOD_CODES, customerPctAt, invoiceAmounts, invoiceStatusAt, isPaid, methodChoicesLeft } from '#domain';
import type { Invoice, InvoiceAmounts, InvoiceStatus, MethodCode } from '#domain';
import { formatMoney } from '#ledger';
import type { Kopecks } from '#ledger';

const HTML_ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text → HTML text or attribute value (double- or single-quoted). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** The URL, normalized, if it is an absolute http(s) URL; null for anything else (javascript:, data:, relative…). */
export function safeHttpUrl(raw: string | null | undefined): string | null {
  if (typeof raw !== 'string' || raw === '') return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
}

const NBSP = '\u00a0';

/** Kopecks → "1 030,00 ₽" (non-breaking spaces), exact (from formatMoney, no floats). */
export function formatRubles(amount: Kopecks): string {
  const [whole, fraction] = formatMoney(amount).split('.') as [string, string];
  const sign = whole.startsWith('-') ? '-' : '';
  const digits = sign ? whole.slice(1) : whole;
  let grouped = digits;
  for (let at = digits.length - 3; at > 0; at -= 3) grouped = `${grouped.slice(0, at)}${NBSP}${grouped.slice(at)}`;
  return `${sign}${grouped},${fraction}${NBSP}₽`;
}

const MONTHS = ['января', 'февраля', 'марта', 'апреля', 'мая', 'июня', 'июля', 'августа', 'сентября', 'октября', 'ноября', 'декабря'];

/** ISO instant → HTML of "22 ноября 2026, 08:28 (МСК)" (each half kept on one line). Moscow time is UTC+3 all year (since 2014). */
export function formatMoscowTime(iso: string): string {
  const t = new Date(Date.parse(iso) + 3 * 3_600_000);
  if (Number.isNaN(t.getTime())) return escapeHtml(iso);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `<span class="nw">${t.getUTCDate()}${NBSP}${MONTHS[t.getUTCMonth()]}${NBSP}${t.getUTCFullYear()},</span> <span class="nw">${pad(t.getUTCHours())}:${pad(t.getUTCMinutes())}${NBSP}(МСК)</span>`;
}

export const methodTitle = (method: MethodCode): string => DEFAULT_METHODS[method]?.title ?? method;

export interface MethodOption {
  readonly code: MethodCode;
  readonly title: string;
  readonly amounts: InvoiceAmounts;
}

/** The methods the buyer may choose (fixed at creation) and what the buyer would pay with each. */
export function methodOptions(invoice: Invoice): MethodOption[] {
  const created = invoice.created!;
  const options: MethodOption[] = [];
  for (const code of METHOD_CODES) {
    const rate = created.methodRates[code];
    if (rate === undefined) continue;
    options.push({ code, title: methodTitle(code), amounts: invoiceAmounts(created.amount, rate, customerPctAt(created.customerFee, rate)) });
  }
  return options;
}

/** The buyer may pick (or change) the method: the merchant did not fix it and the buyer has choices left. */
export function buyerChoosesMethod(invoice: Invoice): boolean {
  return invoice.created!.method === null && methodChoicesLeft(invoice) > 0;
}

const payPath = (invoice: Invoice) => `/pay/${encodeURIComponent(invoice.created!.invoiceId)}`;

const STYLE = `
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:#eef1f5;color:#1b2330;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","Liberation Sans","DejaVu Sans",sans-serif}
main{max-width:30rem;margin:0 auto;padding:1.25rem .875rem 2.5rem}
.card{background:#fff;border-radius:14px;box-shadow:0 1px 2px rgba(16,24,40,.06),0 4px 16px rgba(16,24,40,.06);padding:1.5rem 1.25rem}
.badge{display:inline-block;margin:0 0 .75rem;padding:.2rem .6rem;border-radius:999px;background:#fff4d6;color:#7a4b00;font-size:.8rem;font-weight:600;letter-spacing:.02em}
h1{margin:0 0 .25rem;font-size:1.45rem;line-height:1.25}
.lead{margin:0 0 1.25rem;color:#475467;overflow-wrap:anywhere}
dl{margin:0 0 1.25rem;display:grid;grid-template-columns:auto 1fr;gap:.45rem 0}
dt{color:#475467;white-space:nowrap;padding-right:1rem}
dd{margin:0;text-align:right;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
@media (max-width:26rem){dl{grid-template-columns:1fr}dt{padding-right:0}dd{text-align:left;margin-bottom:.3rem}dd.total{border-top:0;padding-top:0}}
.total{border-top:1px solid #e4e7ec;padding-top:.6rem;font-weight:700;font-size:1.15rem;color:#1b2330}
.nw{white-space:nowrap}
h2{font-size:1.05rem;margin:1.25rem 0 .6rem}
form{margin:0}
.methods{display:grid;grid-template-columns:minmax(0,1fr);gap:.6rem}
button{font:inherit;cursor:pointer;border-radius:10px;border:1px solid transparent;padding:.85rem 1rem;width:100%}
button:focus-visible,a:focus-visible{outline:3px solid #84adff;outline-offset:2px}
.method{display:flex;flex-wrap:wrap;justify-content:space-between;align-items:baseline;gap:.1rem 1rem;text-align:left;background:#fff;border-color:#d0d5dd;color:#1b2330}
.method:hover{border-color:#2e6be6;background:#f5f8ff}
.method .title{min-width:0;overflow-wrap:anywhere}
.method .sum{font-weight:700;font-variant-numeric:tabular-nums}
.method .fee{flex-basis:100%;color:#667085;font-size:.85rem}
.actions{display:grid;gap:.6rem;margin-top:.75rem}
.primary{background:#2e6be6;color:#fff;font-weight:600}
.primary:hover{background:#2256c5}
.secondary{background:#fff;color:#b42318;border-color:#fda29b;font-weight:600}
.secondary:hover{background:#fef3f2}
.note{margin:0 0 .75rem;padding:.75rem .9rem;border-radius:10px;font-size:.925rem}
.note.test{background:#fff8e6;color:#6b4300;border:1px solid #fde7a8}
.note.warn{background:#fef3f2;color:#912018;border:1px solid #fecdca}
.note.info{background:#eef4ff;color:#1e3a8a;border:1px solid #c7d7fe}
.status{display:flex;align-items:center;gap:.75rem;margin-bottom:.5rem}
.icon{flex:none;display:inline-flex;align-items:center;justify-content:center;width:2.5rem;height:2.5rem;border-radius:50%;font-size:1.3rem;font-weight:700;color:#fff}
.ok{background:#12b76a}.bad{background:#f04438}.off{background:#98a2b3}.ret{background:#6172f3}
.link{display:block;text-align:center;text-decoration:none;border-radius:10px;padding:.85rem 1rem;margin-top:.75rem}
.link.primary{color:#fff}
.plain{display:inline-block;margin-top:.75rem;color:#2e6be6}
footer{margin-top:1rem;text-align:center;color:#475467;font-size:.8rem;overflow-wrap:anywhere}
`;

function htmlDocument(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="ru">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** The description (or the order number) and the amounts the buyer sees. */
function summary(invoice: Invoice, status: InvoiceStatus): string {
  const created = invoice.created!;
  const rows: string[] = [`<dt>Сумма заказа</dt><dd>${formatRubles(created.amount)}</dd>`];
  const open = status === 'created' || status === 'pending';
  if (invoice.method !== null && invoice.amounts) {
    rows.push(`<dt>Сервисный сбор</dt><dd>${invoice.amounts.customerFeeAmount === 0 ? 'нет' : formatRubles(invoice.amounts.customerFeeAmount)}</dd>`);
    rows.push(`<dt class="total">${open ? 'Итого к оплате' : 'Итого'}</dt><dd class="total">${formatRubles(invoice.amounts.payableAmount)}</dd>`);
    rows.push(`<dt>Способ оплаты</dt><dd>${escapeHtml(methodTitle(invoice.method))}</dd>`);
  } else if (open) {
    // No method chosen yet: the totals the buyer may pay, by method. A closed invoice that never had one shows the order amount alone.
    const payable = methodOptions(invoice).map((o) => o.amounts.payableAmount);
    const fees = methodOptions(invoice).map((o) => o.amounts.customerFeeAmount);
    const range = (values: number[], zero: string) => {
      const min = Math.min(...values);
      const max = Math.max(...values);
      if (max === 0) return zero;
      if (min === max) return formatRubles(min);
      // A free method: "до" the dearest fee alone, not "от 0,00 ₽".
      const from = min === 0 ? '' : `<span class="nw">от ${formatRubles(min)}</span> `;
      return `${from}<span class="nw">до ${formatRubles(max)}</span>`;
    };
    if (payable.length > 0) {
      rows.push(`<dt>Сервисный сбор</dt><dd>${range(fees, 'нет')}</dd>`);
      rows.push(`<dt class="total">Итого к оплате</dt><dd class="total">${range(payable, formatRubles(created.amount))}</dd>`);
    }
  }
  if (open) rows.push(`<dt>Оплатить до</dt><dd><time datetime="${escapeHtml(created.expiresAt)}">${formatMoscowTime(created.expiresAt)}</time></dd>`);
  if (status === 'paid' && isPaid(invoice)) {
    rows.push(`<dt>Оплачено</dt><dd><time datetime="${escapeHtml(invoice.paidAt)}">${formatMoscowTime(invoice.paidAt)}</time></dd>`);
  }
  if ((status === 'refunded' || status === 'partially_refunded') && isPaid(invoice))
    rows.push(`<dt>Возвращено покупателю</dt><dd>${formatRubles(invoice.refundedAmount)}</dd>`);
  return `<dl>${rows.join('\n')}</dl>`;
}

function heading(invoice: Invoice): string {
  const created = invoice.created!;
  const lead = created.description !== null && created.description.trim() !== '' ? created.description : `Заказ №${NBSP}${created.orderId}`;
  return `<p class="lead">${escapeHtml(lead)}</p>`;
}

function footer(invoice: Invoice): string {
  const created = invoice.created!;
  return `<footer>Номер заказа: ${escapeHtml(created.orderId)}<br>Счёт ${escapeHtml(created.invoiceId)}</footer>`;
}

function returnLink(url: string | null, label: string, primary: boolean): string {
  const safe = safeHttpUrl(url);
  if (!safe) return '';
  return `<a class="link ${primary ? 'primary' : 'plain'}" href="${escapeHtml(safe)}" rel="noopener noreferrer">${escapeHtml(label)}</a>`;
}

/** The page's form token as a hidden field (none in a rendering without one). */
const tokenField = (formToken: string | undefined): string =>
  formToken === undefined ? '' : `\n<input type="hidden" name="formToken" value="${escapeHtml(formToken)}">`;

function methodForm(invoice: Invoice, formToken: string | undefined): string {
  const options = methodOptions(invoice)
    .map((o) => {
      const fee = o.amounts.customerFeeAmount === 0 ? 'без сервисного сбора' : `сервисный сбор ${formatRubles(o.amounts.customerFeeAmount)}`;
      return `<button type="submit" class="method" name="method" value="${o.code}"><span class="title">${escapeHtml(o.title)}</span> <span class="sum">${formatRubles(o.amounts.payableAmount)}</span> <span class="fee">${fee}</span></button>`;
    })
    .join('\n');
  return `<h2>Выберите способ оплаты</h2>
<form method="post" action="${payPath(invoice)}/method" class="methods">${tokenField(formToken)}
${options}
</form>`;
}

/** What the buyer confirms with "Оплатить": the method and the total shown (a payment is refused if they changed since). */
function confirmedFields(invoice: Invoice): string {
  if (invoice.method === null) return '';
  return `\n<input type="hidden" name="method" value="${escapeHtml(invoice.method)}">\n<input type="hidden" name="payableAmount" value="${formatMoney(invoice.amounts.payableAmount)}">`;
}

function paymentSection(invoice: Invoice, formToken: string | undefined): string {
  const created = invoice.created!;
  const change =
    buyerChoosesMethod(invoice) && methodOptions(invoice).length > 1
      ? `<a class="plain" href="${payPath(invoice)}?change=1">Выбрать другой способ оплаты</a>`
      : '';
  if (created.mode === 'test') {
    return `<p class="note test"><strong>Тестовый режим.</strong> Деньги не списываются: выберите, чем закончится оплата.</p>
<form method="post" action="${payPath(invoice)}/sandbox" class="actions">${tokenField(formToken)}${confirmedFields(invoice)}
<button type="submit" class="primary" name="outcome" value="paid">Оплатить</button>
<button type="submit" class="secondary" name="outcome" value="failed">Отклонить</button>
</form>
${change}`;
  }
  return `<p class="note info"><strong>Оплата проводится на стороне банка.</strong> Подключение к банку-эквайеру в этой версии платёжного шлюза не реализовано, поэтому провести оплату на этой странице нельзя. Статус счёта изменится, когда банк сообщит результат оплаты.</p>
<a class="plain" href="${payPath(invoice)}">Обновить статус</a>
${change}`;
}

interface StatusText {
  readonly icon: string;
  readonly tone: string;
  readonly title: string;
  readonly text: string;
}

const FINAL_STATUS: Partial<Record<InvoiceStatus, StatusText>> = {
  paid: { icon: '✓', tone: 'ok', title: 'Оплачено', text: 'Спасибо! Платёж получен. Статус заказа в магазине может обновиться не сразу.' },
  failed: { icon: '✕', tone: 'bad', title: 'Платёж отклонён', text: 'Деньги не списаны. Вернитесь в магазин, чтобы попробовать ещё раз.' },
  expired: {
    icon: '!',
    tone: 'off',
    title: 'Срок оплаты истёк',
    text: 'Этот счёт больше нельзя оплатить. Вернитесь в магазин, чтобы оформить заказ заново.',
  },
  // A refund returns at most the order amount: the service fee stays (the amount returned is in the summary).
  refunded: { icon: '↩', tone: 'ret', title: 'Платёж возвращён', text: 'Сумма заказа возвращена покупателю.' },
  partially_refunded: { icon: '↩', tone: 'ret', title: 'Платёж частично возвращён', text: 'Часть суммы заказа возвращена покупателю.' },
};

export interface InvoicePageOptions {
  /** Show the method choice again (?change=1) for an open invoice whose method the buyer picked. */
  readonly changeMethod?: boolean;
  /** This rendering's form token (page-form-token.ts), sent back with the page's POSTs. */
  readonly formToken?: string;
  /** A notice above the summary (the method or total changed since the buyer's page was shown). */
  readonly notice?: string;
}

/** The whole page for an invoice, as of `now`. */
export function renderInvoicePage(invoice: Invoice, now: Date, options: InvoicePageOptions = {}): string {
  const created = invoice.created!;
  const status = invoiceStatusAt(invoice, now.toISOString());
  const badge = created.mode === 'test' ? '<span class="badge">Тестовый счёт</span>\n' : '';
  const final = FINAL_STATUS[status];
  let content: string;
  let title: string;
  if (final) {
    title = final.title;
    const link =
      status === 'paid' || status === 'refunded' || status === 'partially_refunded'
        ? returnLink(created.successUrl, 'Вернуться в магазин', status === 'paid')
        : returnLink(created.failUrl, 'Вернуться в магазин', true);
    content = `${badge}<div class="status"><span class="icon ${final.tone}" aria-hidden="true">${final.icon}</span><h1>${escapeHtml(final.title)}</h1></div>
${heading(invoice)}
<p>${escapeHtml(final.text)}</p>
${summary(invoice, status)}
${link}`;
  } else {
    title = 'Оплата заказа';
    const choose = invoice.method === null || (options.changeMethod === true && buyerChoosesMethod(invoice));
    const notice = options.notice === undefined ? '' : `<p class="note warn" role="alert">${escapeHtml(options.notice)}</p>\n`;
    content = `${badge}<h1>Оплата заказа</h1>
${heading(invoice)}
${notice}${summary(invoice, status)}
${choose ? methodForm(invoice, options.formToken) : paymentSection(invoice, options.formToken)}`;
  }
  return htmlDocument(title, `<div class="card">\n${content}\n</div>\n${footer(invoice)}`);
}

export interface ErrorPage {
  readonly title: string;
  readonly message: string;
  /** A same-site path back to the invoice page, when known. */
  readonly backHref?: string | null;
}

export function renderErrorPage(page: ErrorPage): string {
  const back = page.backHref ? `<a class="plain" href="${escapeHtml(page.backHref)}">Вернуться к счёту</a>` : '';
  return htmlDocument(
    page.title,
    `<div class="card">
<div class="status"><span class="icon bad" aria-hidden="true">!</span><h1>${escapeHtml(page.title)}</h1></div>
<p>${escapeHtml(page.message)}</p>
${back}
</div>`,
  );
}

export function renderNotFoundPage(): string {
  return renderErrorPage({
    title: 'Счёт не найден',
    message: 'Такого счёта нет. Проверьте ссылку или вернитесь в магазин и начните оплату заново.',
  });
}
