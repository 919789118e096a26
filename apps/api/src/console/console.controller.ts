import { Body, Catch, Controller, Get, Inject, Param, Post, Query, Req, Res, UseFilters } from '@nestjs/common';
import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { OperatorSessions } from '#payments/access';
import type { AuditSigningKeys } from '#payments/audit';
import { GetLogCheckpoint, LogCheckpointUnavailableError } from '#payments/audit';
import { GetBalance } from '#payments/balance';
import type { Infrastructure } from '#payments/composition';
import { GetLedgerEntries, GetLedgerHistory, ListBalanceTransactions } from '#payments/ledger';
import { GetAccount, ListAccounts, ListProjectsOfAccount } from '#payments/merchants';
import { GetProjectionLag, LAG_COUNT_LIMIT } from '#payments/observability';
import { EnableWebhookEndpoint, ListWebhookDeliveries, ResendWebhookDelivery } from '#payments/webhooks';
import type { Clock } from '#platform/clock';
import { createLogger } from '#platform/logging';
import type { Logger } from '#platform/logging';
import { isUuid, Refusal } from '#domain';
import type { FailedAuthentication } from '../http/auth/failed-authentication';
import type { OperatorToken } from '../http/auth/operator-token';
import { ApiError } from '../http/errors/api-error';
import { bodyCutOff, isRouteMiss, routeMiss, toApiError } from '../http/errors/error.filter';
import { AUDIT_SIGNER, CLOCK_TOKEN, FAILED_AUTHENTICATION, INFRASTRUCTURE, OPERATOR_SESSIONS, OPERATOR_TOKEN, READ_MODEL_REBUILDS } from '../http/tokens';
import { checkpointView } from '../audit/audit-checkpoint.controller';
import { ReadModelRebuilds, rebuildsInProgress } from '#event-store/projections';
import {
  accountPath,
  CONSOLE_CSS,
  CONSOLE_ICON,
  DELIVERIES_SHOWN,
  excerpt,
  TRANSACTIONS_SHOWN,
  FORM_TOKEN_FIELD,
  Mode,
  renderAccountPage,
  renderLoginPage,
  renderMerchantsPage,
  renderMessagePage,
  renderSystemPage,
} from './console.html';
import type { ConsoleChrome, DeliveryView, MerchantRow } from './console.html';
import { CONSOLE_HEADERS, formTokenMatches, formTokenOf, formTokenWellFormed, sessionCookie, sessionCookieCleared, sessionIdOf } from './console-session';
import { ReadsModels } from '../http/read-models';

/** Accounts per page of the merchants page. */
export const MERCHANTS_PAGE = 50;
/** Ledger entries per page of the merchant page. */
export const ENTRIES_PAGE = 25;

function sendHtml(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply.status(status).headers(CONSOLE_HEADERS).header('content-type', 'text/html; charset=utf-8').send(html);
}

/** 303 See Other (the browser follows with a GET). */
function redirect(reply: FastifyReply, location: string, cookie?: string): FastifyReply {
  const r = reply.status(303).headers(CONSOLE_HEADERS).header('location', location);
  if (cookie !== undefined) void r.header('set-cookie', cookie);
  return r.send();
}

/** A refusal that already knows its page. */
class ConsolePageError extends Error {
  constructor(
    readonly status: number,
    readonly html: string,
  ) {
    super(`console: ${status}`);
    this.name = 'ConsolePageError';
  }
}

/** No (valid) session: to the login form. */
class LoginRequired extends Error {
  constructor() {
    super('console: login required');
    this.name = 'LoginRequired';
  }
}

/** Every failure in the console is an HTML page with the right status (never the API's JSON, never a 500 for bad input). */
@Catch()
export class ConsoleErrorFilter implements ExceptionFilter {
  private log: Logger | null = null;

