import { Body, Catch, Controller, Get, Inject, Param, Post, Query, Req, Res, UseFilters } from '@nestjs/common';
import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '#platform/clock';
import { confirmedTermsHold, invoiceStatusAt, isMethodCode, isUuid, MAX_METHOD_CHOICES, Refusal } from '#domain';
import type { Invoice, InvoiceCreatedData } from '#domain';
import { createLogger } from '#platform/logging';
import type { Logger } from '#platform/logging';
import { ChooseInvoiceMethod } from './choose-invoice-method.handler';
import { findInvoice } from '#payments/invoices';
import type { EventStore } from '#event-store';
import { EVENT_STORE } from '#payments';
import { RecordPaymentResult } from '../invoices/record-payment-result/record-payment-result.handler';
import { bodyCutOff, isRouteMiss, MAYBE_WRITTEN_MARK, toApiError } from '../http/errors/error.filter';
import { CLOCK_TOKEN, PAGE_FORM_TOKENS, PUBLIC_URL } from '../http/tokens';
import type { PublicUrl } from '../http/tokens';
import { FORM_TOKEN_FIELD, fromGatewayItself } from './page-form-token';
import type { PageFormTokens } from './page-form-token';
import { methodTitle, renderErrorPage, renderInvoicePage, renderNotFoundPage, safeHttpUrl } from './payment-page.html';

/** Headers of every answer of the payment page: never cached, never framed, no scripts, no referrer leaks. */
export const PAYMENT_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' http: https:; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

function sendHtml(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply.status(status).headers(PAYMENT_PAGE_HEADERS).header('content-type', 'text/html; charset=utf-8').send(html);
}

/** 303 See Other: the browser follows with a GET (Post/Redirect/Get). */
function redirect(reply: FastifyReply, location: string): FastifyReply {
  return reply.status(303).headers(PAYMENT_PAGE_HEADERS).header('location', location).send();
}

/** A refusal that already knows its page. */
class PageError extends Error {
  constructor(
    readonly status: number,
    readonly html: string,
  ) {
    super(`payment page: ${status}`);
    this.name = 'PageError';
  }
}

const backHrefOf = (id: unknown): string | null => (isUuid(id) ? `/pay/${id.toLowerCase()}` : null);

/** What the buyer reads for a refusal of the invoice service (its own messages are for logs, not buyers). */
function buyerError(status: number, code: string, backHref: string | null, maybeDone = false) {
  if (status === 409) {
    return { title: 'Действие недоступно', message: 'Счёт уже оплачен, отклонён или закрыт, либо срок его оплаты истёк.', backHref };
  }
  if (status === 415) {
    return {
      title: 'Форма не принята',
      message: 'Форма страницы счёта отправляется как обычная веб-форма (application/x-www-form-urlencoded). Вернитесь к счёту и повторите действие на нём.',
      backHref,
    };
  }
  if (code === 'method_unavailable') return { title: 'Способ оплаты недоступен', message: 'Этот способ оплаты нельзя выбрать для этого счёта.', backHref };
  if (status < 500) return { title: 'Некорректный запрос', message: 'Запрос не удалось выполнить. Вернитесь к счёту и попробуйте ещё раз.', backHref };
  if (maybeDone) {
    // The marked 503 (MAYBE_WRITTEN_MARK): the choice or payment may be recorded; the invoice page shows whether.
    return {
      title: 'Не удалось подтвердить действие',
      message: 'Связь с сервисом прервалась, и действие могло быть записано. Откройте страницу счёта заново и проверьте его статус, прежде чем нажимать снова.',
      backHref,
    };
  }
  return { title: 'Что-то пошло не так', message: 'Сервис временно не смог обработать запрос. Попробуйте обновить страницу через минуту.', backHref };
}

/** Every failure on the payment page is an HTML page with the right status, never the API's JSON. */
@Catch()
export class PaymentPageErrorFilter implements ExceptionFilter {
  private log: Logger | null = null;

  catch(exception: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const request = host.switchToHttp().getRequest<FastifyRequest>();
    if (exception instanceof PageError) {
      void sendHtml(reply, exception.status, exception.html);
      return;
    }
    const error = bodyCutOff(exception, request) ?? toApiError(exception);
    if (isRouteMiss(exception, request, error)) {
      // No route of the page has this address: a wrong address, or a wrong method on a right one, whatever its body.
      const page = routeMissPage(request.url);
      if (page.allow !== null) void reply.header('allow', page.allow);
      void sendHtml(reply, page.status, page.html);
      return;
    }
    if (error.status === 404) {
      void sendHtml(reply, 404, renderNotFoundPage());
      return;
    }
    if (error.status >= 500) {
      // The request's own logger carries its request id.
      const log = (request as { log?: Pick<Logger, 'error'> }).log ?? (this.log ??= createLogger('gateway-payment-page'));
      log.error({ err: exception, method: request.method, url: request.url }, 'payment page request failed');
    }
    const backHref = backHrefOf((request.params as { id?: unknown } | undefined)?.id);
    // The error's own headers too: a 503's Retry-After (a database outage) as on every other route.
    for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
    const maybeDone = error.status === 503 && error.message.includes(MAYBE_WRITTEN_MARK);
    void sendHtml(reply, error.status, renderErrorPage(buyerError(error.status, error.code, backHref, maybeDone)));
  }
}

