import { Controller, Get, Inject, Query, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { NoParameters, validRequest } from '../../http/request-pipe';
import type { Pool } from 'pg';
import { AuditSigningKeys, publishedKeys } from '#payments/audit';
import { kidNamesKey } from '#platform/secrets';
import { AUDIT_SIGNER, DATABASE_POOL } from '../../http/tokens';

/** The gateway's public signing keys, current and retired, for anyone who checks a checkpoint or a statement (no authentication). */
@Controller('v1/audit')
export class AuditKeysController {
  constructor(
    @Inject(DATABASE_POOL) private readonly pool: Pool,
    @Inject(AUDIT_SIGNER) private readonly signer: AuditSigningKeys,
  ) {}

  @Get('keys')
  async keys(@Query(validRequest) _query: NoParameters, @Req() request: FastifyRequest) {
    let keys = await publishedKeys(this.pool);
    if (!keys.some((key) => key.validUntil === null)) {
      // Nothing signed yet (or a new AUDIT_SIGNING_KEY not yet used): the key that will sign is made and published first.
      await this.signer.current();
      keys = await publishedKeys(this.pool);
    }
    // A row whose public key is not the one its kid names (replaced in the table) is not the gateway's key: never published.
    for (const key of keys.filter((k) => !kidNamesKey(k))) {
      request.log.error({ kid: key.kid }, 'audit_signing_keys: the public key of this kid is not the key the kid names (edited?); not published');
    }
    return { keys: keys.filter((key) => kidNamesKey(key)) };
  }
}
