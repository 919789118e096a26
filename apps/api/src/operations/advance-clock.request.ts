import { JSONSchema } from 'class-validator-jsonschema';
import { IsInteger } from '../http/request-rules';

export const MAX_ADVANCE_SECONDS = 10 * 366 * 24 * 3600;
/** One message and one code for every refusal, absence included. */
const SECONDS = { message: `целое число секунд от 0 до ${MAX_ADVANCE_SECONDS}`, context: { code: 'invalid' } };

/** The body of POST /admin/v1/clock/advance (CLOCK=manual). */
export class AdvanceClockRequest {
  @IsInteger(0, MAX_ADVANCE_SECONDS, SECONDS)
  @JSONSchema({ description: 'На сколько секунд перевести часы вперёд' })
  seconds!: number;
}
