import 'reflect-metadata';
import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { LogController } from 'fastify';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '#platform/logging';
import { REQUEST_ID_HEADER, REQUEST_ID_LOG_FIELD, requestIdOf } from '#platform/logging';
import { GatewayMetrics, UNMATCHED_ROUTE } from '#payments/observability';
import { AUTH_FAILURE_WINDOW_SECONDS, AuthFailureLimiter } from '#payments/access';
import { ApiDependencies, ApiSecurity, AppModule } from './app.module';
import { FailedAuthentication } from './http/auth/failed-authentication';
import { OperatorToken } from './http/auth/operator-token';
import { ApiError } from './http/errors/api-error';
import { ErrorFilter } from './http/errors/error.filter';
import { PaymentPageErrorFilter } from './pay/payment-page.controller';
import { ConsoleErrorFilter } from './console/console.controller';
import { registerIdempotencyHook } from './http/idempotency';
import { duplicateJsonName } from './http/duplicate-json-names';
import { RAW_BODIES } from './http/number-literals';
import { useAsyncResourceBindingWithoutDeprecatedAccessor } from './http/async-resource-binding';
import { IdempotencyKeys } from '#payments/idempotency';
import { registerMetricsRoute } from './health/metrics-endpoint';

/** Largest request body the API reads (customFields are at most 2 KB; the rest is small). */
export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * The filter of a path's HTML pages: a browser (Accept: text/html) on the buyer's
 * payment page (/pay) or the operator console (/admin outside /admin/v1) gets a page
 * also for the errors met before any of their controllers (an unknown address, a
 * malformed one, a body too large); null otherwise: the spec's error shape.
 */
function pageErrorsOf(request: FastifyRequest): ExceptionFilter | null {
  if (!(request.headers.accept ?? '').includes('text/html')) return null;
  const path = request.url.split('?')[0]!;
  const under = (prefix: string) => path === prefix || path.startsWith(`${prefix}/`);
  if (under('/pay')) return PAYMENT_PAGE_ERRORS;
  if (under('/admin') && !under('/admin/v1')) return CONSOLE_ERRORS;
  return null;
}
const PAYMENT_PAGE_ERRORS = new PaymentPageErrorFilter();
const CONSOLE_ERRORS = new ConsoleErrorFilter();

/** A request and its reply as an exception filter is handed them. */
const httpHost = (request: FastifyRequest, reply: FastifyReply): ArgumentsHost =>
  ({ switchToHttp: () => ({ getRequest: () => request, getResponse: () => reply }) }) as unknown as ArgumentsHost;

/** The global filter: a page's own for the HTML pages, the API's everywhere else. */
class ErrorsByPath implements ExceptionFilter {
  constructor(private readonly api: ErrorFilter) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    (pageErrorsOf(host.switchToHttp().getRequest<FastifyRequest>()) ?? this.api).catch(exception, host);
  }
}

const sendError = (reply: FastifyReply, error: ApiError) =>
  reply.status(error.status).header('cache-control', 'no-store').header('content-type', 'application/json; charset=utf-8').send(error.body());

/**
 * The merchant and operator APIs take JSON only: a body of another type, or sent with a
 * content coding (gzip, br: Fastify would parse the coded bytes as they came), is
 * refused with 415 before any parser reads it (the payment page under /pay and the
 * operator console under /admin, outside /admin/v1, keep their forms).
 */
function requireJsonBodies(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const api = request.url.startsWith('/v1/') || request.url.startsWith('/admin/v1/');
  const hasBody = Number(request.headers['content-length'] ?? 0) > 0 || request.headers['transfer-encoding'] !== undefined;
  const mediaType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (api && hasBody && mediaType !== 'application/json') {
    void sendError(reply, new ApiError(415, 'unsupported_media_type', 'Тело запроса должно быть в формате application/json'));
    return;
  }
  const coding = (request.headers['content-encoding'] ?? '').trim().toLowerCase();
  if (api && hasBody && coding !== '' && coding !== 'identity') {
    void sendError(reply, new ApiError(415, 'unsupported_media_type', 'Тело запроса принимается без сжатия: Content-Encoding не поддерживается'));
    return;
  }
  done();
}

