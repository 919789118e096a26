import { Body, Controller, HttpCode, Inject, Post, UseGuards } from '@nestjs/common';
import type { Infrastructure } from '../../../../libs/infrastructure/src/infrastructure';
import { ApiError } from '../errors/api-error';
import { INFRASTRUCTURE } from '../tokens';
import { isPlainObject, readRequest } from '../http/request-validation';
import { AdvanceClockRequest } from '../operations/advance-clock.request';
import { AdminTokenGuard } from './admin-token.guard';


/** CLOCK=manual only: moves the gateway's one clock forward. */
@Controller('admin/v1/clock')
@UseGuards(AdminTokenGuard)
export class ClockController {
  constructor(@Inject(INFRASTRUCTURE) private readonly infra: Infrastructure) {}

  @Post('advance')
  @HttpCode(200)
  async advance(@Body() body: unknown): Promise<{ now: string }> {
    const sync = this.infra.clockSync;
    if (!sync) throw ApiError.notFound('not_found', 'Ручные часы выключены: запустите шлюз с CLOCK=manual');
    // Read after the manual clock is found; a body that is not an object has no seconds.
    const { seconds } = readRequest(AdvanceClockRequest, isPlainObject(body) ? body : {});
    return { now: (await sync.advance(seconds)).toISOString() };
  }
}
