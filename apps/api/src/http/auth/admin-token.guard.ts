import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { FailedAuthentication } from './failed-authentication';
import type { OperatorToken } from './operator-token';
import { ApiError } from '../errors/api-error';
import { FAILED_AUTHENTICATION, OPERATOR_TOKEN } from '../tokens';

/**
 * The operator API: `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time.
 * A client past the failure limits is refused (429) before its token is even
 * compared, so a right guess looks no different from a wrong one; each wrong or
 * missing token counts as a failure.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  constructor(
    @Inject(OPERATOR_TOKEN) private readonly token: OperatorToken,
    @Inject(FAILED_AUTHENTICATION) private readonly failures: FailedAuthentication,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    this.failures.refuseIfLimited(request, 'operator_token');
    if (this.token.check(request.headers.authorization) !== 'valid') {
      throw this.failures.failed(request, 'operator_token', ApiError.unauthorized('Нужен токен оператора: Authorization: Bearer <ADMIN_TOKEN>'));
    }
    return true;
  }
}