/** A component of a query string as text (`+` a space), or null when a percent-escape in it is not UTF-8 (`%E9`, `%zz`). */
function decodedComponent(text: string): string | null {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/**
 * A query string of the APIs is UTF-8 text, as a path is: a percent-escape that does
 * not decode is refused with 400 naming its field, where the query parser keeps it as
 * written, so that `?orderId=%E9` found the invoice whose orderId is the text `%E9`.
 */
function refuseUndecodableQueries(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const url = request.url;
  const at = url.indexOf('?');
  const api = url.startsWith('/v1/') || url.startsWith('/admin/v1/');
  if (api && at >= 0 && url.includes('%', at)) {
    for (const pair of url.slice(at + 1).split('&')) {
      const eq = pair.indexOf('=');
      const name = decodedComponent(eq < 0 ? pair : pair.slice(0, eq));
      if (name !== null && (eq < 0 || decodedComponent(pair.slice(eq + 1)) !== null)) continue;
      const param = name ?? 'query';
      void sendError(reply, new ApiError(400, 'validation', `${param}: неверная %-последовательность, текст должен быть в кодировке UTF-8`, param));
      return;
    }
  }
  done();
}

/**
 * A JSON body whose bytes are not UTF-8 is refused (RFC 8259: JSON between systems is
 * UTF-8): read as text, each bad byte would become U+FFFD, and two different orderIds
 * one. A JSON body that names one field twice is refused: JSON.parse keeps the last
 * value, and a proxy that inspects or signs the body may have read the first. The
 * raw bytes of the others are kept by their parsed body, for the money rules.
 */
function refuseUnreadableBodies(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const raw = (request as FastifyRequest & { rawBody?: Buffer }).rawBody;
  const json = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
  if (json && raw !== undefined && !isUtf8(raw)) {
    void sendError(reply, new ApiError(400, 'validation', 'Тело запроса не является корректным JSON: текст должен быть в кодировке UTF-8', 'body'));
    return;
  }
  const body = json && raw !== undefined && typeof request.body === 'object' && request.body !== null ? request.body : null;
  if (body !== null) RAW_BODIES.set(body, raw!);
  const name = body !== null ? duplicateJsonName(raw!.toString('utf8')) : null;
  if (name !== null) {
    void sendError(reply, ApiError.validation([{ param: name, code: 'duplicate_field', message: `${name}: поле указано в теле запроса дважды` }]));
    return;
  }
  done();
}

/** Routes polled by machines (scrapers, probes): their request lines are logged at debug, not info. */
const MACHINE_ROUTES = new Set(['/metrics', '/health/live', '/health/ready']);

/**
 * After every response: the request in the metrics (route pattern, never the raw
 * URL) and one log line, through the request's child logger (so with its requestId).
 */
function recordResponse(metrics: GatewayMetrics | undefined, request: FastifyRequest, reply: FastifyReply, durationMs: number): void {
  const route = request.is404 ? UNMATCHED_ROUTE : (request.routeOptions.url ?? UNMATCHED_ROUTE);
  const status = reply.statusCode;
  metrics?.observeRequest(request.method, route, status, durationMs / 1000);
  const line = { method: request.method, route, status, durationMs: Math.round(durationMs * 1000) / 1000 };
  if (MACHINE_ROUTES.has(route)) request.log.debug(line, 'request');
  else request.log.info(line, 'request');
}

export interface ApiObservability {
  /** The process's metrics: the API records requests in them and serves them at GET /metrics (operator token). */
  readonly metrics?: GatewayMetrics;
}

export async function createApi(deps: ApiDependencies, log: Logger, observability: ApiObservability = {}): Promise<NestFastifyApplication> {
  const { metrics } = observability;
  useAsyncResourceBindingWithoutDeprecatedAccessor();
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT_BYTES,
    // request.ip is the client's address (failed-authentication limits count per address):
    // the socket's, or X-Forwarded-For's when the socket is one of TRUSTED_PROXIES.
    trustProxy: deps.infrastructure.config.trustedProxies.length > 0 ? [...deps.infrastructure.config.trustedProxies] : false,
    // Long ids reach the handlers, which answer 404 in the spec's shape.
    routerOptions: { maxParamLength: 1024 },
    // Every request has an id: the caller's X-Request-Id when it is a sane token, else a
    // fresh UUID. It is in the X-Request-Id response header and, through request.log (a
    // pino child of the process logger), in every log line written for the request.
    genReqId: (raw: IncomingMessage) => requestIdOf(raw.headers[REQUEST_ID_HEADER]),
    requestIdHeader: false,
    loggerInstance: log as FastifyBaseLogger,
    // Fastify's own two lines per request are replaced by recordResponse's one.
    logController: new LogController({ requestIdLogLabel: REQUEST_ID_LOG_FIELD, disableRequestLogging: true }),
    // Errors of the router itself (a malformed URL) in the spec's shape too. No hook runs
    // for these: the id header, the metrics and the log line are done here.
    frameworkErrors: (_error: Error, request: FastifyRequest, reply: FastifyReply) => {
      const started = performance.now();
      reply.raw.once('finish', () => recordResponse(metrics, request, reply, performance.now() - started));
      void reply.header(REQUEST_ID_HEADER, request.id);
      const malformed = new ApiError(400, 'validation', 'Некорректный адрес запроса', 'path');
      const page = pageErrorsOf(request);
      return page ? page.catch(malformed, httpHost(request, reply)) : sendError(reply, malformed);
    },
    // What Node's HTTP parser refuses (headers too large, garbage) never reaches a route.
    clientErrorHandler: (error: Error & { code?: string }, socket: Socket) => {
      if (!socket.writable) return socket.destroy();
      const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
      const status = tooLarge ? 431 : 400;
      const body = JSON.stringify(
        new ApiError(status, 'validation', tooLarge ? 'Заголовки или адрес запроса слишком длинные' : 'Некорректный HTTP-запрос').body(),
      );
      socket.end(
        `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n` +
          `X-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
      );
    },
  });
  const fastify = adapter.getInstance();
  // First of our hooks, so that every answer (a hook's 415 included) carries the id,
  // and is never cached: answers carry balances, secrets and keys (the payment page
  // sets the same).
  fastify.addHook('onRequest', (request, reply, done) => {
    void reply.header(REQUEST_ID_HEADER, request.id);
    void reply.header('cache-control', 'no-store');
    done();
  });
  fastify.addHook('onRequest', requireJsonBodies);
  fastify.addHook('onRequest', refuseUndecodableQueries);
  fastify.addHook('preValidation', refuseUnreadableBodies);
  fastify.addHook('onResponse', (request, reply, done) => {
    recordResponse(metrics, request, reply, reply.elapsedTime);
    done();
  });
  const { config } = deps.infrastructure;
  const security: ApiSecurity = {
    operatorToken: new OperatorToken(deps.adminToken),
    failedAuthentication: new FailedAuthentication(
      new AuthFailureLimiter({
        perAddress: config.authFailureLimitPerAddress,
        overall: config.authFailureLimitOverall,
        windowSeconds: AUTH_FAILURE_WINDOW_SECONDS,
      }),
      deps.infrastructure.clock,
      metrics?.authFailureObserver,
    ),
  };
  if (metrics) registerMetricsRoute(fastify, metrics, security.operatorToken, security.failedAuthentication);
  const idempotencyKeys = new IdempotencyKeys(deps.infrastructure.pool, deps.infrastructure.clock);
  registerIdempotencyHook(fastify, idempotencyKeys, log);
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.register(deps, { ...security, idempotencyKeys }), adapter, {
    logger: false,
    abortOnError: false,
    // The exact bytes of each body, for the HMAC signature of mode 2.
    rawBody: true,
  });
  app.useGlobalFilters(new ErrorsByPath(new ErrorFilter(log)));
  await app.init();
  return app;
}
