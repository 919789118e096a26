import { Body, Controller, HttpCode, Inject, Post, Query, UseGuards } from '@nestjs/common';
import type { Infrastructure } from '#payments/composition';
import { LATEST_MANUAL_TIME, ManualClockBoundError, ManualClockLagError } from '#platform/clock';
import { ApiError } from '../http/errors/api-error';
import { INFRASTRUCTURE } from '../http/tokens';
import { NoParameters, readBody, readQuery, validOptionalBody } from '../http/request-pipe';
import { AdvanceClockRequest } from './advance-clock.request';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';

/** CLOCK=manual only: moves the gateway's one clock forward. */
@Controller('admin/v1/clock')
@UseGuards(AdminTokenGuard)
export class ClockController {
  constructor(@Inject(INFRASTRUCTURE) private readonly infra: Infrastructure) {}

  @Post('advance')
  @HttpCode(200)
  async advance(@Body() body: unknown, @Query() query: unknown): Promise<{ now: string; lagging?: number }> {
    const sync = this.infra.clockSync;
    if (!sync) throw ApiError.notFound('not_found', 'Ручные часы выключены: запустите шлюз с CLOCK=manual');
    // Read after the manual clock is found; no body reads as {} (seconds: required).
    await readQuery(NoParameters, query);
    const { seconds } = await readBody(AdvanceClockRequest, body, validOptionalBody);
    // Past year 9999 an instant has no ISO form the API or PostgreSQL reads back: every projection would stop for good.
    // Refused here at once, and by the move's statement itself (ManualClockBoundError) for advances at once. 0 moves nothing
    // and always reads the clock, also once real time has taken it past the bound (the check after an unknown outcome).
    const pastTheBound = () => ApiError.validation([{ param: 'seconds', code: 'invalid', message: 'seconds: часы нельзя перевести дальше 9000 года' }]);
    if (seconds > 0 && this.infra.clock.now().getTime() + seconds * 1000 > LATEST_MANUAL_TIME) throw pastTheBound();
    try {
      const { now, lagging } = await sync.advance(seconds);
      // Moved (also when its answer was lost and the offset read after shows it), so 200: `lagging` names the live processes
      // not on the new time yet (rare). A 5xx: nothing moved, or (its message marked) the move's outcome is unknown.
      return lagging === 0 ? { now: now.toISOString() } : { now: now.toISOString(), lagging };
    } catch (error) {
      if (error instanceof ManualClockBoundError) throw pastTheBound();
      if (!(error instanceof ManualClockLagError)) throw error;
      const message = `${error.lagging} процесс(ов) шлюза не следят за часами (зависли или отстали): часы не переведены, повторите позже`;
      throw new ApiError(503, 'provider_unavailable', message, undefined, undefined, { 'Retry-After': '1' });
    }
  }
}