  catch(exception: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const request = host.switchToHttp().getRequest<FastifyRequest>();
    if (exception instanceof LoginRequired) {
      void redirect(reply, '/admin/login');
      return;
    }
    if (exception instanceof ConsolePageError) {
      void sendHtml(reply, exception.status, exception.html);
      return;
    }
    const found = bodyCutOff(exception, request) ?? toApiError(exception);
    // No route took it: 405 with Allow when the address is the console's but the method is not (as for the API), else 404, whatever its body.
    const error = isRouteMiss(exception, request, found) ? routeMiss(request) : found;
    for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
    if (error.status >= 500) {
      const log = (request as { log?: Pick<Logger, 'error'> }).log ?? (this.log ??= createLogger('gateway-console'));
      log.error({ err: exception, method: request.method, url: request.url }, 'console request failed');
    }
    const title =
      error.status === 429
        ? 'Слишком много попыток'
        : error.status === 404
          ? 'Не найдено'
          : error.status === 405
            ? 'Метод не поддерживается'
            : error.status >= 500
              ? 'Сервис недоступен'
              : 'Запрос отклонён';
    const message =
      error.status === 405
        ? `Запрос ${request.method} по этому адресу консоли не используется: он принимает только ${error.headers.Allow}. Откройте консоль и воспользуйтесь её ссылками и кнопками.`
        : (CONSOLE_MESSAGES[error.status] ?? error.message);
    void sendHtml(reply, error.status, renderMessagePage(title, message, null, { href: '/admin', label: 'В консоль' }));
  }
}

/** The API's texts that do not fit a page of HTML forms (its 404 speaks of the API, its 415 asks for JSON). */
const CONSOLE_MESSAGES: Readonly<Record<number, string>> = {
  404: 'Такой страницы в консоли нет.',
  415: 'Формы консоли отправляются как application/x-www-form-urlencoded: повторите действие на странице консоли.',
};

/** The merchant page a console form came from (its accountId and mode fields), or the start page. */
function merchantPageOf(body: unknown): string {
  const accountId = formField(body, 'accountId');
  const mode = formField(body, 'mode');
  return isUuid(accountId) && (mode === 'test' || mode === 'live') ? accountPath(accountId.toLowerCase(), mode) : '/admin';
}

