import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Pool } from 'pg';
import { DATABASE_POOL, READINESS } from '../tokens';
import type { ReadinessProbe } from './readiness';
import { readiness } from './readiness';

export type { ReadinessProbe, ReadinessReport } from './readiness';

@Controller('health')
export class HealthController {
  constructor(
    @Inject(DATABASE_POOL) private readonly pool: Pool,
    @Inject(READINESS) private readonly probe: ReadinessProbe,
  ) {}

  /** The process is up. */
  @Get('live')
  live() {
    return { status: 'ok' };
  }

  /**
   * The process can serve: its database answers (migrations ran before the port
   * opened). A process that runs projections also shows each one's state and lag.
   */
  @Get('ready')
  async ready(@Res() reply: FastifyReply) {
    const { status, body } = await readiness(this.pool, this.probe);
    return reply.status(status).send(body);
  }
}
