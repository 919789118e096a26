import { IsOptional, IsString } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { MaxLength, MinLength, NotBlank, Required, StorableText } from '../../http/request-rules';

/** The body of POST /admin/v1/payouts/{id}/pay. */
export class PayPayoutRequest {
  @IsOptional()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(256)
  @NotBlank()
  @JSONSchema({ description: 'Хеш транзакции или номер перевода: его видит мерчант (externalId); без него null' })
  externalId?: string | null;
}

/** The body of POST /admin/v1/payouts/{id}/reject and /cancel. */
export class PayoutReasonRequest {
  @Required()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(500)
  @NotBlank()
  @JSONSchema({ description: 'Причина: её видит мерчант (statusReason)' })
  reason!: string;
}
