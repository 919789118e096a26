import { QueryInteger } from '../http/request-fields';

export const MAX_STREAM_PAGE = 1000;
const NOT_DIGITS = 'неотрицательное целое число';

/** The query of GET /admin/v1/streams/{streamName}. */
export class ReadStreamQuery {
  @QueryInteger({ min: 0, max: 999_999_999_999_999, default: 0, notDigitsMessage: NOT_DIGITS, description: 'С какой ревизии потока читать' })
  fromRevision?: string;

  @QueryInteger({
    min: 1,
    max: MAX_STREAM_PAGE,
    default: 100,
    notDigitsMessage: NOT_DIGITS,
    rangeMessage: `от 1 до ${MAX_STREAM_PAGE}`,
    description: 'Сколько событий',
  })
  limit?: string;
}
