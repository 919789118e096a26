import { Refusal } from '#domain';
import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '#platform/logging';
import { AppendOutcomeUnknownError, AppendTooLateError, EventStoreUnavailableError } from '#event-store';
import { DatabaseOutageLog, isDatabaseAway, isDatabaseNotReached, WriteOutcomeUnknownError } from '#platform/database';
import { ReadModelRebuildingError } from '#event-store/projections';
import { DueHoldsRaceError } from '#payments/ledger';
import { ResendCutShortError } from '#payments/webhooks';
import { StepsCutShortError } from '#payments/flows';
import { markNothingWritten, StoredAnswer } from '../idempotency';
import { ApiError, LONGEST_ECHOED_PATH } from './api-error';
import { whileRebuilt } from '../read-models';

/**
 * Every failure leaves the API in the spec's error shape. Nothing internal (stack,
 * SQL, class names) reaches the client: unknown errors become 500 `internal` and
 * are logged in full on the server.
 */
@Catch()
export class ErrorFilter implements ExceptionFilter {
  /** Requests that found the database away, by reason: each told at warn once an outage (and once a minute), not a stack each. */
  private readonly outages = new Map<string, DatabaseOutageLog>();

  constructor(private readonly log: Logger) {}

  /** Whether the failure of `request` was the database away, told (or counted) by its reason's outage log. */
  private toldAway(exception: unknown, request: FastifyRequest): boolean {
    // Only an outage takes a reason's place (not a statement timeout, a hold race, a refused password).
    if (!isDatabaseAway(exception)) return false;
    const reason = reasonOf(exception);
    let outage = this.outages.get(reason);
    if (outage === undefined) {
      // A handful of reasons in practice; past that, each failure is logged as it is.
      if (this.outages.size >= 20) return false;
      outage = new DatabaseOutageLog(this.log, `API requests (${reason})`, { meanwhile: 'answering 503 provider_unavailable', quietEndsOutage: true });
      this.outages.set(reason, outage);
    }
    return outage.failed(exception, { requestId: request.id, method: request.method, url: request.url });
  }

  catch(exception: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    // Not an error: the first answer of an Idempotency-Key, sent again as it was.
    if (exception instanceof StoredAnswer) return exception.send(reply);
    const request = host.switchToHttp().getRequest<FastifyRequest>();
    const found = bodyCutOff(exception, request) ?? parserRefusal(exception, request) ?? toApiError(exception);
    const error = isRouteMiss(exception, request, found) ? routeMiss(request) : found;
    // Only a 5xx known to have written nothing lets its Idempotency-Key go; any other keeps it (lease ended) for the retry.
    if (error.status >= 500 && wroteNothing(exception)) markNothingWritten(request);
    // A 5xx the API decided on (ApiError, or a read model found being rebuilt) is an answer, logged by its request line; any other is a failure.
    const decided = exception instanceof ApiError || exception instanceof ReadModelRebuildingError;
    const told = !decided && error.status === 503 && wroteNothing(exception) && this.toldAway(exception, request);
    if (error.status >= 500 && !decided && !told) {
      // request.log is the request's child logger: the line carries its requestId.
      (request.log ?? this.log).error({ err: exception, method: request.method, url: request.url }, 'request failed');
    }
    for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
    void reply.status(error.status).header('content-type', 'application/json; charset=utf-8').send(error.body());
  }
}

/**
 * The request's own stream broke while its body was read (its client went away, or a
 * 408 closed the connection): Node's ECONNRESET "aborted", not the database's socket
 * error: a 400 nobody reads, in the request's one log line at info (no 503, no failure logged).
 */
export function bodyCutOff(exception: unknown, request: FastifyRequest): ApiError | null {
  if (exception !== request.raw.errored) return null;
  return new ApiError(400, 'validation', 'Тело запроса пришло не целиком: соединение закрылось раньше', 'body');
}

/**
 * Fastify's JSON parser refuses an empty body, and a `__proto__` name (or a
 * `constructor` holding a `prototype`) anywhere in a body, with the same error as
 * broken JSON: the client is told which. An empty body labelled JSON is refused, not
 * read as none: a refund whose amount was lost on the way must not become a full one.
 */
