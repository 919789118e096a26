import { JSONSchema } from 'class-validator-jsonschema';
import { IsQueryInteger, Optional } from '../http/request-rules';

export const MAX_STREAM_PAGE = 1000;
const NOT_DIGITS = 'неотрицательное целое число';

/** The query of GET /admin/v1/streams/{streamName}. */
export class ReadStreamQuery {
  @Optional()
  @IsQueryInteger(0, 999_999_999_999_999, { notDigits: NOT_DIGITS })
  @JSONSchema({ description: 'С какой ревизии потока читать', default: 0 })
  fromRevision?: string;

  @Optional()
  @IsQueryInteger(1, MAX_STREAM_PAGE, { notDigits: NOT_DIGITS, range: `от 1 до ${MAX_STREAM_PAGE}` })
  @JSONSchema({ description: 'Сколько событий', default: 100 })
  limit?: string;
}
