import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { FailedAuthentication } from './failed-authentication';
import type { OperatorToken } from './operator-token';
import { ApiError, OPERATOR_CHALLENGE } from '../errors/api-error';
import { authorizationOf } from './authorization-header';
import { FAILED_AUTHENTICATION, OPERATOR_TOKEN } from '../tokens';

/**
 * The operator API: `Authorization: Bearer <ADMIN_TOKEN>` (one header: a repeat is
 * refused), compared in constant time.
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
    if (this.token.check(authorizationOf(request)) !== 'valid') {
      const refusal = ApiError.unauthorized('Нужен токен оператора: Authorization: Bearer <ADMIN_TOKEN>, один заголовок', undefined, OPERATOR_CHALLENGE);
      throw this.failures.reject(request, 'operator_token', refusal);
    }
    return true;
  }
}
