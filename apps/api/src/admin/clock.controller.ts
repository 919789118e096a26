import { Body, Controller, HttpCode, Inject, Post, UseGuards } from '@nestjs/common';
import type { Infrastructure } from '../../../../libs/infrastructure/src/infrastructure';
import { ApiError } from '../errors/api-error';
import { INFRASTRUCTURE } from '../tokens';
import { AdminTokenGuard } from './admin-token.guard';

const MAX_ADVANCE_SECONDS = 10 * 366 * 24 * 3600;

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
    const seconds = (body as { seconds?: unknown } | null)?.seconds;
    if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < 0 || seconds > MAX_ADVANCE_SECONDS) {
      throw ApiError.validation([
        { param: 'seconds', code: 'invalid', message: `seconds: целое число секунд от 0 до ${MAX_ADVANCE_SECONDS}` },
      ]);
    }
    return { now: (await sync.advance(seconds)).toISOString() };
  }
}
