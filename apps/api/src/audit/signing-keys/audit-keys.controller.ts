import { Controller, Get, Inject } from '@nestjs/common';
import type { Pool } from 'pg';
import { publishedKeys } from '#payments/audit';
import { DATABASE_POOL } from '../../http/tokens';

/** The gateway's public signing keys, current and retired, for anyone who checks a checkpoint or a statement (no authentication). */
@Controller('v1/audit')
export class AuditKeysController {
  constructor(@Inject(DATABASE_POOL) private readonly pool: Pool) {}

  @Get('keys')
  async keys() {
    return { keys: await publishedKeys(this.pool) };
  }
}