function parserRefusal(exception: unknown, request: FastifyRequest): ApiError | null {
  // Fastify's error, or Nest's wrapping of it (an HttpException 400: our code throws ApiError only).
  const code = (exception as { code?: unknown }).code;
  const parserRefused =
    code === 'FST_ERR_CTP_INVALID_JSON_BODY' || code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || (exception instanceof HttpException && exception.getStatus() === 400);
  if (!parserRefused) return null;
  const raw = (request as FastifyRequest & { rawBody?: Buffer }).rawBody;
  if (raw === undefined || raw.length === 0) {
    return new ApiError(
      400,
      'validation',
      'Тело запроса пустое, а Content-Type указан application/json: передайте JSON-объект или запрос без Content-Type',
      'body',
    );
  }
  // UTF-16 or UTF-32 (their byte-order mark, or a NUL among the first four bytes, where JSON has an ASCII character):
  // told to send UTF-8, as bytes that are not UTF-8 are.
  if (raw.subarray(0, 4).includes(0) || (raw[0] === 0xfe && raw[1] === 0xff) || (raw[0] === 0xff && raw[1] === 0xfe))
    return new ApiError(400, 'validation', 'Тело запроса не является корректным JSON: текст должен быть в кодировке UTF-8', 'body');
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    return null;
  }
  const param = forbiddenNamePath(parsed);
  // A path longer than a field's name could be (a long key, deep nesting) is not echoed: the body is named instead.
  if (param === null || param.length > LONGEST_ECHOED_PATH)
    return new ApiError(400, 'validation', 'В теле запроса есть запрещённое имя поля: __proto__ или constructor с prototype внутри', 'body');
  return new ApiError(400, 'validation', `${param}: запрещённое имя поля (__proto__ или constructor с prototype внутри)`, param);
}

/**
 * The path (`customFields.__proto__`, `a[0].constructor.prototype`) of a name the parser
 * refuses (an object's own names before its children's), as the duplicate-name check writes paths, or null. A walk with an
 * explicit stack: the body already parsed, so its depth is any and nothing is recursed.
 */
export function forbiddenNamePath(value: unknown): string | null {
  const stack: [unknown, string][] = [[value, '']];
  const pathOf = (parent: string, name: string) => (parent === '' ? name : `${parent}.${name}`);
  while (stack.length > 0) {
    const [item, path] = stack.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) stack.push([item[i], `${path}[${i}]`]);
      continue;
    }
    const entries = Object.entries(item);
    for (const [name, child] of entries) {
      if (name === '__proto__') return pathOf(path, name);
      if (name === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype'))
        return pathOf(pathOf(path, name), 'prototype');
    }
    for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i]![1], pathOf(path, entries[i]![0])]);
  }
  return null;
}

/**
 * Whether `found`, the error of a request, is rather its route miss (routeMiss: 404 or
 * 405): no route took the request, and the error is the router's 404 or its body
 * parser's refusal (400, 415), which would send the client to the wrong place. Not a
 * body cut off (400) or too large (413), nor an answer of ours (ApiError): those hold.
 */
export function isRouteMiss(exception: unknown, request: FastifyRequest, found: ApiError): boolean {
  if (!request.is404 || exception instanceof ApiError || exception === request.raw.errored) return false;
  return found.status === 404 || found.status === 400 || found.status === 415;
}

/**
 * A request no route took: 405 with Allow when a route has its path but not its method
 * (RFC 9110: not `not_found`, which says the payout does not exist), else 404.
 */
export function routeMiss(request: FastifyRequest): ApiError {
  const allow = allowedMethods(request.server, request.url);
  if (allow === null) return new ApiError(404, 'not_found', 'Такого адреса нет в API');
  return new ApiError(405, 'method_not_allowed', `Этот адрес принимает только ${allow}`, undefined, undefined, { Allow: allow });
}

/**
 * The methods the routes at `url`'s path take, as an Allow value (GET routes take HEAD
 * too), or null when no route has that path. A route whose parameter would be empty
 * (`/pay/`) does not have it: Nest answers it as no route.
 */
export function allowedMethods(fastify: FastifyInstance, url: string): string | null {
  // Not a path (`OPTIONS *`), or one that does not decode: the router would answer any method with its bad-URL handler.
  const path = url.split('?', 1)[0]!;
  if (!path.startsWith('/') || !decodes(path)) return null;
  const takes = (method: string) => {
    const route = fastify.findRoute({ method, url });
    return route !== null && Object.entries(route.params as Record<string, string>).every(([name, value]) => value !== '' || name === '*');
  };
  const methods = fastify.supportedMethods.filter(takes);
  return methods.length > 0 ? methods.join(', ') : null;
}

const decodes = (path: string) => {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
};

/** The one place where a refusal of the gateway's decisions becomes an HTTP status (the code, message and param are the refusal's). */
const REFUSAL_STATUS: Readonly<Record<string, number>> = {
  validation: 400,
  invoice_not_found: 404,
  not_found: 404,
  address_not_found: 404,
  project_not_active: 403,
  conflict: 409,
  order_id_conflict: 409,
  too_many_pending: 409,
  duplicate_request: 409,
  method_unavailable: 422,
  amount_out_of_range: 422,
  customer_fee_pct_too_high: 422,
  refund_exceeds_amount: 422,
  insufficient_balance: 422,
  address_not_confirmed: 422,
};

