import { Equals, IsArray, IsBoolean, IsIn, IsObject, IsOptional, IsString, IsUUID, Matches, ValidateNested } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { METHOD_CODES, MethodCode, MethodOverride, MethodOverrides } from '#domain';
import { parseMoney, parsePercent } from '#ledger';
import { LEDGER_MODES } from '#ledger';
import type { LedgerMode } from '#ledger';
import type { ProjectSettings } from '#payments/merchants';
import { PROJECT_STATUSES, WEBHOOK_EVENTS } from '#payments/merchants';
import type { WebhookEventKind } from '#payments/merchants';
import {
  EMAIL,
  IsHttpUrl,
  IsInteger,
  IsMoney,
  IsPercent,
  MaxLength,
  MaxUtf8Bytes,
  MinLength,
  NotBlank,
  Optional,
  Required,
  StorableText,
} from '../http/request-rules';

/** One payment method's settings of a project: every field optional. */
@JSONSchema({ description: 'Настройки способа оплаты проекта; неизвестные поля: 400 validation' })
export class MethodSettings {
  @Optional()
  @IsPercent()
  @JSONSchema({ description: 'Ставка мерчанта, процентов (до четырёх знаков после точки)' })
  feePct?: string | number;

  @Optional()
  @IsMoney()
  @JSONSchema({ description: 'Минимальная сумма счёта' })
  min?: string | number;

  @Optional()
  @IsMoney()
  @JSONSchema({ description: 'Максимальная сумма счёта' })
  max?: string | number;

  @Optional()
  @IsBoolean()
  @JSONSchema({ description: 'Включён ли способ' })
  enabled?: boolean;
}

/** The per-method settings, by method code. */
@JSONSchema({ description: 'Настройки способов оплаты' })
export class ProjectMethods {
  @Optional()
  @IsObject()
  @ValidateNested()
  @JSONSchema({ description: 'СБП' })
  sbp?: MethodSettings;

  @Optional()
  @IsObject()
  @ValidateNested()
  @JSONSchema({ description: 'Карта' })
  card?: MethodSettings;

  @Optional()
  @IsObject()
  @ValidateNested()
  @JSONSchema({ description: 'USDT' })
  crypto?: MethodSettings;
}

const EVENTS = `массив из значений: ${WEBHOOK_EVENTS.join(', ')}`;

/** The settings a project is created with or changed by (after `name`, which each request declares). */
export abstract class ProjectSettingsFields {
  @Optional()
  @IsIn(PROJECT_STATUSES)
  @JSONSchema({ description: 'Статус проекта: боевой ключ создаёт счета только в active' })
  status?: (typeof PROJECT_STATUSES)[number];

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(2048)
  // In bytes too: the delivery queue's index takes an entry of at most 2704 bytes, and a URL it refused would hold
  // every project's webhooks back (the outbox retries the batch).
  @MaxUtf8Bytes(2048)
  @IsHttpUrl()
  @JSONSchema({ description: 'Адрес вебхуков (http:// или https://, публичный; не длиннее 2048 байт в UTF-8); null: без вебхуков' })
  webhookUrl?: string | null;

  // Duplicates are allowed and read as one.
  @Optional()
  @IsArray({ message: EVENTS, context: { code: 'invalid_enum' } })
  @IsIn(WEBHOOK_EVENTS, { each: true, message: EVENTS })
  @JSONSchema({ description: 'Какие события отправлять' })
  webhookEvents?: WebhookEventKind[];

  @Optional()
  @IsBoolean()
  @JSONSchema({ description: 'Приём USDT (способ crypto)' })
  usdtEnabled?: boolean;

  @Optional()
  @IsInteger(0, 720)
  @JSONSchema({ description: 'Холд оплат, часов' })
  holdHours?: number;

  @Optional()
  @IsInteger(0, 100)
  @JSONSchema({ description: 'Доля ставки на покупателе по умолчанию, процентов' })
  customerFeeShare?: number;

  @Optional()
  @IsObject()
  @ValidateNested()
  @JSONSchema({ description: 'Ставки и лимиты способов оплаты' })
  methods?: ProjectMethods;
}

/** The body of POST /admin/v1/projects. */
@JSONSchema({ description: 'Новый проект аккаунта' })
export class CreateProjectRequest extends ProjectSettingsFields {
  @Required()
  @IsString()
  @StorableText()
  @MaxLength(36)
  @IsUUID('loose')
  @JSONSchema({ description: 'Аккаунт мерчанта' })
  accountId!: string;

  @Required()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(255)
  @NotBlank()
  @JSONSchema({ description: 'Название проекта' })
  name!: string;
}

/** The body of PATCH /admin/v1/projects/{id}: the fields to change. */
@JSONSchema({ description: 'Изменение настроек проекта: только переданные поля' })
export class UpdateProjectRequest extends ProjectSettingsFields {
  // Any value sent is refused.
  @Optional()
  @Equals(undefined, { message: 'аккаунт проекта не меняется', context: { code: 'read_only' } })
  @JSONSchema({ not: {}, description: 'аккаунт проекта не меняется' })
  accountId?: never;

  @Optional()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(255)
  @NotBlank()
  @JSONSchema({ description: 'Название проекта' })
  name?: string;
}

/** The settings of a valid request over `base` (defaults for a new project, the stored ones for PATCH). */
export function settingsOf(r: ProjectSettingsFields & { name?: string }, base: ProjectSettings): ProjectSettings {
  const overrides: MethodOverrides = { ...base.methodOverrides };
  for (const code of METHOD_CODES) {
    const m = r.methods?.[code];
    if (m === undefined) continue;
    const o: { -readonly [K in keyof MethodOverride]: MethodOverride[K] } = { ...(base.methodOverrides[code] ?? {}) };
    if (m.feePct !== undefined) o.feePct = parsePercent(m.feePct);
    if (m.min !== undefined) o.min = parseMoney(m.min);
    if (m.max !== undefined) o.max = parseMoney(m.max);
    if (m.enabled !== undefined) o.enabled = m.enabled;
    (overrides as Record<MethodCode, MethodOverride>)[code] = o;
  }
  return {
    name: r.name ?? base.name,
    status: r.status ?? base.status,
    webhookUrl: r.webhookUrl === undefined ? base.webhookUrl : r.webhookUrl,
    webhookEvents: r.webhookEvents === undefined ? base.webhookEvents : [...new Set(r.webhookEvents)],
    usdtEnabled: r.usdtEnabled ?? base.usdtEnabled,
    holdHours: r.holdHours ?? base.holdHours,
    customerFeeShare: r.customerFeeShare ?? base.customerFeeShare,
    methodOverrides: r.methods === undefined ? base.methodOverrides : overrides,
  };
}

/** The body of POST /admin/v1/accounts. */
export class CreateAccountRequest {
  @Required()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(255)
  @NotBlank()
  @JSONSchema({ description: 'Название мерчанта' })
  name!: string;

  @Required()
  @IsString()
  @StorableText()
  @MaxLength(254)
  @Matches(EMAIL, { message: 'некорректный адрес электронной почты' })
  @JSONSchema({ description: 'E-mail мерчанта' })
  email!: string;
}

/** The body of POST /admin/v1/projects/{id}/keys/rotate. */
export class RotateKeysRequest {
  @Required()
  @IsIn(LEDGER_MODES)
  @JSONSchema({ description: 'Какая пара ключей: test или live' })
  mode!: LedgerMode;
}
