import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pool } from 'pg';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayMetrics } from '#payments/observability';
import type { Logger } from '#platform/logging';
import { REQUEST_ID_HEADER, requestIdOf } from '#platform/logging';
import type { FailedAuthentication } from '../http/auth/failed-authentication';
import type { OperatorToken } from '../http/auth/operator-token';
import { ApiError, OPERATOR_CHALLENGE } from '../http/errors/api-error';
import { authorizationOf } from '../http/auth/authorization-header';
import { clientErrorHandler, REQUEST_TIMEOUT_MS, trackResponses } from '../http/client-errors';
import { readiness, ReadinessProbe } from './readiness';

/**
 * GET /metrics on the API's own port. That port faces merchants and buyers, and the
 * figures (request and webhook volumes per route) are business data, so it asks for
 * the operator token like the operator API (Prometheus: `authorization: {credentials:
 * ...}` in the scrape config). The METRICS_PORT listener serves the same text without
 * a token, for a port that only the monitoring network reaches.
 */
export function registerMetricsRoute(fastify: FastifyInstance, metrics: GatewayMetrics, token: OperatorToken, failures: FailedAuthentication): void {
  fastify.get('/metrics', async (request: FastifyRequest, reply: FastifyReply) => {
    try {
      if (token.check(authorizationOf(request)) !== 'valid') {
        throw failures.reject(
          request,
          'operator_token',
          ApiError.unauthorized('Нужен токен оператора: Authorization: Bearer <ADMIN_TOKEN>', undefined, OPERATOR_CHALLENGE),
        );
      }
    } catch (error) {
      const refusal = error as ApiError;
      return reply.status(refusal.status).headers(refusal.headers).header('content-type', 'application/json; charset=utf-8').send(refusal.body());
    }
    return sendExposition(metrics, reply.log, (status, contentType, body) => reply.status(status).header('content-type', contentType).send(body));
  });
}

async function sendExposition<T>(
  metrics: GatewayMetrics,
  log: Pick<Logger, 'error'>,
  send: (status: number, contentType: string, body: string) => T,
): Promise<T> {
  try {
    const { contentType, body } = await metrics.exposition();
    return send(200, contentType, body);
  } catch (error) {
    log.error({ err: error }, 'metrics exposition failed');
    return send(500, 'application/json; charset=utf-8', JSON.stringify(new ApiError(500, 'internal', 'Внутренняя ошибка сервера').body()));
  }
}

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * METRICS_PORT: a tiny HTTP listener of its own (any role, and the only HTTP a
 * projector-only process has) with GET /metrics, /health/live and /health/ready,
 * unauthenticated: bind it where only monitoring reaches. It listens on the
 * process's HOST, as the API does.
 */
export async function startMetricsServer(
  listen: { readonly host: string; readonly port: number },
  metrics: GatewayMetrics,
  pool: Pool,
  probe: ReadinessProbe,
  log: Logger,
): Promise<MetricsServer> {
  // Node's parser refusals answered as on the API's port; its time limit with them.
  const server = http.createServer({ requestTimeout: REQUEST_TIMEOUT_MS }, (request, response) => {
    const requestId = requestIdOf(request.headers[REQUEST_ID_HEADER]);
    response.setHeader('X-Request-Id', requestId);
    response.setHeader('Cache-Control', 'no-store');
    const started = process.hrtime.bigint();
    const path = (request.url ?? '/').split('?')[0]!;
    const route = request.method === 'GET' && ['/metrics', '/health/live', '/health/ready'].includes(path) ? path : 'unmatched';
    response.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.observeRequest(request.method ?? 'GET', route, response.statusCode, seconds);
      // Scrapes and probes come every few seconds: their lines are debug.
      log.debug({ requestId, method: request.method, route, status: response.statusCode, durationMs: Math.round(seconds * 1e6) / 1000 }, 'request');
    });
    const json = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
    };
    if (route === '/metrics') {
      void sendExposition(metrics, log.child({ requestId }), (status, contentType, body) =>
        response.writeHead(status, { 'content-type': contentType }).end(body),
      );
    } else if (route === '/health/live') {
      json(200, { status: 'ok' });
    } else if (route === '/health/ready') {
      void readiness(pool, probe).then(({ status, body }) => json(status, body));
    } else {
      json(404, new ApiError(404, 'not_found', 'Такого адреса нет: здесь только /metrics и /health').body());
    }
  });
  server.on('clientError', clientErrorHandler);
  trackResponses(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
