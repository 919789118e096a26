import { IsInt, Max, Min } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

export const MAX_ADVANCE_SECONDS = 10 * 366 * 24 * 3600;
/** One message and one code for every refusal, absence included. */
const SECONDS = { message: `целое число секунд от 0 до ${MAX_ADVANCE_SECONDS}`, context: { code: 'invalid' } };

/** The body of POST /admin/v1/clock/advance (CLOCK=manual). */
export class AdvanceClockRequest {
  @IsInt(SECONDS)
  @Min(0, SECONDS)
  @Max(MAX_ADVANCE_SECONDS, SECONDS)
  @JSONSchema({ description: 'На сколько секунд перевести часы вперёд' })
  seconds!: number;
}
