import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { FailedAuthentication } from './failed-authentication';
import type { OperatorToken } from './operator-token';
import { ApiError } from '../errors/api-error';
import { FAILED_AUTHENTICATION, OPERATOR_TOKEN } from '../tokens';

/**
 * The operator API: `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time.
 * The right token is always let in, whatever its address did before; each wrong or
 * missing token counts as a failure of the address, and past the limits it is
 * answered 429. (The token has at least 32 characters: the limits keep failures
 * cheap, guessing is hopeless anyway.)
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  constructor(
    @Inject(OPERATOR_TOKEN) private readonly token: OperatorToken,
    @Inject(FAILED_AUTHENTICATION) private readonly failures: FailedAuthentication,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    if (this.token.check(request.headers.authorization) !== 'valid') {
      throw this.failures.reject(request, 'operator_token', ApiError.unauthorized('Нужен токен оператора: Authorization: Bearer <ADMIN_TOKEN>'));
    }
    return true;
  }
}
