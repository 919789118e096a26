import { field, RequestRule } from '../http/request-validation';

export const MAX_ADVANCE_SECONDS = 10 * 366 * 24 * 3600;
const MESSAGE = `целое число секунд от 0 до ${MAX_ADVANCE_SECONDS}`;

/** The body of POST /admin/v1/clock/advance (CLOCK=manual): one rule, one message, absent included. */
@RequestRule<AdvanceClockRequest>((r) => (r.seconds === undefined ? [{ param: 'seconds', code: 'invalid', message: MESSAGE }] : []))
export class AdvanceClockRequest {
  @field(
    [{ code: 'invalid', message: MESSAGE, valid: (v) => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_ADVANCE_SECONDS }],
    {},
    { type: 'integer', minimum: 0, maximum: MAX_ADVANCE_SECONDS, description: 'На сколько секунд перевести часы вперёд' },
  )
  seconds!: number;
}
