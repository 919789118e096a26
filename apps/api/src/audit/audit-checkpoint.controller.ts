import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import { NoParameters, validRequest } from '../http/request-pipe';
import { QueryBus } from '@nestjs/cqrs';
import { checkpointSignedText } from '#event-store/hash-chain';
import type { LogCheckpoint } from '#event-store/hash-chain';
import { AuditSigningKeys, GetLogCheckpoint, LogCheckpointUnavailableError } from '#payments/audit';
import { ApiError } from '../http/errors/api-error';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';
import { AUDIT_SIGNER } from '../http/tokens';

/**
 * The log's checkpoint for an operator to record off-site (docs/audit-log.md): the
 * position of the last event it covers, how many events, the running hash, and the
 * gateway's Ed25519 signature over `signedText` (its public key: GET /v1/audit/keys).
 */
@Controller('admin/v1/audit')
@UseGuards(AdminTokenGuard)
export class AuditCheckpointController {
  constructor(
    private readonly queries: QueryBus,
    @Inject(AUDIT_SIGNER) private readonly signer: AuditSigningKeys,
  ) {}

  @Get('checkpoint')
  async checkpoint(@Query(validRequest) _query: NoParameters) {
    let checkpoint;
    try {
      checkpoint = await this.queries.execute(new GetLogCheckpoint());
    } catch (error) {
      if (error instanceof LogCheckpointUnavailableError) {
        throw new ApiError(409, 'conflict', 'Контрольные точки журнала ведутся только для журнала в PostgreSQL (EVENT_STORE=postgres)');
      }
      throw error;
    }
    return checkpointView(checkpoint, this.signer);
  }
}

/** A checkpoint of the event log, signed, as the operator records it outside the gateway. */
export async function checkpointView(checkpoint: LogCheckpoint, signer: AuditSigningKeys) {
  const signedText = checkpointSignedText(checkpoint);
  const { kid, value } = await signer.sign(signedText);
  return {
    position: checkpoint.position,
    events: Number(checkpoint.events),
    hash: checkpoint.hash.toString('hex'),
    algorithm: 'Ed25519' as const,
    kid,
    signedText,
    signature: value,
  };
}