/**
 * A request no route of the page took: the page for a wrong address (404), or for a
 * method the address does not take (405, with the methods it does in Allow).
 */
function routeMissPage(url: string): { status: number; allow: string | null; html: string } {
  const segments = url.split('?')[0]!.split('/');
  // ['', 'pay', id] is the invoice's page; ['', 'pay', id, 'method' | 'sandbox'] its forms.
  const backHref = segments.length >= 3 ? backHrefOf(segments[2]) : null;
  if (segments.length === 3 && segments[2] !== '') {
    return {
      status: 405,
      allow: 'GET, HEAD',
      html: renderErrorPage({
        title: 'Запрос не поддерживается',
        message: 'Это адрес страницы счёта: её можно только открыть, отправить на него форму нельзя.',
        backHref,
      }),
    };
  }
  if (segments.length === 4 && segments[2] !== '' && (segments[3] === 'method' || segments[3] === 'sandbox')) {
    return {
      status: 405,
      allow: 'POST',
      html: renderErrorPage({
        title: 'Запрос не поддерживается',
        message: 'Этот адрес принимает только формы со страницы счёта, открыть его нельзя. Вернитесь к счёту.',
        backHref,
      }),
    };
  }
  return {
    status: 404,
    allow: null,
    html: renderErrorPage({
      title: 'Страница не найдена',
      message: 'Адрес страницы неверен. Откройте счёт по ссылке, которую дал магазин, без лишних символов в конце.',
      backHref,
    }),
  };
}

