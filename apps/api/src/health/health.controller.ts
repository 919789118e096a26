import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Pool } from 'pg';
import { DATABASE_POOL, READINESS } from '../tokens';

/** What the readiness check also asks of the process (e.g. its projector's state). */
export interface ReadinessReport {
  readonly projections?: readonly { projection: string; state: string; checkpoint: string | null; lastError: string | null }[];
}
export type ReadinessProbe = () => ReadinessReport;

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

  /** The process can serve: its database answers (migrations ran before the port opened). */
  @Get('ready')
  async ready(@Res() reply: FastifyReply) {
    const report = this.probe();
    try {
      await this.pool.query('SELECT 1');
      return reply.status(200).send({ status: 'ready', database: 'ok', ...report });
    } catch {
      return reply.status(503).send({ status: 'not_ready', database: 'unreachable', ...report });
    }
  }
}
