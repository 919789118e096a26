import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../../../libs/logging/src/logger';
import { ApiDependencies, AppModule } from './app.module';
import { ApiError } from './errors/api-error';
import { ErrorFilter } from './errors/error.filter';

/** Largest request body the API reads (customFields are at most 2 KB; the rest is small). */
export const BODY_LIMIT_BYTES = 64 * 1024;

const sendError = (reply: FastifyReply, error: ApiError) =>
  reply.status(error.status).header('content-type', 'application/json; charset=utf-8').send(error.body());

/**
 * The merchant and operator APIs take JSON only: a body of another type is refused
 * with 415 before any parser reads it (the payment page under /pay keeps its forms).
 */
function requireJsonBodies(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const api = request.url.startsWith('/v1/') || request.url.startsWith('/admin/');
  const hasBody = Number(request.headers['content-length'] ?? 0) > 0 || request.headers['transfer-encoding'] !== undefined;
  const mediaType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (api && hasBody && mediaType !== 'application/json') {
    void sendError(reply, new ApiError(415, 'unsupported_media_type', 'Тело запроса должно быть в формате application/json'));
    return;
  }
  done();
}

export async function createApi(deps: ApiDependencies, log: Logger): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: false,
    // Long ids reach the handlers, which answer 404 in the spec's shape.
    maxParamLength: 1024,
    // Errors of the router itself (a malformed URL) in the spec's shape too.
    frameworkErrors: (_error: Error, _request: FastifyRequest, reply: FastifyReply) =>
      sendError(reply, new ApiError(400, 'validation', 'Некорректный адрес запроса', 'path')),
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
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    },
  });
  adapter.getInstance().addHook('onRequest', requireJsonBodies);
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.register(deps), adapter, {
    logger: false,
    abortOnError: false,
    // The exact bytes of each body, for the HMAC signature of mode 2.
    rawBody: true,
  });
  app.useGlobalFilters(new ErrorFilter(log));
  await app.init();
  return app;
}
