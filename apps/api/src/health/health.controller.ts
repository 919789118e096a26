import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Pool } from 'pg';
import type { FailedAuthentication } from '../http/auth/failed-authentication';
import type { OperatorToken } from '../http/auth/operator-token';
import { authorizationOf } from '../http/auth/authorization-header';
import { ApiError, OPERATOR_CHALLENGE } from '../http/errors/api-error';
import { DATABASE_POOL, FAILED_AUTHENTICATION, OPERATOR_TOKEN, READINESS } from '../http/tokens';
import type { ReadinessProbe } from './readiness';
import { publicReadiness, readiness } from './readiness';

export type { ReadinessProbe, ReadinessReport } from './readiness';

@Controller('health')
export class HealthController {
  constructor(
    @Inject(DATABASE_POOL) private readonly pool: Pool,
    @Inject(READINESS) private readonly probe: ReadinessProbe,
    @Inject(OPERATOR_TOKEN) private readonly token: OperatorToken,
    @Inject(FAILED_AUTHENTICATION) private readonly failures: FailedAuthentication,
  ) {}

  /** The process is up. */
  @Get('live')
  live() {
    return { status: 'ok' };
  }

  /**
   * The process can serve: its database answers (migrations ran before the port
   * opened). Anyone (a load balancer) gets the status only; with the operator token
   * (or on the METRICS_PORT listener) the detail too: the database and each
   * projection's state, checkpoint, last error and lag.
   */
  @Get('ready')
  async ready(@Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const check = this.token.check(authorizationOf(request));
    // A wrong token here is a guess like any other: counted, and past the limits 429.
    if (check === 'invalid') {
      throw this.failures.reject(
        request,
        'operator_token',
        ApiError.unauthorized(
          'Подробности готовности только с токеном оператора: Authorization: Bearer <ADMIN_TOKEN>; без заголовка: только статус',
          undefined,
          OPERATOR_CHALLENGE,
        ),
      );
    }
    const { status, body } = await readiness(this.pool, this.probe);
    return reply.status(status).send(check === 'valid' ? body : publicReadiness(body));
  }
}
