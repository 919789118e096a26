import { Controller, Get, Inject, Query } from '@nestjs/common';
import { NoParameters, validRequest } from '../../http/request-pipe';
import type { Pool } from 'pg';
import { publishedKeys } from '#payments/audit';
import { DATABASE_POOL } from '../../http/tokens';

/** The gateway's public signing keys, current and retired, for anyone who checks a checkpoint or a statement (no authentication). */
@Controller('v1/audit')
export class AuditKeysController {
  constructor(@Inject(DATABASE_POOL) private readonly pool: Pool) {}

  @Get('keys')
  async keys(@Query(validRequest) _query: NoParameters) {
    return { keys: await publishedKeys(this.pool) };
  }
}