/**
 * The one mark of a 503 whose write may have been done, in its message (the error's shape has no field for it):
 * the gateway's four such texts and deploy/nginx.conf's for a write a replica got carry it, and the SDK (its own
 * copy, MAYBE_WRITTEN_MARK, tested equal) reads it. Every other 503 wrote nothing.
 */
export const MAYBE_WRITTEN_MARK = 'записано ли что-то';

export function toApiError(exception: unknown): ApiError {
  if (exception instanceof ApiError) return exception;
  if (exception instanceof Refusal) {
    const status = REFUSAL_STATUS[exception.code];
    // A refusal of the ledger's own bookkeeping (a hold or reservation already closed, ...): a conflict with the state.
    return status === undefined ? new ApiError(409, 'conflict', exception.message) : new ApiError(status, exception.code, exception.message, exception.param);
  }
  // A command answers what it wrote once its first write is committed (docs/api.md,
  // "Commit points"): an error reaches this filter only from before that write or from
  // that write itself, so a 5xx means that nothing the client can see was done, unless
  // the first write's answer was lost and could not be checked afterwards.
  if (exception instanceof AppendOutcomeUnknownError) {
    return new ApiError(
      503,
      'provider_unavailable',
      `Связь с хранилищем прервалась во время записи, и проверить, ${MAYBE_WRITTEN_MARK}, не удалось: повторяйте запрос с тем же Idempotency-Key (счёт — с тем же orderId), тогда повтор не создаст второй операции`,
      undefined,
      undefined,
      { 'Retry-After': '1' },
    );
  }
  if (exception instanceof WriteOutcomeUnknownError) {
    // A plain-table write (an operator's) whose connection broke during its statement or
    // COMMIT, and which could not look afterwards: it may have been done, so the answer
    // says so (with the event store's mark) and what to check before repeating it.
    return new ApiError(
      503,
      'provider_unavailable',
      `Связь с хранилищем прервалась во время записи, и проверить, ${MAYBE_WRITTEN_MARK}, не удалось: изменение могло быть сделано — прежде чем повторять запрос, проверьте, сделано ли оно: ${exception.howToCheck ?? 'GET того, что он меняет'}`,
      undefined,
      undefined,
      { 'Retry-After': '1' },
    );
  }
  if (exception instanceof ResendCutShortError) {
    // Batches of a resend committed before one failed: those stay resent, and a repeat resends the rest.
    return new ApiError(
      503,
      'provider_unavailable',
      `Повторная отправка прервалась на середине: не меньше ${exception.resent} доставок уже снова в очереди, остальные — нет (${MAYBE_WRITTEN_MARK} сверх того, неизвестно); повторите запрос — он отправит оставшиеся`,
      undefined,
      undefined,
      { 'Retry-After': '1' },
    );
  }
  if (exception instanceof StepsCutShortError) {
    // A repeat, a GET or an operator's step that finished someone's refund or payout: the ledger's decision is recorded, the next step not.
    const what = exception.flow === 'refund' ? 'возврат' : 'выплату';
    const done =
      exception.done === 'reserved' ? `Резерв средств под ${what} записан в балансе` : 'Отказ баланса записан (сумма возврата снова доступна в счёте)';
    return new ApiError(
      503,
      'provider_unavailable',
      `${done}, следующий шаг прервался (${MAYBE_WRITTEN_MARK} сверх того, неизвестно): повторите запрос — он продолжит с того же места, второй раз ничего не будет сделано`,
      undefined,
      undefined,
      { 'Retry-After': '1' },
    );
  }
  if (exception instanceof ReadModelRebuildingError) return whileRebuilt(exception.projections);
  if (exception instanceof AppendTooLateError) {
    // A decision dated by the clock that missed its deadline again and again (each try rolled back): nothing written.
    return new ApiError(503, 'provider_unavailable', 'Сервис перегружен: операция не записана, повторите запрос через секунду', undefined, undefined, {
      'Retry-After': '1',
    });
  }
  if (exception instanceof DueHoldsRaceError) {
    // Its due holds still being released by the worker (a read or an operator's step that advances a payout): nothing written.
    return new ApiError(503, 'provider_unavailable', 'Баланс сейчас пересчитывается: повторите запрос через секунду', undefined, undefined, {
      'Retry-After': '1',
    });
  }
  if (exception instanceof EventStoreUnavailableError || isDatabaseUnavailable(exception)) {
    // The database, or the event store when it is EventStoreDB, did not answer before
    // the request's first write, or that write was found not written: the retry (after
    // Retry-After) runs the request again.
    return new ApiError(503, 'provider_unavailable', 'Сервис временно недоступен: повторите запрос через несколько секунд', undefined, undefined, {
      'Retry-After': '1',
    });
  }
  if ((exception as { code?: unknown }).code === '57014') {
    // The statement timeout of the serving sessions (30 s) cancelled a query: its
    // transaction rolled back. An answer, not a 500. (A step before it may have
    // released due holds, as the hold-release worker would: not said "nothing written".)
    return new ApiError(
      503,
      'provider_unavailable',
      'Запрос не уложился в отведённое время и был прерван: повторите его позже (отчёт — за более короткий период)',
      undefined,
      undefined,
      { 'Retry-After': '1' },
    );
  }
  const fastifyCode = (exception as { code?: unknown }).code;
  if (typeof fastifyCode === 'string' && fastifyCode.startsWith('FST_')) return fromFastify(fastifyCode, exception as Error);
  if (exception instanceof HttpException) {
    // Our code throws ApiError only: an HttpException is Nest's wrapping of a Fastify
    // error raised before any handler ran (body parsing, routing).
    const status = exception.getStatus();
    if (status === 404) return new ApiError(404, 'not_found', 'Такого адреса нет в API');
    if (status === 405) return new ApiError(405, 'method_not_allowed', 'Метод не поддерживается для этого адреса');
    if (status === 413) return new ApiError(413, 'payload_too_large', 'Тело запроса слишком большое');
    if (status === 415) return new ApiError(415, 'unsupported_media_type', 'Тело запроса должно быть в формате application/json');
    if (status === 400) return new ApiError(400, 'validation', 'Тело запроса не является корректным JSON', 'body');
    if (status < 500) return new ApiError(status, 'validation', 'Некорректный запрос');
  }
  return new ApiError(500, 'internal', 'Внутренняя ошибка сервера');
}

