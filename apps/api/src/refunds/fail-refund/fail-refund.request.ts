import { IsString } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { MaxLength, MinLength, Optional, StorableText } from '../../http/request-rules';

/** The body of POST /admin/v1/refunds/{id}/fail (optional). */
export class FailRefundRequest {
  @Optional()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(500)
  @JSONSchema({ description: 'Причина отказа банка; по умолчанию refused by the bank' })
  reason?: string;
}
