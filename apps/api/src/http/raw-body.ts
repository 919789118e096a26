import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';

/** The exact bytes of the request body (Nest's `rawBody: true`), or undefined without a body. */
export const RawBody = createParamDecorator(
  (_: unknown, context: ExecutionContext): Buffer | undefined => context.switchToHttp().getRequest<FastifyRequest & { rawBody?: Buffer }>().rawBody,
);