/** One field of an application/x-www-form-urlencoded body (repeated or missing fields give undefined). */
function formField(body: unknown, name: string): string | undefined {
  if (typeof body !== 'object' || body === null || !Object.hasOwn(body, name)) return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The buyer's payment page at the invoice's `url`: server-rendered HTML, no login
 * (whoever has the link pays). In test mode the sandbox buttons stand in for the
 * acquirer; in live mode the payment happens at the bank. The page's POSTs are
 * accepted only from the page itself: with the form token of a rendering of this
 * invoice, or an Origin (Referer) that is the gateway; anything else is a 403 page.
 */
@Controller('pay')
@UseFilters(PaymentPageErrorFilter)
export class PaymentPageController {
  constructor(
    private readonly commands: CommandBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(PAGE_FORM_TOKENS) private readonly forms: PageFormTokens,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
  ) {}

  @Get(':id')
  async show(@Param('id') id: string, @Query('change') change: unknown, @Res() reply: FastifyReply) {
    const invoice = await this.find(id);
    const now = this.clock.now();
    const formToken = this.forms.issue(invoice.created!.invoiceId, now);
    return sendHtml(reply, 200, renderInvoicePage(invoice, now, { changeMethod: change === '1', formToken }));
  }

  /** The buyer picks a method (created → pending); back to the page, which then offers to pay. */
  @Post(':id/method')
  async chooseMethod(@Param('id') id: string, @Body() body: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const invoice = await this.find(id);
    const created = invoice.created!;
    this.requireOwnPage(request, created, body);
    const now = this.clock.now();
    this.requireOpen(invoice, now);
    const method = formField(body, 'method');
    if (!isMethodCode(method) || created.methodRates[method] === undefined) {
      throw new PageError(
        400,
        renderErrorPage({
          title: 'Способ оплаты недоступен',
          message: 'Выберите один из способов оплаты, предложенных на странице счёта.',
          backHref: pagePath(created),
        }),
      );
    }
    try {
      await this.commands.execute(new ChooseInvoiceMethod(created.invoiceId, method, now));
    } catch (error) {
      if (!(error instanceof Refusal) || error.code !== 'method_choice_limit') throw error;
      const current = (await this.find(id)).method;
      throw new PageError(
        409,
        renderErrorPage({
          title: 'Способ оплаты больше не изменить',
          message: `Способ оплаты одного счёта можно выбирать не больше ${MAX_METHOD_CHOICES} раз, и у этого счёта попытки закончились.${current === null ? '' : ` Остаётся выбранный: ${methodTitle(current)}.`} Вернитесь к счёту и оплатите им.`,
          backHref: pagePath(created),
        }),
      );
    }
    return redirect(reply, pagePath(created));
  }

  /** Test mode only: the buyer plays the acquirer ("Оплатить" / "Отклонить"). */
  @Post(':id/sandbox')
  async sandbox(@Param('id') id: string, @Body() body: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const invoice = await this.find(id);
    const created = invoice.created!;
    this.requireOwnPage(request, created, body);
    if (created.mode !== 'test') {
      throw new PageError(
        403,
        renderErrorPage({
          title: 'Тестовая оплата недоступна',
          message: 'Это боевой счёт: он оплачивается на стороне банка, а не кнопками тестового режима.',
          backHref: pagePath(created),
        }),
      );
    }
    const outcome = formField(body, 'outcome');
    if (outcome !== 'paid' && outcome !== 'failed') {
      throw new PageError(400, renderErrorPage({ title: 'Некорректный запрос', message: 'Выберите «Оплатить» или «Отклонить».', backHref: pagePath(created) }));
    }
    // A second click (or the back button) after the same outcome: answer as the first time.
    if (invoice.status === outcome) return redirect(reply, afterPayment(created, outcome));
    const now = this.clock.now();
    this.requireOpen(invoice, now);
    if (invoice.method === null) {
      throw new PageError(
        409,
        renderErrorPage({ title: 'Сначала выберите способ оплаты', message: 'Выберите способ оплаты на странице счёта.', backHref: pagePath(created) }),
      );
    }
    // "Оплатить" pays what the page showed: if the method or the total changed since (another tab), the page
    // as it is now, to confirm again; nothing recorded. The method goes with the payment, so a change made
    // between this check and the append cannot make it pay another method.
    const confirmed = { method: formField(body, 'method'), payableAmount: formField(body, 'payableAmount') };
    if (outcome === 'paid' && !confirmedTermsHold(invoice, confirmed)) {
      throw new PageError(
        409,
        renderInvoicePage(invoice, now, {
          formToken: this.forms.issue(created.invoiceId, now),
          notice: 'Способ оплаты или сумма к оплате изменились, например в другой вкладке. Проверьте их ниже и нажмите «Оплатить» ещё раз.',
        }),
      );
    }
    try {
      await this.commands.execute(new RecordPaymentResult(created.invoiceId, outcome, outcome === 'paid' ? invoice.method : null, now));
    } catch (error) {
      // Clicks at once (two tabs, a retried request): another one recorded this outcome first; answer as it was answered.
      // A read that fails too (the database still away) does not replace the write's own error: its outcome may be unknown.
      if ((await this.find(id).catch(() => null))?.status === outcome) return redirect(reply, afterPayment(created, outcome));
      throw error;
    }
    return redirect(reply, afterPayment(created, outcome));
  }

  /**
   * A POST of the page must come from the page: its form token (issued for this
   * invoice), or an Origin/Referer that is the gateway itself. Else a 403 page that
   * says why, and nothing is recorded.
   */
  private requireOwnPage(request: FastifyRequest, created: InvoiceCreatedData, body: unknown): void {
    if (this.forms.verify(created.invoiceId, formField(body, FORM_TOKEN_FIELD), this.clock.now())) return;
    if (fromGatewayItself(request.headers, request.protocol, this.publicUrl.value)) return;
    throw new PageError(
      403,
      renderErrorPage({
        title: 'Запрос отклонён',
        message:
          'Эта форма отправлена не со страницы счёта: в ней нет действительного ключа формы, и она пришла с другого сайта. Откройте страницу счёта и повторите действие на ней.',
        backHref: pagePath(created),
      }),
    );
  }

  private async find(id: string): Promise<Invoice> {
    const invoice = await findInvoice(this.store, id);
    if (!invoice) throw new PageError(404, renderNotFoundPage());
    return invoice;
  }

  /** Only an open invoice within its lifetime (by the gateway clock) takes a method or a payment; else its page, with 409. */
  private requireOpen(invoice: Invoice, now: Date): void {
    const status = invoiceStatusAt(invoice, now.toISOString());
    if (status !== 'created' && status !== 'pending') throw new PageError(409, renderInvoicePage(invoice, now));
  }
}

const pagePath = (created: InvoiceCreatedData) => `/pay/${created.invoiceId}`;

/** successUrl / failUrl when set and http(s); otherwise the invoice's own page. */
function afterPayment(created: InvoiceCreatedData, outcome: 'paid' | 'failed'): string {
  return safeHttpUrl(outcome === 'paid' ? created.successUrl : created.failUrl) ?? pagePath(created);
}