/** One field of an application/x-www-form-urlencoded body (repeated or missing fields give undefined). */
function formField(body: unknown, name: string): string | undefined {
  if (typeof body !== 'object' || body === null || !Object.hasOwn(body, name)) return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

interface Session {
  readonly id: string;
  readonly formToken: string;
}

const badRequest = (message: string, session: Session | null) =>
  new ConsolePageError(
    400,
    renderMessagePage('Некорректный запрос', message, session ? { formToken: session.formToken } : null, { href: '/admin', label: 'К мерчантам' }),
  );

const notFound = (message: string, session: Session) =>
  new ConsolePageError(404, renderMessagePage('Не найдено', message, { formToken: session.formToken }, { href: '/admin', label: 'К мерчантам' }));

/** The query parameters of the merchant page and of the merchants page, each with what it takes. */
const ACCOUNT_QUERY = { mode: 'test или live', entriesAfter: 'номер последней проводки предыдущей страницы' };
const MERCHANTS_QUERY = { after: 'идентификатор аккаунта из ссылки «Следующая страница»' };

/**
 * A parameter the address does not take (a mistyped `Mode=test`, `mode[]=test`) is refused,
 * as the operator API refuses one: ignored, it would show another page (the live ledger) as if asked.
 */
function refuseUnknownParameters(query: unknown, takes: Readonly<Record<string, string>>, session: Session | null): void {
  const unknown = Object.keys(query ?? {}).find((name) => !Object.hasOwn(takes, name));
  if (unknown === undefined) return;
  const known = Object.entries(takes).map(([name, what]) => `${name} (${what})`);
  throw badRequest(
    `Параметра «${excerpt(unknown, 40)}» у этого адреса нет: ${known.length ? `он принимает только ${known.join(', ')}` : 'он не принимает параметров'}.`,
    session,
  );
}

function modeOf(value: unknown, session: Session): Mode {
  if (value === undefined) return 'live';
  if (value === 'test' || value === 'live') return value;
  throw badRequest('Параметр mode: test или live.', session);
}

/**
 * The operator console (docs/console.md): server-rendered pages under /admin, without
 * any script, behind the operator token through a login form and a session cookie
 * (sessions in PostgreSQL, so every API process accepts them). Reads and writes go
 * through the query and command buses like the JSON operator API at /admin/v1, which
 * stays the API; the console is not part of it.
 */
@Controller('admin')
@UseFilters(ConsoleErrorFilter)
export class ConsoleController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(OPERATOR_TOKEN) private readonly token: OperatorToken,
    @Inject(FAILED_AUTHENTICATION) private readonly failures: FailedAuthentication,
    @Inject(OPERATOR_SESSIONS) private readonly sessions: OperatorSessions,
    @Inject(INFRASTRUCTURE) private readonly infrastructure: Infrastructure,
    @Inject(READ_MODEL_REBUILDS) private readonly rebuilds: ReadModelRebuilds,
    @Inject(AUDIT_SIGNER) private readonly signer: AuditSigningKeys,
  ) {}

  /** The stylesheet (the CSP allows styles from the gateway only, none inline). */
  @Get('console.css')
  stylesheet(@Res() reply: FastifyReply) {
    return reply.status(200).headers(CONSOLE_HEADERS).header('content-type', 'text/css; charset=utf-8').send(CONSOLE_CSS);
  }

  @Get('favicon.svg')
  icon(@Res() reply: FastifyReply) {
    return reply.status(200).headers(CONSOLE_HEADERS).header('content-type', 'image/svg+xml').send(CONSOLE_ICON);
  }

  @Get('login')
  loginForm(@Query() query: unknown, @Res() reply: FastifyReply) {
    refuseUnknownParameters(query, {}, null);
    return sendHtml(reply, 200, renderLoginPage(null));
  }

  /**
   * The operator token from the form: the right one always opens a session; a wrong
   * one counts as a failure of the address, as on the operator API, and past the
   * limits it is answered 429.
   */
  @Post('login')
  async login(@Body() body: unknown, @Query() query: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    refuseUnknownParameters(query, {}, null);
    // A token has no whitespace (the configuration refuses one): what a paste brings around it is no failure.
    // String.prototype.trim: linear; a regex anchored at the end took quadratic time on a long run of inner spaces (review 67).
    if (!this.token.matches(formField(body, 'token')?.trim())) {
      const refusal = this.failures.reject(request, 'operator_token', ApiError.unauthorized('Неверный токен оператора'));
      if (refusal.status === 429) throw refusal;
      request.log.warn({ ip: request.ip }, 'operator console: login with a wrong token');
      return sendHtml(reply, 401, renderLoginPage('Неверный токен оператора. Введите значение ADMIN_TOKEN этого шлюза.'));
    }
    const sessionId = await this.sessions.open(this.token.sessionFingerprint, this.clock.now());
    request.log.info({ ip: request.ip }, 'operator console: session opened');
    return redirect(reply, '/admin', sessionCookie(sessionId, request.protocol === 'https'));
  }

  @Post('logout')
  async logout(@Body() body: unknown, @Query() query: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const session = await this.session(request);
    refuseUnknownParameters(query, {}, session);
    this.requireFormToken(session, body);
    await this.sessions.close(session.id);
    request.log.info({ ip: request.ip }, 'operator console: session closed (logout)');
    return redirect(reply, '/admin/login', sessionCookieCleared(request.protocol === 'https'));
  }

  /** Merchants: accounts with their projects and balances per mode, a page at a time. */
  @ReadsModels('ledger')
  @Get()
  async merchants(@Query() query: Record<string, unknown>, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const session = await this.session(request);
    refuseUnknownParameters(query, MERCHANTS_QUERY, session);
    const after = query.after;
    // An id that names no account would read as an empty list ("no accounts"): refused as a bad link, like one that is no id.
    if (after !== undefined && (!isUuid(after) || !(await this.queries.execute(new GetAccount(after.toLowerCase())))))
      throw badRequest('Параметр after: идентификатор аккаунта из ссылки «Следующая страница».', session);
    const page = await this.queries.execute(new ListAccounts(after === undefined ? null : after.toLowerCase(), MERCHANTS_PAGE));
    const rows: MerchantRow[] = [];
    for (const { account, projects } of page.items) {
      const [test, live] = await Promise.all([
        this.queries.execute(new GetBalance({ accountId: account.id, mode: 'test' })),
        this.queries.execute(new GetBalance({ accountId: account.id, mode: 'live' })),
      ]);
      rows.push({
        id: account.id,
        name: account.name,
        email: account.email,
        createdAt: account.createdAt,
        projects: projects.map((p) => ({ id: p.id, name: p.name, status: p.status })),
        balances: { test, live },
      });
    }
    const nextAfter = page.hasMore ? page.items[page.items.length - 1]!.account.id : null;
    return sendHtml(reply, 200, renderMerchantsPage(rows, nextAfter, this.chrome(session, 'merchants')));
  }

  /** One merchant account in one mode: balances, the plot, volumes per day, ledger entries, webhook deliveries. */
  @ReadsModels('ledger')
  @Get('accounts/:id')
  async account(@Param('id') id: string, @Query() query: Record<string, unknown>, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const session = await this.session(request);
    const account = isUuid(id) ? await this.queries.execute(new GetAccount(id.toLowerCase())) : null;
    if (!account) throw notFound('Такого аккаунта нет.', session);
    refuseUnknownParameters(query, ACCOUNT_QUERY, session);
    const mode = modeOf(query.mode, session);
    const entriesAfter = query.entriesAfter;
    let afterSeq = -1;
    if (entriesAfter !== undefined) {
      if (typeof entriesAfter !== 'string' || !/^\d{1,15}$/.test(entriesAfter)) {
        throw badRequest('Параметр entriesAfter: номер последней проводки предыдущей страницы.', session);
      }
      afterSeq = Number(entriesAfter);
    }
    const ledger = { accountId: account.id, mode };
    const [balances, history, entries, projects, transactions] = await Promise.all([
      this.queries.execute(new GetBalance(ledger)),
      this.queries.execute(new GetLedgerHistory(ledger)),
      this.queries.execute(new GetLedgerEntries(ledger, afterSeq, ENTRIES_PAGE)),
      this.queries.execute(new ListProjectsOfAccount(account.id)),
      this.queries.execute(new ListBalanceTransactions({ ...ledger, before: null, limit: TRANSACTIONS_SHOWN })),
    ]);
    const deliveries: DeliveryView[] = [];
    for (const project of projects) {
      const page = await this.queries.execute(new ListWebhookDeliveries({ projectId: project.id, before: null, limit: DELIVERIES_SHOWN }));
      for (const d of page.items) {
        deliveries.push({
          id: d.id,
          projectName: project.name,
          eventType: d.event_type,
          url: d.url,
          status: d.status,
          isTest: d.is_test,
          createdAt: d.created_at,
          nextAttemptAt: d.next_attempt_at,
          attempts: d.attempts.map((a) => ({
            attempt: a.attempt,
            at: new Date(a.at).toISOString(),
            statusCode: a.status_code,
            error: a.error,
            body: a.body,
            durationMs: a.duration_ms,
            superseded: a.superseded,
          })),
        });
      }
    }
    deliveries.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
    const lastEntry = entries.items[entries.items.length - 1];
    return sendHtml(
      reply,
      200,
      renderAccountPage(
        {
          account,
          mode,
          projects: projects.map((p) => ({
            id: p.id,
            name: p.name,
            status: p.status,
            webhookUrl: p.webhookUrl,
            webhookDisabledAt: p.webhookDisabledAt ?? null,
          })),
          balances,
          history,
          entries: entries.items.map((e) => ({ seq: e.seq, kind: e.kind, cause: e.cause, occurredAt: e.occurredAt, postings: e.postings })),
          nextEntriesAfter: entries.hasMore && lastEntry ? lastEntry.seq : null,
          entriesPaged: afterSeq !== -1,
          deliveries,
          transactions: transactions.items,
        },
        { ...this.chrome(session, 'merchants'), formToken: session.formToken },
      ),
    );
  }

  /** Sends a webhook delivery again (the operator API's resend), then back to the merchant page. */
  @Post('webhook-deliveries/:id/resend')
  async resend(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const session = await this.session(request);
    refuseUnknownParameters(query, {}, session);
    this.requireFormToken(session, body);
    const back = merchantPageOf(body);
    let resent;
    try {
      resent = isUuid(id) ? await this.commands.execute(new ResendWebhookDelivery(id.toLowerCase(), this.clock.now())) : null;
    } catch (error) {
      // The project's endpoint is disabled: nothing is queued, the page says how to enable it.
      if (!(error instanceof Refusal)) throw error;
      throw new ConsolePageError(
        409,
        renderMessagePage('Запрос отклонён', error.message, { formToken: session.formToken }, { href: `${back}#webhooks`, label: 'Назад' }),
      );
    }
    if (!resent) throw notFound('Такой доставки нет (или её историю уже удалили по сроку хранения).', session);
    return redirect(reply, `${back}#webhooks`);
  }

  /** Re-enables a project's webhook endpoint disabled for failing and resends what it is owed, then back to the merchant page. */
  @Post('projects/:id/webhook-endpoint/enable')
  async enableEndpoint(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const session = await this.session(request);
    refuseUnknownParameters(query, {}, session);
    this.requireFormToken(session, body);
    const back = merchantPageOf(body);
    const resent = isUuid(id) ? await this.commands.execute(new EnableWebhookEndpoint(id.toLowerCase(), this.clock.now())) : null;
    if (resent === null) throw notFound('Такого проекта нет.', session);
    return redirect(reply, back);
  }

  /** Projection lag per projection and the audit checkpoint of the log. */
  @Get('system')
  async system(@Query() query: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const session = await this.session(request);
    refuseUnknownParameters(query, {}, session);
    const lags = await this.queries.execute(new GetProjectionLag());
    let checkpoint;
    try {
      checkpoint = await checkpointView(await this.queries.execute(new GetLogCheckpoint()), this.signer);
    } catch (error) {
      if (!(error instanceof LogCheckpointUnavailableError)) throw error;
      checkpoint = { unavailable: 'Контрольные точки журнала ведутся только для журнала в PostgreSQL (EVENT_STORE=postgres).' };
    }
    const rebuilds = await rebuildsInProgress(this.rebuilds, this.infrastructure.store);
    return sendHtml(reply, 200, renderSystemPage({ lags, lagLimit: LAG_COUNT_LIMIT, checkpoint, rebuilds }, this.chrome(session, 'system')));
  }

  private chrome(session: Session, current: ConsoleChrome['current']): ConsoleChrome {
    return { formToken: session.formToken, current };
  }

  /** The request's session, open as of the gateway clock; otherwise LoginRequired (303 to the login form). */
  private async session(request: FastifyRequest): Promise<Session> {
    const id = sessionIdOf(request.headers.cookie);
    if (id === null || !(await this.sessions.use(id, this.token.sessionFingerprint, this.clock.now()))) throw new LoginRequired();
    return { id, formToken: formTokenOf(id) };
  }

  /**
   * Every POST of a session carries its form token (besides SameSite=Strict): else a 403 page and nothing done.
   * A well-formed token of another session is a page left open from an earlier (or another) session: reload it.
   */
  private requireFormToken(session: Session, body: unknown): void {
    const given = formField(body, FORM_TOKEN_FIELD);
    if (formTokenMatches(session.id, given)) return;
    const stale = formTokenWellFormed(given);
    throw new ConsolePageError(
      403,
      renderMessagePage(
        'Запрос отклонён',
        stale
          ? 'Страница, с которой отправлена форма, открыта в прежней или другой сессии консоли (был выход или новый вход) и устарела. Ничего не сделано: обновите страницу и повторите действие.'
          : 'В форме нет действительного ключа формы этой сессии: она отправлена не со страницы консоли. Откройте консоль и повторите действие.',
        { formToken: session.formToken },
        stale ? { href: merchantPageOf(body), label: 'Обновить страницу' } : { href: '/admin', label: 'В консоль' },
      ),
    );
  }
}
