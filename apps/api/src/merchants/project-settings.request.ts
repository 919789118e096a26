import { METHOD_CODES, MethodCode, MethodOverride, MethodOverrides } from '#domain';
import { parseMoney, parsePercent } from '#ledger';
import type { ProjectSettings } from '#payments/merchants';
import { PROJECT_STATUSES, WEBHOOK_EVENTS } from '#payments/merchants';
import type { WebhookEventKind } from '#payments/merchants';
import { Absent, ArrayOf, Bool, Email, HttpUrl, Integer, Money, Nested, OneOf, Percent, Text, Uuid } from '../http/request-fields';
import { RequestSchema } from '../http/request-validation';

/** One payment method's settings of a project: every field optional. */
@RequestSchema({ description: 'Настройки способа оплаты проекта; неизвестные поля: 400 validation' })
export class MethodSettings {
  @Percent({ description: 'Ставка мерчанта, процентов (до четырёх знаков после точки)' })
  feePct?: string | number;

  @Money({ description: 'Минимальная сумма счёта' })
  min?: string | number;

  @Money({ description: 'Максимальная сумма счёта' })
  max?: string | number;

  @Bool({ description: 'Включён ли способ' })
  enabled?: boolean;
}

/** The per-method settings, by method code. */
@RequestSchema({ description: 'Настройки способов оплаты' })
export class ProjectMethods {
  @Nested(() => MethodSettings, { schemaName: 'MethodSettings', description: 'СБП' })
  sbp?: MethodSettings;

  @Nested(() => MethodSettings, { schemaName: 'MethodSettings', description: 'Карта' })
  card?: MethodSettings;

  @Nested(() => MethodSettings, { schemaName: 'MethodSettings', description: 'USDT' })
  crypto?: MethodSettings;
}

/** The settings a project is created with or changed by (after `name`, which each request declares). */
export abstract class ProjectSettingsFields {
  @OneOf(PROJECT_STATUSES, { description: 'Статус проекта: боевой ключ создаёт счета только в active' })
  status?: (typeof PROJECT_STATUSES)[number];

  @HttpUrl({ nullable: true, description: 'Адрес вебхуков (http:// или https://, публичный); null: без вебхуков' })
  webhookUrl?: string | null;

  @ArrayOf(WEBHOOK_EVENTS, { description: 'Какие события отправлять' })
  webhookEvents?: WebhookEventKind[];

  @Bool({ description: 'Приём USDT (способ crypto)' })
  usdtEnabled?: boolean;

  @Integer({ min: 0, max: 720, description: 'Холд оплат, часов' })
  holdHours?: number;

  @Integer({ min: 0, max: 100, description: 'Доля ставки на покупателе по умолчанию, процентов' })
  customerFeeShare?: number;

  @Nested(() => ProjectMethods, { schemaName: 'ProjectMethods', description: 'Ставки и лимиты способов оплаты' })
  methods?: ProjectMethods;
}

/** The body of POST /admin/v1/projects. */
@RequestSchema({ description: 'Новый проект аккаунта' })
export class CreateProjectRequest extends ProjectSettingsFields {
  @Uuid({ required: true, description: 'Аккаунт мерчанта' })
  accountId!: string;

  @Text({ required: true, min: 1, max: 255, description: 'Название проекта' })
  name!: string;
}

/** The body of PATCH /admin/v1/projects/{id}: the fields to change. */
@RequestSchema({ description: 'Изменение настроек проекта: только переданные поля' })
export class UpdateProjectRequest extends ProjectSettingsFields {
  @Absent('read_only', 'аккаунт проекта не меняется')
  accountId?: never;

  @Text({ min: 1, max: 255, description: 'Название проекта' })
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
  @Text({ required: true, min: 1, max: 255, description: 'Название мерчанта' })
  name!: string;

  @Email({ required: true, description: 'E-mail мерчанта' })
  email!: string;
}

/** The body of POST /admin/v1/projects/{id}/keys/rotate. */
export class RotateKeysRequest {
  @OneOf(['test', 'live'], { required: true, description: 'Какая пара ключей: test или live' })
  mode!: 'test' | 'live';
}