/**
 * A failure that wrote nothing, by its kind (docs/api.md, "Commit points"): an answer the API decided on, the
 * database or event store away before the first write or that write found not written, a statement cancelled by
 * its timeout, a hold release racing the request. Not a write whose outcome is unknown, nor an unexpected error.
 */
export function wroteNothing(exception: unknown): boolean {
  if (exception instanceof AppendOutcomeUnknownError || exception instanceof WriteOutcomeUnknownError || exception instanceof ResendCutShortError) return false;
  if (exception instanceof StepsCutShortError) return false;
  if (exception instanceof ApiError || exception instanceof DueHoldsRaceError || exception instanceof EventStoreUnavailableError) return true;
  if (exception instanceof AppendTooLateError) return true;
  if (exception instanceof ReadModelRebuildingError) return true;
  return isDatabaseUnavailable(exception) || (typeof exception === 'object' && exception !== null && (exception as { code?: unknown }).code === '57014');
}

/** An outage's reason for its log line: the first code along the error and its causes (never a message: it may name an account). */
function reasonOf(exception: unknown): string {
  for (
    let e = exception as { code?: unknown; cause?: unknown } | null, depth = 0;
    typeof e === 'object' && e !== null && depth < 8;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.code === 'string') return e.code;
  }
  return 'connection lost';
}

/** The database cannot be reached, went away mid-request, or is shutting down or starting. */
export function isDatabaseUnavailable(exception: unknown): boolean {
  if (typeof exception !== 'object' || exception === null) return false;
  // Not let in (unreachable, a missing socket, refused role: nothing sent, so nothing written).
  if (isDatabaseNotReached(exception)) return true;
  const code = (exception as { code?: unknown }).code;
  if (typeof code === 'string') {
    // Socket errors, and PostgreSQL's connection exceptions (08xxx), insufficient resources (53xxx: a full disk,
    // out of memory, too many connections: the statement's transaction is undone), admin/crash shutdown and
    // "cannot connect now" (57P01..57P03).
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)) return true;
    if (/^(08|53)/.test(code) || code === '57P01' || code === '57P02' || code === '57P03') return true;
  }
  const message = (exception as { message?: unknown }).message;
  return (
    typeof message === 'string' &&
    /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|the database system is (starting up|shutting down)/i.test(
      message,
    )
  );
}

function fromFastify(code: string, error: Error): ApiError {
  switch (code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(400, 'validation', 'Тело запроса не является корректным JSON', 'body');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'payload_too_large', 'Тело запроса слишком большое');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'unsupported_media_type', 'Тело запроса должно быть в формате application/json');
    default: {
      const status = (error as { statusCode?: number }).statusCode ?? 500;
      return status < 500 ? new ApiError(status, 'validation', 'Некорректный запрос') : new ApiError(500, 'internal', 'Внутренняя ошибка сервера');
    }
  }
}
