import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger } from '../../../libs/logging/src/logger';
import { ApiDependencies, AppModule } from './app.module';
import { ErrorFilter } from './errors/error.filter';

/** Largest request body the API reads (customFields are at most 2 KB; the rest is small). */
export const BODY_LIMIT_BYTES = 64 * 1024;

export async function createApi(deps: ApiDependencies, log: Logger): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({ bodyLimit: BODY_LIMIT_BYTES, trustProxy: false });
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
