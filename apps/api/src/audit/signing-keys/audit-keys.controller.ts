import { Controller, Get, Inject, Query } from '@nestjs/common';
import { NoParameters, validRequest } from '../../http/request-pipe';
import type { Pool } from 'pg';
import { AuditSigningKeys, publishedKeys } from '#payments/audit';
import { AUDIT_SIGNER, DATABASE_POOL } from '../../http/tokens';

/** The gateway's public signing keys, current and retired, for anyone who checks a checkpoint or a statement (no authentication). */
@Controller('v1/audit')
export class AuditKeysController {
  constructor(
    @Inject(DATABASE_POOL) private readonly pool: Pool,
    @Inject(AUDIT_SIGNER) private readonly signer: AuditSigningKeys,
  ) {}

  @Get('keys')
  async keys(@Query(validRequest) _query: NoParameters) {
    const keys = await publishedKeys(this.pool);
    if (keys.some((key) => key.validUntil === null)) return { keys };
    // Nothing signed yet (or a new AUDIT_SIGNING_KEY not yet used): the key that will sign is made and published first.
    await this.signer.current();
    return { keys: await publishedKeys(this.pool) };
  }
}
