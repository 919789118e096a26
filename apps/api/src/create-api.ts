import 'reflect-metadata';
import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
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
import { ErrorFilter, toApiError } from './http/errors/error.filter';
import { PaymentPageErrorFilter } from './pay/payment-page.controller';
import { ConsoleErrorFilter } from './console/console.controller';
import { registerIdempotencyHook } from './http/idempotency';
import { registerRequestChecks, routeOf, sendError } from './http/request-checks';
import { useAsyncResourceBindingWithoutDeprecatedAccessor } from './http/async-resource-binding';
import { IdempotencyKeys } from '#payments/idempotency';
import { registerMetricsRoute } from './health/metrics-endpoint';
import { clientErrorHandler, endRaw, rawAnswerOf, rawErrorAnswer, REQUEST_TIMEOUT_MS, trackResponses } from './http/client-errors';

/** Largest request body the API reads (customFields are at most 2 KB; the rest is small). */
export const BODY_LIMIT_BYTES = 64 * 1024;
/** How often Node looks for requests past that time: the 408 comes within this much after it (Node's default is 30 s). */
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;

/** The origin form (`/path?query`) of a request target in absolute form (`http://host/path?query`); any other form as it is. */
const originFormOf = (target: string): string => {
  const authority = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*/.exec(target);
  if (!authority) return target;
  const rest = target.slice(authority[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
};

/** How many Host headers the raw headers (name, value, name, value...) hold: counted without an array per request. */
function hostHeaders(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') n++;
  return n;
}

/**
 * The filter of a path's HTML pages: a browser (Accept: text/html) on the buyer's
 * payment page (/pay) or the operator console (/admin outside /admin/v1) gets a page
 * also for the errors met before any of their controllers (an unknown address, a
 * malformed one, a body too large); null otherwise: the spec's error shape. A form of the
 * payment page refused before its controller (its media type) is a page whatever Accept
 * says; a body over 64 KB is not read as anyone's form. Judged by the route that took
 * the request, or the decoded path when none did, as the router reads it:
 * `/admin/v%31/...` is the operator API, not the console.
 */
function pageErrorsOf(request: FastifyRequest, exception: unknown): ExceptionFilter | null {
  const route = routeOf(request);
  if (route !== null && route.startsWith('/pay/') && toApiError(exception).status !== 413) return PAYMENT_PAGE_ERRORS;
  if (!(request.headers.accept ?? '').includes('text/html')) return null;
  const path = route ?? decodedPath(request.url);
  const under = (prefix: string) => path === prefix || path.startsWith(`${prefix}/`);
  if (under('/pay')) return PAYMENT_PAGE_ERRORS;
  if (under('/admin') && !under('/admin/v1')) return CONSOLE_ERRORS;
  return null;
}
/** A URL's path with its escapes decoded, or as written when one does not decode. */
function decodedPath(url: string): string {
  const path = url.split('?', 1)[0]!;
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
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
    (pageErrorsOf(host.switchToHttp().getRequest<FastifyRequest>(), exception) ?? this.api).catch(exception, host);
  }
}

/** Routes polled by machines (scrapers, probes): their request lines are logged at debug, not info. */
const MACHINE_ROUTES = new Set(['/metrics', '/health/live', '/health/ready']);

/** The requests already in the metrics and the log: each is recorded once. */
const RECORDED = new WeakSet<FastifyRequest>();
/** The requests whose client went away before their answer was decided: recorded when it is (onSend). */
const GONE = new WeakSet<FastifyRequest>();

/**
 * After every response: the request in the metrics (route pattern, never the raw
 * URL) and one log line, through the request's child logger (so with its requestId).
 * A request whose client went away first (`clientGone`) is recorded with the status it
 * was given all the same, or the one written on its connection (a 408).
 */
function recordResponse(metrics: GatewayMetrics | undefined, request: FastifyRequest, reply: FastifyReply, durationMs: number, clientGone = false): void {
  if (RECORDED.has(request)) return;
  RECORDED.add(request);
  const route = request.is404 ? UNMATCHED_ROUTE : (request.routeOptions.url ?? UNMATCHED_ROUTE);
  const written = clientGone ? rawAnswerOf(request.raw.socket) : undefined;
  const status = written ?? reply.statusCode;
  metrics?.observeRequest(request.method, route, status, durationMs / 1000);
  const line = {
    method: request.method,
    route,
    status,
    durationMs: Math.round(durationMs * 1000) / 1000,
    ...(clientGone && written === undefined ? { clientGone: true } : {}),
  };
  if (MACHINE_ROUTES.has(route)) request.log.debug(line, 'request');
  else request.log.info(line, 'request');
}

/**
 * A connection closed before the request's answer was written whole (the client reset
 * it or dropped mid-body, or a 408 cut it): Fastify's onResponse never comes, so the
 * request is recorded here, at once when its answer was already given, else once the
 * handler gives it (the onSend hook): a POST carried out is in the log with its 201.
 */
function recordWhenClientGoes(metrics: GatewayMetrics | undefined, request: FastifyRequest, reply: FastifyReply): void {
  reply.raw.once('close', () => {
    if (reply.raw.writableFinished || RECORDED.has(request)) return;
    if (reply.raw.writableEnded) recordResponse(metrics, request, reply, reply.elapsedTime, true);
    else GONE.add(request);
  });
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
    // Long ids reach the handlers, which answer 404 in the spec's shape (a URL is at most ~16 KB: Node's header limit).
    routerOptions: { maxParamLength: 16 * 1024 },
    // A request line in absolute form (`POST http://host/v1/invoices`, which a server must
    // accept) is read as its origin form, so that every check of the path sees the path.
    rewriteUrl: (raw: IncomingMessage) => originFormOf(raw.url ?? '/'),
    // A request whose headers and body have not all arrived within 60 s is answered 408
    // (clientErrorHandler): a stalled body would otherwise hold its connection for ever.
    // Node looks for such requests every second, so the 408 comes at 60 to 61 s (the headers alone: 60 s too).
    requestTimeout: REQUEST_TIMEOUT_MS,
    // An HTTP/1.1 request without Host is refused by the first hook, in the error shape.
    http: { requireHostHeader: false, headersTimeout: REQUEST_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
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
      const page = pageErrorsOf(request, malformed);
      return page ? page.catch(malformed, httpHost(request, reply)) : sendError(reply, malformed);
    },
    // What Node's HTTP parser refuses (headers too large, garbage) never reaches a route.
    clientErrorHandler,
  });
  const fastify = adapter.getInstance();
  // The methods any route takes: the Allow of a CONNECT's 405 (added before the first route).
  const routeMethods = new Set<string>();
  fastify.addHook('onRoute', (route) => [route.method].flat().forEach((method) => routeMethods.add(method)));
  // First of our hooks, so that every answer (a hook's 415 included) carries the id,
  // and is never cached: answers carry balances, secrets and keys (the payment page
  // sets the same).
  fastify.addHook('onRequest', (request, reply, done) => {
    recordWhenClientGoes(metrics, request, reply);
    void reply.header(REQUEST_ID_HEADER, request.id);
    void reply.header('cache-control', 'no-store');
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      void sendError(reply, new ApiError(400, 'validation', 'В запросе HTTP/1.1 нет заголовка Host', 'host'));
      return;
    }
    // Two Host headers (RFC 9112: 400): Node keeps the first, a proxy in front may have routed by the other.
    if (hostHeaders(request.raw.rawHeaders) > 1) {
      void sendError(reply, new ApiError(400, 'validation', 'Заголовок Host указан в запросе дважды', 'host'));
      return;
    }
    done();
  });
  registerRequestChecks(fastify);
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
  // After the idempotency hook, which may send a key's first answer instead.
  fastify.addHook('onSend', (request, reply, payload, done) => {
    if (GONE.has(request) || request.raw.socket.destroyed) recordResponse(metrics, request, reply, reply.elapsedTime, true);
    done(null, payload);
  });
  // Closed after the drain: no keyed request runs any more, so no lease is left renewed by a stopped API.
  fastify.addHook('onClose', (_instance, done) => {
    idempotencyKeys.close();
    done();
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.register(deps, { ...security, idempotencyKeys }), adapter, {
    logger: false,
    abortOnError: false,
    // The exact bytes of each body, for the HMAC signature of mode 2.
    rawBody: true,
  });
  app.useGlobalFilters(new ErrorsByPath(new ErrorFilter(log)));
  await app.init();
  // A client that half-closes after its request (`nc -N`, some HTTP/1.0 clients) still
  // gets its answer: Node's default drops the request at the client's FIN. Not an
  // option of http.createServer, only this property of the server.
  (fastify.server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  answerBelowTheRoutes(fastify.server, fastify.supportedMethods.filter((method) => routeMethods.has(method)).join(', '));
  trackResponses(fastify.server);
  return app;
}

/** A JSON error written on a response no route has (Node's own events). */
function writeError(res: ServerResponse, error: ApiError): void {
  const body = JSON.stringify(error.body());
  res.writeHead(error.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    [REQUEST_ID_HEADER]: randomUUID(),
  });
  res.end(body);
}

/**
 * What Node's HTTP server would answer by itself, before any route, in the error shape
 * too: an Expect it cannot meet (417, an empty body otherwise), CONNECT (the connection
 * dropped otherwise; 405, Allow naming the methods the routes take). (An HTTP/1.1 request without Host: Node's own check, an empty 400,
 * is off; createApi's first hook answers it.)
 */
function answerBelowTheRoutes(server: Server, allow: string): void {
  server.on('checkExpectation', (_request: IncomingMessage, res: ServerResponse) =>
    writeError(res, new ApiError(417, 'validation', 'Заголовок Expect принимается только как 100-continue', 'expect')),
  );
  server.on('connect', (_request: IncomingMessage, socket: Socket) => {
    const refused = new ApiError(405, 'method_not_allowed', 'Метод CONNECT не поддерживается', undefined, undefined, { Allow: allow });
    endRaw(socket, rawErrorAnswer(refused, 'Method Not Allowed'));
  });
}
