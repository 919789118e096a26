import { Controller, Get, Inject, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import { checkpointKeyId, checkpointSignedText, signCheckpoint } from '#event-store/hash-chain';
import type { LogCheckpoint } from '#event-store/hash-chain';
import { auditCheckpointKeyOf, GetLogCheckpoint, LogCheckpointUnavailableError } from '#payments/audit';
import type { Infrastructure } from '#payments/composition';
import { ApiError } from '../http/errors/api-error';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';
import { INFRASTRUCTURE } from '../http/tokens';

/**
 * The log's checkpoint for an operator to record off-site (docs/audit-log.md): the
 * position of the last event it covers, how many events, the running hash, and an
 * HMAC-SHA256 signature of the deployment's checkpoint key over `signedText`.
 */
@Controller('admin/v1/audit')
@UseGuards(AdminTokenGuard)
export class AuditCheckpointController {
  constructor(
    private readonly queries: QueryBus,
    @Inject(INFRASTRUCTURE) private readonly infrastructure: Infrastructure,
  ) {}

  @Get('checkpoint')
  async checkpoint() {
    let checkpoint;
    try {
      checkpoint = await this.queries.execute(new GetLogCheckpoint());
    } catch (error) {
      if (error instanceof LogCheckpointUnavailableError) {
        throw new ApiError(409, 'conflict', 'Контрольные точки журнала ведутся только для журнала в PostgreSQL (EVENT_STORE=postgres)');
      }
      throw error;
    }
    const key = auditCheckpointKeyOf(this.infrastructure);
    return checkpointView(checkpoint, key);
  }
}

/** A checkpoint of the event log, signed, as the operator records it outside the gateway. */
export const checkpointView = (checkpoint: LogCheckpoint, key: Buffer) => ({
  position: checkpoint.position,
  events: Number(checkpoint.events),
  hash: checkpoint.hash.toString('hex'),
  algorithm: 'HMAC-SHA256',
  keyId: checkpointKeyId(key),
  signedText: checkpointSignedText(checkpoint),
  signature: signCheckpoint(key, checkpoint),
});
