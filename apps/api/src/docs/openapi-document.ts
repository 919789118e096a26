/**
 * The machine-readable description of the merchant API v1: OpenAPI 3.1.0, description
 * version 1.0.0. A plain object, derived by hand from the spec
 * (`payment-gateway-api-v1.md`) and from DESIGN.md where the spec says "not shown".
 * Served as `GET /v1/openapi.json` and rendered as `GET /docs`; the tests validate
 * real responses of the gateway against its schemas.
 *
 * Schemas are JSON Schema 2020-12 (the 3.1 dialect): nullable fields are
 * `type: [X, 'null']`, examples are `examples: [...]`, no OpenAPI-3.0 `nullable`.
 * Response objects stay open (no `additionalProperties: false`) so that adding a
 * field is not a breaking change; the error body is closed.
 */

import { CreateInvoiceRequest, Customer } from '../invoices/create-invoice/create-invoice.request';
import { ListInvoicesQuery } from '../invoices/list-invoices/list-invoices.request';
import { CreatePayoutRequest } from '../payouts/create-payout/create-payout.request';
import { ListPayoutsQuery } from '../payouts/list-payouts/list-payouts.request';
import { RefundInvoiceRequest } from '../refunds/refund-invoice/refund-invoice.request';
import { PeriodQuery } from '../audit/audit-reports.request';
import type { PublishedKey } from '#payments/audit';
import { ListEventsQuery } from '../events/list-events.request';
import { ListBalanceTransactionsQuery } from '../balance-transactions/list-balance-transactions.request';
import type { balanceTransactionView } from '../balance-transactions/balance-transactions.controller';
import { DELIVERY_STATUSES } from '#payments/events';
import { BALANCE_TRANSACTION_TYPES, MERCHANT_ACCOUNTS } from '#ledger';
import { queryParameters, requestSchema } from './request-schemas';
import { FEE_PAYERS, INVOICE_STATUSES, MAX_REFUNDS_PER_INVOICE, METHOD_CODES, PAYOUT_METHODS, PAYOUT_SOURCES, PAYOUT_STATUSES, REFUND_STATUSES } from '#domain';
import type { InvoiceCreatedView, InvoiceView, PayoutView, RefundView } from '#payments';
import { WEBHOOK_EVENTS } from '#payments/merchants';
import type { WebhookMessage } from '#payments/webhooks';
import type { ErrorBody, ErrorDetail } from '../http/errors/api-error';
import type { balanceView, methodView } from '../balance/reference.controller';
import type { payoutAddressView } from '../payouts/payout-addresses/payout-addresses.route';
import { STORABLE_JSON_SCHEMA } from '../http/request-rules';

// ---------------------------------------------------------------------------
// The subset of OpenAPI 3.1 that this document uses (typos in keywords fail to compile).
// ---------------------------------------------------------------------------

export type JsonType = 'string' | 'number' | 'integer' | 'boolean' | 'object' | 'array' | 'null';

export interface SchemaObject {
  readonly $ref?: string;
  readonly title?: string;
  readonly description?: string;
  readonly type?: JsonType | readonly JsonType[];
  readonly format?: 'uuid' | 'date-time' | 'uri' | 'email';
  readonly pattern?: string;
  readonly enum?: readonly (string | number | boolean | null)[];
  readonly const?: string | number | boolean | null;
  readonly minimum?: number;
  readonly multipleOf?: number;
  readonly maxProperties?: number;
  readonly maxItems?: number;
  readonly propertyNames?: SchemaObject;
  readonly not?: SchemaObject;
  readonly contains?: SchemaObject;
  readonly maximum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly default?: unknown;
  readonly deprecated?: boolean;
  readonly examples?: readonly unknown[];
  readonly properties?: Readonly<Record<string, SchemaObject>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean | SchemaObject;
  readonly unevaluatedProperties?: boolean;
  readonly dependentRequired?: Readonly<Record<string, readonly string[]>>;
  readonly items?: SchemaObject;
  readonly oneOf?: readonly SchemaObject[];
  readonly anyOf?: readonly SchemaObject[];
  readonly allOf?: readonly SchemaObject[];
}

export interface MediaTypeObject {
  readonly schema: SchemaObject;
}

export interface HeaderObject {
  readonly description: string;
  readonly required?: boolean;
  readonly schema: SchemaObject;
}

export interface ParameterObject {
  readonly name: string;
  readonly in: 'query' | 'path' | 'header';
  readonly description?: string;
  readonly required?: boolean;
  readonly deprecated?: boolean;
  readonly schema: SchemaObject;
}

export interface RequestBodyObject {
  readonly description?: string;
  readonly required: boolean;
  readonly content: { readonly 'application/json': MediaTypeObject };
}

export interface ResponseObject {
  readonly description: string;
  readonly headers?: Readonly<Record<string, HeaderObject>>;
  readonly content?: { readonly 'application/json': MediaTypeObject; readonly 'text/csv'?: MediaTypeObject };
  /** The spec's error codes this status carries for this operation (extension; the body is the Error schema). */
  readonly 'x-error-codes'?: readonly string[];
}

export type SecurityRequirement = Readonly<Record<string, readonly string[]>>;

export interface OperationObject {
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags: readonly string[];
  readonly parameters?: readonly ParameterObject[];
  readonly requestBody?: RequestBodyObject;
  readonly responses: Readonly<Record<string, ResponseObject>>;
  readonly security?: readonly SecurityRequirement[];
}

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';
export const HTTP_METHODS: readonly HttpMethod[] = ['get', 'post', 'put', 'patch', 'delete'];

export type PathItemObject = Partial<Readonly<Record<HttpMethod, OperationObject>>> & { readonly parameters?: readonly ParameterObject[] };

export type SecuritySchemeObject =
  | { readonly type: 'http'; readonly scheme: 'bearer'; readonly bearerFormat?: string; readonly description: string }
  | { readonly type: 'apiKey'; readonly in: 'header'; readonly name: string; readonly description: string };

export interface OpenApiDocument {
  readonly openapi: '3.1.0';
  readonly info: { readonly title: string; readonly version: string; readonly description: string; readonly summary?: string };
  readonly jsonSchemaDialect: string;
  readonly servers: readonly { readonly url: string; readonly description?: string }[];
  readonly security: readonly SecurityRequirement[];
  readonly tags: readonly { readonly name: string; readonly description: string }[];
  readonly paths: Readonly<Record<string, PathItemObject>>;
  readonly webhooks: Readonly<Record<string, PathItemObject>>;
  readonly components: {
    readonly schemas: Readonly<Record<string, SchemaObject>>;
    readonly securitySchemes: Readonly<Record<string, SecuritySchemeObject>>;
  };
}

// ---------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------

export const ref = (name: string): SchemaObject => ({ $ref: `#/components/schemas/${name}` });

/**
 * The schema of an answer the gateway sends as `T`: a property for each field of T and no
 * other (the compiler holds the two together), `required` among them. Answers stay open
 * objects, so that adding a field is not a breaking change; the error body is closed.
 */
export const answer = <T extends object>(
  schema: Omit<SchemaObject, 'type' | 'properties' | 'required'> & {
    readonly required: readonly (keyof T & string)[];
    readonly properties: { readonly [K in keyof T]-?: SchemaObject };
  },
): SchemaObject => ({ type: 'object', ...schema });
const refWith = (name: string, description: string, extra: Omit<SchemaObject, '$ref' | 'description'> = {}): SchemaObject => ({
  $ref: `#/components/schemas/${name}`,
  description,
  ...extra,
});

const MONEY_PATTERN = '^\\d+\\.\\d{2}$';
const PERCENT_PATTERN = '^\\d+(\\.\\d+)?$';

const datetime = (description: string): SchemaObject => ({ type: 'string', format: 'date-time', description });
const nullableDatetime = (description: string): SchemaObject => ({ type: ['string', 'null'], format: 'date-time', description });
const nullableString = (description: string): SchemaObject => ({ type: ['string', 'null'], description });
const money = (description: string): SchemaObject => refWith('Money', description);
const percent = (description: string): SchemaObject => ({ type: 'string', pattern: PERCENT_PATTERN, description, examples: ['3.5'] });
const rub: SchemaObject = { type: 'string', const: 'RUB', description: 'Валюта, всегда RUB' };

const jsonBody = (schema: SchemaObject) => ({ 'application/json': { schema } }) as const;

const RETRY_AFTER: Readonly<Record<string, HeaderObject>> = {
  'Retry-After': { description: 'Через сколько секунд можно повторить запрос (целое число)', required: true, schema: { type: 'integer', minimum: 0 } },
};

const ERROR_TEXT: Readonly<Record<string, string>> = {
  validation: 'тело не JSON, неверный тип, формат или значение перечисления; param указывает поле',
  unauthorized: 'нет заголовка Authorization / X-Public-Id, ключ не найден или отозван',
  timestamp_invalid: 'режим HMAC: X-Timestamp отсутствует, не в секундах Unix или дальше 300 секунд от времени сервера',
  signature_invalid: 'режим HMAC: подпись не совпадает или уже использована',
  project_not_active: 'проект не прошёл модерацию, отклонён или заблокирован: боевой ключ не может создавать новые счета (повтор orderId уже созданного счёта отвечает им)',
  test_mode: 'POST /payouts с тестовым ключом',
  invoice_not_found: 'счёт или возврат не найден в этом проекте или создан ключом другого режима',
  address_not_found: 'реквизиты для выплаты не найдены',
  not_found: 'выплата не найдена (по id или по orderId)',
  duplicate_request: 'выплата без orderId повторяет сумму и реквизиты заявки, созданной меньше минуты назад',
  order_id_conflict: 'orderId уже занят счётом с другими параметрами (amount, method, customerFeePct)',
  conflict: `возврат по счёту не в статусе paid или partially_refunded или сверх ${MAX_REFUNDS_PER_INVOICE} возвратов по одному счёту`,
  too_many_pending: 'уже три заявки на выплату в обработке (pending, approved или processing)',
  amount_out_of_range: 'сумма ниже минимума или выше максимума способа оплаты или проекта (для выплат: ниже минимальной выплаты или выше 1000000000.00)',
  method_unavailable: 'способ оплаты отключён в проекте или временно недоступен (для открытого счёта: не среди способов, закреплённых при его создании)',
  customer_fee_pct_too_high: 'customerFeePct выше ставки мерчанта для способа оплаты',
  refund_exceeds_amount: 'сумма возврата больше невозвращённого остатка',
  insufficient_balance: 'недостаточно доступного баланса мерчанта',
  address_not_confirmed: 'реквизиты для выплаты не подтверждены',
  rate_limited: 'больше 60 запросов в секунду на ключ, опрос одного счёта / выплаты чаще раза в 3 секунды, или тяжёлое чтение аккаунта не дождалось очереди (уже ждут 20 или прошло 30 секунд)',
  internal: 'внутренняя ошибка сервера',
  provider_unavailable: 'способ оплаты временно недоступен у банков или идут технические работы',
  idempotency_key_conflict: 'Idempotency-Key уже использован в этом проекте и режиме с другим запросом (метод, адрес или тело); param: Idempotency-Key',
  idempotency_key_in_use: 'запрос с этим Idempotency-Key ещё выполняется дольше, чем ждёт повтор; повторить после Retry-After, ответ будет ответом первого запроса',
  payload_too_large: 'тело запроса больше 64 КБ',
  request_timeout: 'запрос (заголовки или тело) не получен целиком за 60 секунд; безопасно отправить снова',
  unsupported_media_type: 'тело не application/json или сжато (Content-Encoding не identity)',
};

/** An error response: the one Error schema, with the codes this operation answers for this status. */
function errorResponse(title: string, codes: readonly string[], headers?: Readonly<Record<string, HeaderObject>>): ResponseObject {
  const lines = codes.map((code) => `- \`${code}\`: ${ERROR_TEXT[code] ?? ''}`);
  return {
    description: `${title}\n\n${lines.join('\n')}`,
    ...(headers ? { headers } : {}),
    content: jsonBody(ref('Error')),
    'x-error-codes': codes,
  };
}

/** 401 for every authenticated operation: either mode's refusals. */
const UNAUTHORIZED = errorResponse('Нет авторизации или она неверна', ['unauthorized', 'timestamp_invalid', 'signature_invalid'], {
  'X-Server-Time': {
    description: 'Только у timestamp_invalid: время шлюза в секундах Unix, чтобы клиент с ушедшими часами поправил X-Timestamp и подписал запрос заново',
    required: false,
    schema: { type: 'string', pattern: '^\\d+$' },
  },
});
/** 429: the per-key request rate applies to every endpoint (Limits); polling limits add to it on GET by id. */
const RATE_LIMITED = errorResponse('Слишком много запросов; повторить после Retry-After', ['rate_limited'], RETRY_AFTER);
const INTERNAL = errorResponse('Внутренняя ошибка сервера; безопасно повторить с задержкой', ['internal']);
/** 503: every operation reads or writes the database; also while a read model it reads is rebuilt (docs/api.md). */
export const UNAVAILABLE = errorResponse(
  'Сервис временно недоступен: база данных не ответила или данные пересобираются; повторить после Retry-After (запись — с тем же Idempotency-Key или orderId)',
  ['provider_unavailable'],
  RETRY_AFTER,
);
const VALIDATION = errorResponse('Запрос не прошёл проверку', ['validation']);
/** A body the gateway could not read: too large, or not JSON as sent. */
const PAYLOAD_TOO_LARGE = errorResponse('Тело запроса слишком большое', ['payload_too_large']);
/** A request (headers or body) not all in within 60 s: nothing was read or done. */
const REQUEST_TIMEOUT = errorResponse('Запрос не получен целиком вовремя', ['request_timeout']);
const UNSUPPORTED_MEDIA_TYPE = errorResponse('Тело запроса не в формате application/json', ['unsupported_media_type']);

const ok = (description: string, schema: SchemaObject): ResponseObject => ({ description, content: jsonBody(schema) });

/** Marks the stored first answer of an Idempotency-Key sent again. */
const IDEMPOTENT_REPLAYED: Readonly<Record<string, HeaderObject>> = {
  'Idempotent-Replayed': {
    description: 'true: это сохранённый первый ответ на запрос с тем же Idempotency-Key, отправленный снова (запрос не выполнялся повторно)',
    required: false,
    schema: { type: 'string', const: 'true' },
  },
};
/** A success answer of a POST that takes an Idempotency-Key. */
const okKeyed = (description: string, schema: SchemaObject): ResponseObject => ({ ...ok(description, schema), headers: IDEMPOTENT_REPLAYED });
/** 409 of a POST that takes an Idempotency-Key: its own codes and the key's. */
const conflictKeyed = (title: string, codes: readonly string[]): ResponseObject =>
  errorResponse(`${title}; или конфликт Idempotency-Key`, [...codes, 'idempotency_key_conflict', 'idempotency_key_in_use'], {
    'Retry-After': {
      description: 'Только у idempotency_key_in_use: через сколько секунд повторить запрос (целое число)',
      required: false,
      schema: { type: 'integer', minimum: 0 },
    },
    ...IDEMPOTENT_REPLAYED,
  });

// Parameters -----------------------------------------------------------------

/** The optional Idempotency-Key header of every merchant POST. */
const idempotencyKeyParam: ParameterObject = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Ключ идемпотентности: от 1 до 255 печатных символов ASCII (например UUID). Повтор с тем же ключом и тем же запросом (метод, адрес, тело байт в байт) ' +
    'в том же проекте и режиме (любой его парой ключей) возвращает первый ответ (тот же статус и тело, тот же возврат или выплата) с заголовком Idempotent-Replayed: true; ' +
    'с другим запросом: 409 idempotency_key_conflict. Ответы 2xx и 4xx сохраняются, 5xx нет. Ключ хранится 24 часа. Неверный ключ: 400 validation, param Idempotency-Key.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
};
const invoiceIdParam: ParameterObject = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'Идентификатор счёта',
  schema: { type: 'string', format: 'uuid' },
};

// ---------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------

// Request schemas: generated from the request DTOs, the validator's own declaration.
// Answers: one declaration each, typed by what the gateway sends (a property for each
// field of that type and no other); their enums are the domain's.

const invoiceStatus: SchemaObject = { type: 'string', enum: INVOICE_STATUSES, description: 'Статус счёта' };
const feePct = percent('Ставка мерчанта для способа; пока способ не выбран, наибольшая из ставок');
const customerFeeShare: SchemaObject = { type: 'integer', minimum: 0, maximum: 100, deprecated: true, description: 'Устарело: доля ставки на покупателе в процентах' };

const invoiceCreated = answer<InvoiceCreatedView>({
  description: 'Ответ POST /invoices',
  required: ['id', 'url', 'status', 'amount', 'feePct', 'feeAmount', 'customerFeeAmount', 'payableAmount', 'netAmount', 'expiresAt'],
  properties: {
    id: { type: 'string', format: 'uuid', description: 'Идентификатор счёта' },
    url: { type: 'string', format: 'uri', description: 'Страница оплаты' },
    status: invoiceStatus,
    amount: money('Сумма счёта'),
    feePct,
    feeAmount: money('Вся комиссия сервиса'),
    customerFeePct: {
      type: ['string', 'null'],
      pattern: PERCENT_PATTERN,
      description: 'Процент на покупателе для выбранного способа; null, пока способ не выбран',
    },
    customerFeeShare,
    customerFeeAmount: money('Часть комиссии, которую покупатель платит сверх суммы'),
    payableAmount: money('Сколько платит покупатель: amount + customerFeeAmount'),
    netAmount: money('Сколько зачисляется мерчанту: amount − (feeAmount − customerFeeAmount)'),
    feePayer: { type: 'string', enum: FEE_PAYERS, deprecated: true, description: 'Устарело, вычисляется: merchant, если покупатель платит 0%, иначе customer' },
    expiresAt: datetime('Когда истекает срок оплаты'),
  },
});

const invoice = answer<InvoiceView>({
  description: 'Счёт: ответ GET /invoices/{id} и элемент списка',
  required: [
    'id',
    'url',
    'orderId',
    'status',
    'amount',
    'feePct',
    'feeAmount',
    'customerFeeAmount',
    'payableAmount',
    'netAmount',
    'currency',
    'isTest',
    'createdAt',
    'expiresAt',
  ],
  properties: {
    id: { type: 'string', format: 'uuid', description: 'Идентификатор счёта' },
    url: { type: 'string', format: 'uri', description: 'Страница оплаты' },
    orderId: { type: 'string', description: 'Номер заказа мерчанта' },
    status: invoiceStatus,
    amount: money('Сумма счёта'),
    feePct,
    feeAmount: money('Вся комиссия сервиса'),
    customerFeePct: { type: ['string', 'null'], pattern: PERCENT_PATTERN, description: 'Процент на покупателе; null, пока способ не выбран' },
    customerFeeShare,
    customerFeeAmount: money('Часть комиссии, которую покупатель платит сверх суммы'),
    payableAmount: money('Сколько платит покупатель'),
    netAmount: money('Сколько зачисляется мерчанту'),
    refundedAmount: money('Сколько возвращено'),
    currency: rub,
    method: { type: ['string', 'null'], enum: [...METHOD_CODES, null], description: 'Способ оплаты; null, пока покупатель не выбрал' },
    feePayer: { type: 'string', enum: FEE_PAYERS, deprecated: true, description: 'Устарело, вычисляется как в InvoiceCreated' },
    description: nullableString('Описание счёта'),
    customer: refWith('Customer', 'Покупатель'),
    customFields: { type: ['object', 'null'], additionalProperties: ref('StorableJson'), description: 'customFields из запроса, как переданы' },
    isTest: { type: 'boolean', description: 'Счёт создан тестовым ключом' },
    createdAt: datetime('Когда создан'),
    expiresAt: datetime('Когда истекает срок оплаты'),
    paidAt: nullableDatetime('Когда оплачен'),
    availableAt: nullableDatetime('Когда сумма станет доступна к выплате (холд проекта); null: холда нет'),
  },
});

const list = (description: string, item: string) =>
  answer<{ items: unknown; nextCursor: unknown; hasMore: unknown }>({
    description,
    required: ['items', 'hasMore'],
    properties: {
      items: { type: 'array', items: ref(item) },
      nextCursor: nullableString('Курсор следующей страницы (параметр cursor); null на последней'),
      hasMore: { type: 'boolean', description: 'Есть ли следующая страница' },
    },
  });

const refund = answer<RefundView>({
  description: 'Возврат',
  required: ['id', 'invoiceId', 'amount', 'currency', 'status', 'createdAt'],
  properties: {
    id: { type: 'string', pattern: '^rf_\\S+$', description: 'Идентификатор возврата: префикс rf_ и идентификатор' },
    invoiceId: { type: 'string', format: 'uuid', description: 'Счёт' },
    amount: money('Сумма возврата'),
    currency: rub,
    status: { type: 'string', enum: REFUND_STATUSES, description: 'Статус возврата' },
    createdAt: datetime('Когда создан'),
    completedAt: nullableDatetime('Когда завершён'),
  },
});

const method = answer<ReturnType<typeof methodView>>({
  description: 'Способ оплаты с лимитами и ставкой',
  required: ['code', 'title', 'feePct', 'min', 'max', 'currency', 'enabled'],
  properties: {
    code: { type: 'string', enum: METHOD_CODES, description: 'Код способа' },
    title: { type: 'string', description: 'Название' },
    feePct: percent('Ставка мерчанта'),
    min: money('Минимальная сумма счёта'),
    max: money('Максимальная сумма счёта'),
    currency: rub,
    enabled: { type: 'boolean', description: 'Включён ли способ' },
  },
});

const methodList = answer<{ methods: unknown }>({
  description: 'Ответ GET /methods',
  required: ['methods'],
  properties: { methods: { type: 'array', items: ref('Method') } },
});

const balance = answer<ReturnType<typeof balanceView>>({
  description: 'Баланс мерчанта в режиме ключа',
  required: ['available', 'pending', 'currency'],
  properties: {
    available: money('Доступно к выплате'),
    pending: money('Оплачено, но на холде; станет доступно после холда проекта (24 часа по умолчанию)'),
    reserved: money('Заморожено заявками на выплату и возвратами'),
    currency: rub,
  },
});

const buckets = (what: string): SchemaObject => ({
  type: 'object',
  description: what,
  required: ['pending', 'available', 'reserved'],
  properties: { pending: money('На холде'), available: money('Доступно'), reserved: money('Заморожено') },
});
const statement: SchemaObject = {
  type: 'object',
  description:
    'Подписанная выписка за период (from, to] (docs/audit-log.md): подпись Ed25519 над документом без поля signature в каноническом JSON (RFC 8785: ключи по порядку, без пробелов); ' +
    'ответ — сам канонический JSON. Выписка закрытого периода одна и та же при каждом запросе.',
  required: ['object', 'accountId', 'mode', 'currency', 'from', 'to', 'opening', 'closing', 'transactions', 'checkpoint', 'signature'],
  properties: {
    object: { type: 'string', const: 'statement' },
    accountId: { type: 'string', format: 'uuid' },
    mode: { type: 'string', enum: ['test', 'live'] },
    currency: rub,
    from: datetime('Начало периода, не включая его'),
    to: datetime('Конец периода, включительно'),
    opening: buckets('Баланс на момент from'),
    closing: buckets('Баланс на момент to'),
    transactions: {
      type: 'array',
      description: 'Движения баланса за период по порядку журнала: по строке на каждую проводку по корзине мерчанта',
      items: {
        type: 'object',
        required: ['entryId', 'kind', 'cause', 'occurredAt', 'bucket', 'amount'],
        properties: {
          entryId: { type: 'string' },
          kind: { type: 'string', description: 'Вид записи журнала: payment_recorded, hold_released, funds_reserved, reservation_settled, reservation_released' },
          cause: { type: 'string', description: 'Причина: payment:<счёт>, hold_release:<счёт>, reserve:<резерв>, settle:<резерв>, release:<резерв>' },
          occurredAt: datetime('Когда'),
          bucket: { type: 'string', enum: ['pending', 'available', 'reserved'] },
          amount: { type: 'string', pattern: '^-?\\d+\\.\\d{2}$', description: 'Рубли со знаком: + пришло в корзину, − ушло' },
        },
      },
    },
    checkpoint: {
      type: ['object', 'null'],
      description: 'Контрольная точка журнала у последней записи счёта не позже to: позиция, число событий, хеш (null: записей нет, или журнал в EventStoreDB)',
      required: ['position', 'events', 'hash'],
      properties: { position: { type: 'string' }, events: { type: 'integer' }, hash: { type: 'string', pattern: '^[0-9a-f]{64}$' } },
    },
    signature: {
      type: 'object',
      required: ['kid', 'alg', 'value'],
      properties: { kid: { type: 'string', description: 'Ключ из GET /audit/keys' }, alg: { type: 'string', const: 'Ed25519' }, value: { type: 'string', description: 'base64' } },
    },
  },
};
const auditKeyList = answer<{ keys: unknown }>({
  description: 'Открытые ключи подписи шлюза, текущий и выведенные (validUntil)',
  required: ['keys'],
  properties: {
    keys: {
      type: 'array',
      items: answer<PublishedKey>({
        required: ['kid', 'alg', 'publicKey', 'validFrom', 'validUntil'],
        properties: {
          kid: { type: 'string', pattern: '^[0-9a-f]{16}$', description: 'Первые 16 hex-цифр SHA-256 сырого открытого ключа (32 байта)' },
          alg: { type: 'string', const: 'Ed25519' },
          publicKey: { type: 'string', description: 'SPKI PEM' },
          validFrom: datetime('С какого момента подписывает'),
          validUntil: nullableDatetime('До какого момента подписывал (null: текущий)'),
        },
      }),
    },
  },
});

const payoutAddress = answer<ReturnType<typeof payoutAddressView>>({
  description: 'Подтверждённые реквизиты для выплаты',
  required: ['id', 'method', 'account', 'status', 'createdAt'],
  properties: {
    id: { type: 'integer', description: 'Идентификатор реквизитов' },
    method: { type: 'string', enum: PAYOUT_METHODS, description: 'Способ выплаты' },
    label: nullableString('Подпись'),
    account: { type: 'string', description: 'Телефон или адрес, маскированный: у телефона первые 5 и последние 2 символа (+7916*****67), у адреса первые 6 и последние 4' },
    bank: nullableString('Банк получателя (sbp)'),
    status: { type: 'string', const: 'confirmed', description: 'Всегда confirmed: возвращаются только подтверждённые реквизиты' },
    confirmedAt: nullableDatetime('Когда подтверждены'),
    createdAt: datetime('Когда добавлены'),
  },
});

const payoutAddressList = answer<{ items: unknown }>({
  description: 'Ответ GET /payout-addresses',
  required: ['items'],
  properties: { items: { type: 'array', items: ref('PayoutAddress') } },
});

const payout = answer<PayoutView>({
  description: 'Заявка на выплату аккаунта мерчанта (ответ GET /payouts/{id})',
  required: ['id', 'status', 'amount', 'feeAmount', 'netAmount', 'currency', 'method', 'source', 'createdAt'],
  properties: {
    id: { type: 'integer', description: 'Идентификатор выплаты' },
    status: { type: 'string', enum: PAYOUT_STATUSES, description: 'Статус выплаты' },
    amount: money('Сумма заявки'),
    feeAmount: money('Комиссия: sbp 1.00%, usdt_trc20 2.00%, usdt_bep20 1.50% от amount (по умолчанию), до копейки половиной вверх'),
    netAmount: money('amount − feeAmount; уходит получателю'),
    currency: rub,
    method: { type: 'string', enum: PAYOUT_METHODS, description: 'Способ выплаты' },
    account: nullableString('Телефон или адрес, маскированный: +7916*****67, TQn9Y2****bLSE'),
    bank: nullableString('Банк получателя'),
    addressId: { type: ['integer', 'null'], description: 'Реквизиты' },
    orderId: nullableString('Идентификатор заявки у мерчанта'),
    comment: nullableString('Комментарий'),
    usdtAmount: {
      type: ['string', 'null'],
      pattern: '^\\d+\\.\\d{6}$',
      description: 'Сколько USDT отправить (только USDT-способы, иначе null): netAmount / usdtRate, округлено вниз до 6 знаков',
      examples: ['5.157894'],
    },
    usdtRate: {
      type: ['string', 'null'],
      pattern: MONEY_PATTERN,
      description: 'Рублей за 1 USDT на момент создания (USDT_RUB_RATE; только USDT-способы, иначе null)',
      examples: ['95.00'],
    },
    statusReason: nullableString('Причина отклонения или отмены'),
    externalId: nullableString('Хеш транзакции или номер перевода после выплаты'),
    source: { type: 'string', enum: PAYOUT_SOURCES, description: 'Откуда заявка' },
    createdAt: datetime('Когда создана'),
    processedAt: nullableDatetime('Когда обработана'),
  },
});

const errorSchema = answer<ErrorBody>({
  description: 'Единый формат ошибки. Клиент действует по code, не по тексту; message на русском, для логов',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: answer<ErrorBody['error']>({
      required: ['code', 'message'],
      additionalProperties: false,
      properties: {
        code: { type: 'string', pattern: '^[a-z][a-z0-9]*(_[a-z0-9]+)*$', description: 'Стабильный машиночитаемый код (snake_case)', examples: ['validation'] },
        message: { type: 'string', description: 'Текст для логов; не показывать покупателю как есть' },
        param: { type: 'string', description: 'Поле запроса, к которому относится ошибка (например amount, customer.email)' },
        details: {
          type: 'array',
          description: 'Подробности проверки: по одной записи на каждое нарушение',
          items: answer<ErrorDetail>({
            required: ['param', 'code', 'message'],
            properties: {
              param: { type: 'string', description: 'Поле запроса' },
              code: { type: 'string', description: 'Код нарушения (required, invalid_type, too_long, ...)' },
              message: { type: 'string', description: 'Текст для логов' },
            },
          }),
        },
      },
    }),
  },
});

// Webhooks -------------------------------------------------------------------

type EventKind = (typeof WEBHOOK_EVENTS)[number];
const kindsOf = (subject: string) => WEBHOOK_EVENTS.filter((kind) => kind.startsWith(`${subject}.`));

const envelope = (description: string, kinds: readonly EventKind[], data: SchemaObject) =>
  answer<WebhookMessage['envelope']>({
    description,
    required: ['id', 'type', 'createdAt', 'isTest', 'data'],
    properties: {
      id: { type: 'string', description: 'Идентификатор события; ключ идемпотентности получателя (повторная доставка несёт тот же id)' },
      type: { type: 'string', enum: kinds, description: 'Вид события' },
      createdAt: datetime('Когда произошло событие'),
      isTest: { type: 'boolean', description: 'Событие тестового режима' },
      data,
    },
  });

const invoiceEvent = envelope('Тело вебхуков invoice.paid, invoice.failed, invoice.expired', kindsOf('invoice'), {
  type: 'object',
  required: ['invoice'],
  properties: { invoice: refWith('Invoice', 'Счёт в форме GET /invoices/{id}') },
});
const refundEvent = envelope('Тело вебхуков refund.succeeded, refund.failed', kindsOf('refund'), {
  type: 'object',
  required: ['refund', 'invoice'],
  properties: { refund: refWith('Refund', 'Возврат'), invoice: refWith('Invoice', 'Счёт возврата') },
});
const payoutEvent = envelope('Тело вебхуков payout.paid, payout.rejected (у payout.rejected статус выплаты rejected или cancelled)', kindsOf('payout'), {
  type: 'object',
  required: ['payout'],
  properties: { payout: refWith('Payout', 'Выплата в форме GET /payouts/{id}') },
});

const eventEnvelope = envelope('Событие: тело его вебхука и состояние доставки', WEBHOOK_EVENTS, { type: 'object', additionalProperties: true, description: 'Как в теле вебхука' });
const event: SchemaObject = {
  ...eventEnvelope,
  required: ['id', 'type', 'createdAt', 'isTest', 'data', 'deliveryStatus'],
  properties: {
    ...eventEnvelope.properties,
    deliveryStatus: {
      type: 'string',
      enum: DELIVERY_STATUSES,
      description:
        'pending (попыток ещё не было), delivered (одна из попыток удалась, в том числе до повторной отправки оператором), failing (попытка не удалась, успешной нет), endpoint_disabled (адрес отключён), not_subscribed',
    },
  },
};

const balanceTransaction = answer<ReturnType<typeof balanceTransactionView>>({
  description: 'Движение баланса: проводка в одну корзину (pending, available, reserved)',
  required: ['id', 'type', 'amount', 'bucket', 'balanceAfter', 'fee', 'currency', 'createdAt', 'availableAt', 'invoiceId', 'refundId', 'payoutId'],
  properties: {
    id: { type: 'string' },
    type: { type: 'string', enum: BALANCE_TRANSACTION_TYPES },
    amount: { type: 'string', pattern: '^-?\\d+\\.\\d{2}$', description: 'Со знаком: сколько вошло в корзину (+) или вышло (−)' },
    bucket: { type: 'string', enum: MERCHANT_ACCOUNTS },
    balanceAfter: money('Баланс корзины после движения'),
    fee: { type: ['string', 'null'], pattern: MONEY_PATTERN, description: 'Комиссия шлюза (платёж, выплата) или null' },
    currency: rub,
    createdAt: datetime('Когда произошло'),
    availableAt: nullableDatetime('Когда деньги платежа доступны (платёж, снятие холда)'),
    invoiceId: nullableString('Счёт'),
    refundId: nullableString('Возврат'),
    payoutId: { type: ['integer', 'null'], description: 'Выплата' },
  },
});

const WEBHOOK_HEADERS: readonly ParameterObject[] = [
  {
    name: 'X-Service-Signature',
    in: 'header',
    required: true,
    description: 'sha256= и hex HMAC-SHA256 сырого тела, ключ: webhook_secret проекта',
    schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
  },
  { name: 'X-Service-Timestamp', in: 'header', required: true, description: 'Время попытки доставки, секунды Unix', schema: { type: 'string', pattern: '^\\d+$' } },
  { name: 'X-Service-Event', in: 'header', required: true, description: 'Вид события', schema: { type: 'string', enum: WEBHOOK_EVENTS } },
  {
    name: 'X-Service-Delivery-Id',
    in: 'header',
    required: true,
    description: 'Идентификатор доставки (UUID), одинаковый во всех попытках одной доставки',
    schema: { type: 'string', format: 'uuid' },
  },
  { name: 'X-Service-Test', in: 'header', required: true, description: 'Тестовый режим: true или false', schema: { type: 'string', enum: ['true', 'false'] } },
  {
    name: 'X-Service-Signature-Timestamped',
    in: 'header',
    required: true,
    description:
      'Подпись, которая покрывает и время: `t=<секунды Unix>,v2=<hex>`, где hex: HMAC-SHA256 строки `webhook.<t>.<сырое тело>` на webhook_secret проекта, t равно X-Service-Timestamp ' +
      '(префикс `webhook.` отличает её от подписи запросов к API, `<X-Timestamp>.<тело>` на том же секрете). ' +
      'Получатель проверяет подпись и отклоняет доставку, если t дальше допуска (например 300 секунд) от его часов: так старую доставку нельзя прислать повторно.',
    schema: { type: 'string', pattern: '^t=\\d+,v2=[0-9a-f]{64}$' },
  },
  // Standard Webhooks (https://www.standardwebhooks.com/), so that a stock verifier can check a delivery (decision 0065).
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: 'Standard Webhooks: id события (поле id тела), одинаковый во всех попытках и повторах',
    schema: { type: 'string', format: 'uuid' },
  },
  { name: 'webhook-timestamp', in: 'header', required: true, description: 'Standard Webhooks: время попытки, секунды Unix (равно X-Service-Timestamp)', schema: { type: 'string', pattern: '^\\d+$' } },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description: 'Standard Webhooks: `v1,` и base64 HMAC-SHA256 строки `<webhook-id>.<webhook-timestamp>.<сырое тело>` на webhook_secret проекта (байты UTF-8)',
    schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/]{43}=$' },
  },
];

const WEBHOOK_MEANING: Readonly<Record<EventKind, string>> = {
  'invoice.paid': 'Счёт оплачен',
  'invoice.failed': 'Оплата отклонена',
  'invoice.expired': 'Срок оплаты истёк',
  'refund.succeeded': 'Возврат выполнен (после 202 на POST /invoices/{id}/refund)',
  'refund.failed': 'Возврат не удался',
  'payout.paid': 'Выплата произведена',
  'payout.rejected': 'Выплата отклонена или отменена оператором (data.payout.status: rejected или cancelled); сумма вернулась на баланс',
};

/** The payload schema of a kind: InvoiceEvent for invoice.*, RefundEvent for refund.*, PayoutEvent for payout.*. */
const payloadOf = (kind: EventKind) => `${kind[0]!.toUpperCase()}${kind.slice(1, kind.indexOf('.'))}Event`;

function webhook(kind: EventKind): PathItemObject {
  const payload = payloadOf(kind);
  const operationId = `${kind.replace(/\.(\w)/, (_, c: string) => c.toUpperCase())}Webhook`;
  return {
    post: {
      operationId,
      summary: WEBHOOK_MEANING[kind],
      description:
        'POST на webhook_url проекта. Получатель отвечает 2xx за 10 секунд, иначе повтор через 1 мин, 5 мин, 30 мин, 2 ч, 12 ч и 24 ч. ' +
        'Обработка должна быть идемпотентной по id события.' +
        (kind.startsWith('payout.') ? ' Отправляется на webhook_url каждого проекта аккаунта, подписанного на событие.' : ''),
      tags: ['Вебхуки'],
      security: [],
      parameters: WEBHOOK_HEADERS,
      requestBody: {
        required: true,
        content: jsonBody({ allOf: [ref(payload), { type: 'object', properties: { type: { const: kind } } }] }),
      },
      responses: {
        '2XX': { description: 'Доставка принята; код и тело ответа сохраняются в истории доставок' },
        default: { description: 'Доставка не принята: будет повторена по расписанию' },
      },
    },
  };
}

// ---------------------------------------------------------------------------
// The description text
// ---------------------------------------------------------------------------

const DESCRIPTION = `Платёжный шлюз для мерчантов: счета, возвраты, выплаты, справочники и вебхуки.

Все тела запросов и ответов: JSON (application/json). Суммы: строки в рублях ровно с двумя знаками после точки (Money, например \`1500.00\`). Время: ISO 8601 в UTC. Базовый адрес уже содержит версию (\`/v1\`).

## Режимы и ключи

Ключ \`sk_test_\` работает в песочнице, \`sk_live_\`: в бою, на том же адресе. Объекты одного режима не видны ключам другого (404 \`invoice_not_found\`). Выплаты бывают только боевые: с тестовым ключом POST /payouts отвечает 403 \`test_mode\`, GET /payouts: пустой список, GET /payouts/{id} и GET /payouts?orderId=: 404 \`not_found\`.

## Авторизация

Запрос использует один из двух режимов:

1. **Bearer**: заголовок \`Authorization: Bearer <SECRET_KEY>\` с секретным ключом проекта (\`sk_live_\` или \`sk_test_\`).
2. **Подпись HMAC**: заголовки \`X-Public-Id\` (публичный ключ \`pk_live_\` / \`pk_test_\`), \`X-Timestamp\` (секунды Unix, не дальше ±300 секунд от времени сервера) и \`X-Signature\` (или \`Signature\`): hex HMAC-SHA256 строки \`<timestamp>.<сырое тело>\`; ключ: вся строка webhook secret проекта с префиксом \`whsec_\` как байты UTF-8 (не декодированная из base64); у GET тело пустое, строка: \`<timestamp>.\`. Подпись не покрывает ни метод, ни путь, ни query, ни публичный ключ. Каждая подпись принимается один раз в течение 10 минут, поэтому два запроса проекта (тестовым и боевым ключом тоже) с одной секундой и одним телом (например, два GET) несут одну подпись, и второй получает 401 \`signature_invalid\`: одинаковое тело подписывайте не чаще раза в секунду, параллельные чтения делайте с Bearer.

## Ошибки

Тело ошибки: \`{"error": {"code", "message", "param"?, "details"?}}\`. Клиент действует по \`code\`; \`message\` на русском и может меняться. Неизвестные поля тела и параметры запроса отклоняются: 400 \`validation\` с \`param\` = имя поля (код в details: \`unknown_field\`); числа в деньгах и процентах проверяются так, как записаны в теле (без экспоненты и лишних знаков после точки). Повторять с растущей от 250 мс задержкой (не больше 4-5 раз) 429 (после Retry-After), 500, 503 и таймауты; 400, 401, 403, 404, 409, 422 без изменений не повторять (кроме 409 \`idempotency_key_in_use\`, после Retry-After). POST /invoices с тем же orderId повторять безопасно всегда; любой POST с тем же \`Idempotency-Key\` тоже (см. ниже).

## Ключи идемпотентности

Каждый POST мерчанта (POST /invoices, POST /invoices/{id}/refund, POST /payouts) принимает необязательный заголовок \`Idempotency-Key\`: от 1 до 255 печатных символов ASCII, например UUID, новый для каждой операции. Без заголовка всё работает как прежде.

- Ключ принадлежит проекту и режиму, какой бы парой ключей ни был отправлен запрос: повтор новой парой после ротации ключей получает первый ответ. В другом режиме или проекте тот же ключ независим.
- Повтор с тем же ключом и тем же запросом (метод, адрес и тело байт в байт) возвращает первый ответ: тот же статус, то же тело, тот же возврат (тот же \`id\`) или та же выплата, с заголовком \`Idempotent-Replayed: true\`. Повтор с тем же ключом и другим запросом: 409 \`idempotency_key_conflict\` (param \`Idempotency-Key\`).
- Сохраняются ответы 2xx и 4xx (ошибки самого запроса повторяются как были; для новой попытки нужен новый ключ); 5xx и 503 не сохраняются, и повтор с тем же ключом выполняет запрос снова, без двойного возврата или выплаты: идентификатор возврата и заявка выплаты без orderId выводятся из ключа.
- Два одновременных запроса с одним ключом: выполняется один, второй ждёт его ответа и получает тот же ответ. Если первый не ответил за несколько секунд: 409 \`idempotency_key_in_use\` с Retry-After (такой 409 повторять можно).
- Ключ хранится 24 часа по часам шлюза, потом забывается.
- Ключ вне 1–255 печатных символов ASCII или заголовок, указанный дважды: 400 \`validation\`, param \`Idempotency-Key\`. В режиме HMAC повтор подписывается заново (новый X-Timestamp), тело то же.

## Лимиты

- 60 запросов в секунду на ключ (все методы), иначе 429 \`rate_limited\` с Retry-After.
- Тяжёлые чтения (GET /balance/transactions, в том числе CSV, GET /events, GET /statements): не больше 2 одновременно на аккаунт мерчанта (все его ключи и проекты) в процессе API; следующие ждут очереди по порядку, пока ответ не отправлен целиком; ждать могут не больше 20, каждый до 30 секунд, иначе 429 \`rate_limited\` с Retry-After: 1.
- Один счёт или одну выплату опрашивать не чаще раза в 3 секунды.
- Размер страницы: limit 1..100, по умолчанию 20. orderId: до 128 символов. Описание счёта: до 255. customFields: до 2 КБ. Время жизни счёта: 1..1440 минут, по умолчанию 60. Комментарий выплаты: до 500. В обработке не больше 3 выплат. Окно дубликата выплаты: 1 минута.
- Холд по умолчанию: 24 часа (настройка проекта). Лимиты суммы счёта: по способу, из GET /methods.

## Устаревшие поля

\`customerFeeShare\`, \`feePayer\`, \`payerEmail\` продолжают работать и помечены \`deprecated\`.

## Решения там, где спецификация говорит «not shown»

- **Переходы счёта**: created → pending (покупатель выбрал способ или начал оплату) → paid или failed; created или pending → expired, когда наступает expiresAt; paid → partially_refunded → refunded по мере успешных возвратов. failed и expired конечны. Невозвращённый остаток учитывает и возвраты в статусе pending, поэтому два возврата не превысят сумму.
- **Возвраты** списываются с доступного баланса (available) аккаунта мерчанта в режиме счёта: сумма сразу переходит из available в reserved и уходит с баланса, когда возврат выполнен (при refund.failed возвращается в available). Средства на холде (pending) не используются; если available мало: 422 \`insufficient_balance\`. Проверки по порядку: счёт (404 \`invoice_not_found\`), его статус (409 \`conflict\`), число возвратов по счёту (не больше ${MAX_REFUNDS_PER_INVOICE}, считая неудавшиеся, но не отказанные за нехваткой баланса; сверх: 409 \`conflict\`), невозвращённый остаток (422 \`refund_exceeds_amount\`, любая сумма больше него; полный возврат, когда возвращать уже нечего, тоже), баланс (422 \`insufficient_balance\`). Идентификатор возврата: \`rf_\` и 24 символа [0-9a-z].
- **Переходы выплаты**: pending → approved → processing → paid; pending, approved или processing → rejected; pending → cancelled. «В обработке» для \`too_many_pending\`: pending, approved или processing (не больше трёх таких заявок на аккаунт).
- **Комиссия выплаты** по способу: \`sbp\`: 1.00%, \`usdt_trc20\`: 2.00%, \`usdt_bep20\`: 1.50%; удерживается из суммы (netAmount = amount − feeAmount, комиссия округляется до копейки половиной вверх). С баланса списывается amount.
- **Минимальная выплата**: 100.00 для каждого способа. Ставки и минимумы по умолчанию; оператор шлюза меняет их настройкой \`PAYOUT_TERMS\`. Сумма ниже минимума способа: 422 \`amount_out_of_range\`; выше доступного баланса (available): 422 \`insufficient_balance\` (у обоих param = amount). Спецификация перечисляет для этих случаев и 422 \`address_not_confirmed\`, но код для них оставляет открытым; шлюз отвечает \`address_not_confirmed\` только на неподтверждённые реквизиты. Проверки POST /payouts по порядку: ключ (403 \`test_mode\`), тело (400 \`validation\`), повтор orderId (200), реквизиты (404 \`address_not_found\`, 422 \`address_not_confirmed\`), минимум и максимум 1000000000.00 (422 \`amount_out_of_range\`), заявки в обработке (409 \`too_many_pending\`), дубликат (409 \`duplicate_request\`), баланс (422 \`insufficient_balance\`).
- **Выплаты принадлежат аккаунту мерчанта**, а не проекту: реквизиты, заявки и боевой баланс, с которого они списываются, общие для всех проектов аккаунта; боевой ключ любого его проекта видит и создаёт их. Лимит заявок в обработке, окно дубликата и уникальность orderId выплаты действуют в пределах аккаунта. Повтор POST /payouts с orderId уже созданной заявки возвращает её (200), не сравнивая остальные поля.
- **Маскирование реквизитов** в GET /payout-addresses и в Payout: телефон СБП сохраняет первые 5 символов и последние 2 (\`+7916*****67\`), адрес кошелька: первые 6 символов, \`****\` и последние 4 (\`TQn9Y2****bLSE\`). В POST /payouts account передаётся полностью: телефон как +7XXXXXXXXXX (допускаются 8 вместо +7, пробелы, дефисы и скобки), адрес TRC-20 с учётом регистра, адрес BEP-20 без учёта регистра.
- **USDT**: usdtRate: курс шлюза в рублях за 1 USDT на момент создания заявки (настройка \`USDT_RUB_RATE\`, по умолчанию 95.00); usdtAmount = netAmount / usdtRate, округлено вниз до 6 знаков после точки. У выплат на СБП оба поля null.
- **Список выплат**: \`{items, nextCursor, hasMore}\`, как список счетов, новые первыми; \`nextCursor\` передаётся в параметр \`cursor\`.
- **Дополнительные поля Payout** после processedAt: нет.
- **Тело вебхука**: \`{id, type, createdAt, isTest, data}\`; \`data.invoice\` (форма Invoice) у событий счёта, \`data.refund\` и \`data.invoice\` у событий возврата, \`data.payout\` (форма GET /payouts/{id}) у событий выплаты. \`id\`: идентификатор события, ключ идемпотентности получателя.
- **Заголовки доставки**: \`X-Service-Timestamp\`: секунды Unix попытки; \`X-Service-Delivery-Id\`: UUID, одинаковый во всех попытках одной доставки; \`X-Service-Test\`: \`true\` или \`false\`.
- **Подписка на события**: webhook_url и список видов событий (по умолчанию все семь) задаются в настройках проекта (в кабинете / операторским API), не через этот API.
- **Деньги**: внутри целые копейки; комиссия округляется до копейки половиной вверх; в JSON: строка с двумя знаками. Проценты: десятичные строки (например \`3.5\`).
- **Ошибки**: сообщения на русском, коды из спецификации. \`details\` у 400 \`validation\`: массив \`{param, code, message}\`, по записи на каждое нарушение.
- **Правила изменений и вывода версий из обращения**: не определены; добавление новых полей в ответы не считается несовместимым изменением, поэтому схемы ответов открыты.
`;

// ---------------------------------------------------------------------------
// The document
// ---------------------------------------------------------------------------

/** Each operation of the paths with the answers every request may get among its own: 408 (not all in within 60 s) and 503. */
const answeringEveryRequest = (paths: Record<string, PathItemObject>, unavailable: ResponseObject): Record<string, PathItemObject> =>
  Object.fromEntries(
    Object.entries(paths).map(([path, item]) => [
      path,
      Object.fromEntries(
        Object.entries(item).map(([key, value]) =>
          (HTTP_METHODS as readonly string[]).includes(key)
            ? [key, { ...(value as OperationObject), responses: { ...(value as OperationObject).responses, '408': REQUEST_TIMEOUT, '503': unavailable } }]
            : [key, value],
        ),
      ),
    ]),
  );

export const OPENAPI_DOCUMENT: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Payment Gateway API',
    summary: 'Счета, возвраты, выплаты и вебхуки платёжного шлюза',
    version: '1.0.0',
    description: DESCRIPTION,
  },
  // Plain JSON Schema 2020-12: the schemas use none of the OAS base dialect's additions
  // (test/openapi compiles each with Ajv 2020, strict), and stock tools such as Prism know
  // this URI where they silently skip schemas of the OAS dialect URI.
  jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
  servers: [{ url: '/v1', description: 'API v1 (боевой и тестовый режим выбираются ключом)' }],
  security: [{ bearerAuth: [] }, { hmacPublicId: [], hmacTimestamp: [], hmacSignature: [] }],
  tags: [
    { name: 'Счета', description: 'Создание, список и чтение счетов' },
    { name: 'Возвраты', description: 'Полные и частичные возвраты оплаченных счетов; обрабатываются асинхронно' },
    { name: 'Справочники', description: 'Способы оплаты и баланс мерчанта' },
    { name: 'Выплаты', description: 'Вывод средств с баланса на подтверждённые реквизиты' },
    { name: 'Вебхуки', description: 'Исходящие подписанные уведомления на webhook_url проекта' },
    { name: 'Аудит', description: 'Подписанные выписки и открытые ключи, которыми их проверить' },
  ],
  paths: answeringEveryRequest({
    '/invoices': {
      post: {
        operationId: 'createInvoice',
        summary: 'Создать счёт',
        description:
          'Создаёт счёт и возвращает ссылку на страницу оплаты. Повтор с тем же orderId и теми же параметрами возвращает тот же счёт (200); ' +
          'с другими параметрами (amount, method, customerFeePct): 409 order_id_conflict.',
        tags: ['Счета'],
        parameters: [idempotencyKeyParam],
        requestBody: { required: true, content: jsonBody(ref('CreateInvoiceRequest')) },
        responses: {
          '201': okKeyed('Счёт создан', ref('InvoiceCreated')),
          '200': okKeyed('Счёт с этим orderId уже есть в проекте с теми же параметрами (идемпотентный повтор)', ref('InvoiceCreated')),
          '400': VALIDATION,
          '413': PAYLOAD_TOO_LARGE,
          '415': UNSUPPORTED_MEDIA_TYPE,
          '401': UNAUTHORIZED,
          '403': errorResponse('Проект не активен', ['project_not_active']),
          '409': conflictKeyed('orderId занят счётом с другими параметрами', ['order_id_conflict']),
          '422': errorResponse('Запрос корректен, но не может быть выполнен', ['amount_out_of_range', 'method_unavailable', 'customer_fee_pct_too_high']),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
      get: {
        operationId: 'listInvoices',
        summary: 'Список счетов',
        description: 'Счета проекта в режиме ключа, новые первыми, постраничный курсор.',
        tags: ['Счета'],
        parameters: queryParameters(ListInvoicesQuery),
        responses: {
          '200': ok('Страница счетов', ref('InvoiceList')),
          '400': VALIDATION,
          '401': UNAUTHORIZED,
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
    '/invoices/{id}': {
      get: {
        operationId: 'getInvoice',
        summary: 'Счёт',
        description: 'Один счёт. Опрос одного счёта чаще раза в 3 секунды: 429 rate_limited с Retry-After; итог оплаты приходит вебхуками.',
        tags: ['Счета'],
        parameters: [invoiceIdParam],
        responses: {
          '200': ok('Счёт', ref('Invoice')),
          '400': VALIDATION,
          '401': UNAUTHORIZED,
          '404': errorResponse('Счёт не найден', ['invoice_not_found']),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
    '/invoices/{id}/refund': {
      post: {
        operationId: 'refundInvoice',
        summary: 'Вернуть оплату',
        description:
          'Полный (без amount) или частичный возврат счёта в статусе paid или partially_refunded. Сумма сразу резервируется из доступного баланса (available) ' +
          'мерчанта в режиме ключа; итог приходит вебхуком refund.succeeded или refund.failed (тогда сумма возвращается в available). ' +
          'Полный возврат: тело {} или запрос без тела и без Content-Type; пустое тело с Content-Type application/json — 400 (это не JSON): ' +
          'потерянная по дороге сумма не должна стать полным возвратом.',
        tags: ['Возвраты'],
        parameters: [{ ...invoiceIdParam, description: 'Идентификатор возвращаемого счёта' }, idempotencyKeyParam],
        requestBody: { required: false, content: jsonBody(ref('RefundInvoiceRequest')) },
        responses: {
          '202': okKeyed('Возврат принят, статус pending (повтор с тем же Idempotency-Key: первый ответ; если он не был сохранён (5xx), тот же возврат в его текущем статусе: failed, если баланс его отклонил)', ref('Refund')),
          '400': VALIDATION,
          '413': PAYLOAD_TOO_LARGE,
          '415': UNSUPPORTED_MEDIA_TYPE,
          '401': UNAUTHORIZED,
          '404': errorResponse('Счёт не найден', ['invoice_not_found']),
          '409': conflictKeyed(`Счёт не в статусе paid или partially_refunded, или по нему уже ${MAX_REFUNDS_PER_INVOICE} возвратов`, ['conflict']),
          '422': errorResponse('Возврат невозможен: сумма больше невозвращённого остатка (с учётом возвратов в pending) или больше available', [
            'refund_exceeds_amount',
            'insufficient_balance',
          ]),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
    '/refunds/{id}': {
      get: {
        operationId: 'getRefund',
        summary: 'Возврат',
        tags: ['Возвраты'],
        parameters: [{ name: 'id', in: 'path', required: true, description: 'Идентификатор возврата (rf_…)', schema: { type: 'string' } }],
        responses: {
          '200': ok('Возврат', ref('Refund')),
          '400': VALIDATION,
          '401': UNAUTHORIZED,
          '404': errorResponse('Возврат не найден (код тот же, что для счёта)', ['invoice_not_found']),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
    '/methods': {
      get: {
        operationId: 'listMethods',
        summary: 'Способы оплаты',
        description: 'Способы оплаты проекта с лимитами суммы и ставками мерчанта.',
        tags: ['Справочники'],
        responses: { '200': ok('Способы оплаты', ref('MethodList')), '400': VALIDATION, '401': UNAUTHORIZED, '429': RATE_LIMITED, '500': INTERNAL },
      },
    },
    '/balance': {
      get: {
        operationId: 'getBalance',
        summary: 'Баланс',
        description: 'Баланс мерчанта в режиме ключа.',
        tags: ['Справочники'],
        responses: { '200': ok('Баланс', ref('Balance')), '400': VALIDATION, '401': UNAUTHORIZED, '429': RATE_LIMITED, '500': INTERNAL },
      },
    },
    '/statements': {
      get: {
        operationId: 'getStatement',
        summary: 'Подписанная выписка',
        description: 'Выписка по балансу аккаунта в режиме ключа за период (from, to], подписанная ключом шлюза; проверяется открытым ключом (GET /audit/keys, verifyStatement в SDK). Не больше 500 000 движений (transactions): за период с большим числом — 400 validation с кодом too_many_transactions на from; запрашивайте период частями (закрывающий остаток одной части — начальный следующей).',
        tags: ['Аудит'],
        parameters: queryParameters(PeriodQuery),
        responses: { '200': ok('Выписка (канонический JSON)', ref('Statement')), '400': VALIDATION, '401': UNAUTHORIZED, '429': RATE_LIMITED, '500': INTERNAL },
      },
    },
    '/audit/keys': {
      get: {
        operationId: 'listAuditKeys',
        summary: 'Открытые ключи подписи',
        description: 'Ключи, которыми шлюз подписывает выписки и контрольные точки журнала. Без авторизации.',
        tags: ['Аудит'],
        security: [],
        responses: { '200': ok('Ключи', ref('AuditKeyList')), '400': VALIDATION, '500': INTERNAL },
      },
    },
    '/events': {
      get: {
        operationId: 'listEvents',
        summary: 'События',
        description:
          'События вебхуков проекта в режиме ключа за WEBHOOK_RETENTION_DAYS (30 дней), последние поставленные в очередь первыми (не по createdAt: событие возврата встаёт в очередь, когда его записал и счёт), постраничный курсор: тело вебхука и deliveryStatus. ' +
          'Получатель, который был недоступен, забирает пропущенное сам (deliveryStatus=failing).',
        tags: ['Вебхуки'],
        parameters: queryParameters(ListEventsQuery),
        responses: { '200': ok('Страница событий', ref('EventList')), '400': VALIDATION, '401': UNAUTHORIZED, '429': RATE_LIMITED, '500': INTERNAL },
      },
    },
    '/events/{id}': {
      get: {
        operationId: 'getEvent',
        summary: 'Событие',
        description: 'Тело вебхука события, байт в байт (id события: id вебхука).',
        tags: ['Вебхуки'],
        parameters: [{ name: 'id', in: 'path', required: true, description: 'Идентификатор события', schema: { type: 'string', format: 'uuid' } }],
        responses: {
          '200': ok('Тело вебхука', { oneOf: [ref('InvoiceEvent'), ref('RefundEvent'), ref('PayoutEvent')] }),
          '400': VALIDATION,
          '401': UNAUTHORIZED,
          '404': errorResponse('События нет', ['not_found']),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
    '/balance/transactions': {
      get: {
        operationId: 'listBalanceTransactions',
        summary: 'Движения баланса',
        description:
          'Каждое движение баланса аккаунта в режиме ключа с причиной, новые первыми в порядке проводки в книге (по нему идёт balanceAfter; платёж, проведённый позже, сохраняет свой createdAt): сумма движений за [from, to) равна изменению available + pending + reserved за него (выписка берёт период как (from, to]). ' +
          'payoutId: что выплатила одна выплата. format=csv или Accept: text/csv: все движения CSV с теми же колонками, потоком.',
        tags: ['Справочники'],
        parameters: queryParameters(ListBalanceTransactionsQuery),
        responses: {
          '200': {
            description: 'Страница движений (или CSV)',
            content: { ...jsonBody(ref('BalanceTransactionList')), 'text/csv': { schema: { type: 'string' } } },
          },
          '400': VALIDATION,
          '401': UNAUTHORIZED,
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
    '/payout-addresses': {
      get: {
        operationId: 'listPayoutAddresses',
        summary: 'Реквизиты для выплат',
        description:
          'Подтверждённые реквизиты аккаунта мерчанта (общие для всех его проектов), счёт маскирован. Добавляются и подтверждаются (по e-mail) только в кабинете.',
        tags: ['Выплаты'],
        responses: { '200': ok('Реквизиты', ref('PayoutAddressList')), '400': VALIDATION, '401': UNAUTHORIZED, '429': RATE_LIMITED, '500': INTERNAL },
      },
    },
    '/payouts': {
      post: {
        operationId: 'createPayout',
        summary: 'Создать выплату',
        description:
          'Только боевой ключ (sk_live_). Резервирует сумму на боевом балансе аккаунта (из available) и создаёт заявку на подтверждённые реквизиты аккаунта ' +
          '(addressId или пара method + account). Комиссия (sbp 1.00%, usdt_trc20 2.00%, usdt_bep20 1.50%) удерживается из суммы; минимум 100.00 для каждого способа. ' +
          'Без orderId повтор суммы и реквизитов заявки, созданной меньше минуты назад: 409 duplicate_request. ' +
          'Если у аккаунта уже три заявки в pending, approved или processing: 409 too_many_pending.',
        tags: ['Выплаты'],
        parameters: [idempotencyKeyParam],
        requestBody: { required: true, content: jsonBody(ref('CreatePayoutRequest')) },
        responses: {
          '201': okKeyed('Заявка создана (повтор без orderId с тем же Idempotency-Key: та же заявка)', ref('Payout')),
          '200': okKeyed('Заявка с этим orderId уже есть (идемпотентный повтор)', ref('Payout')),
          '400': VALIDATION,
          '413': PAYLOAD_TOO_LARGE,
          '415': UNSUPPORTED_MEDIA_TYPE,
          '401': UNAUTHORIZED,
          '403': errorResponse('Тестовый ключ', ['test_mode']),
          '404': errorResponse('Реквизиты не найдены', ['address_not_found']),
          '409': conflictKeyed('Заявка не принята', ['too_many_pending', 'duplicate_request']),
          '422': errorResponse('Заявка невозможна: реквизиты не подтверждены, сумма ниже минимума способа или больше available', [
            'address_not_confirmed',
            'amount_out_of_range',
            'insufficient_balance',
          ]),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
      get: {
        operationId: 'listPayouts',
        summary: 'Список выплат',
        description:
          'Выплаты аккаунта мерчанта (любого его проекта), новые первыми, постраничный курсор; ответ {items, nextCursor, hasMore}. ' +
          'С orderId возвращает одну выплату объектом (не списком) или 404 not_found. Тестовый ключ: пустой список.',
        tags: ['Выплаты'],
        parameters: queryParameters(ListPayoutsQuery),
        responses: {
          '200': ok('Страница выплат или, с orderId, одна выплата', { oneOf: [ref('PayoutList'), ref('Payout')] }),
          '400': VALIDATION,
          '401': UNAUTHORIZED,
          '404': errorResponse('Выплата с этим orderId не найдена', ['not_found']),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
    '/payouts/{id}': {
      get: {
        operationId: 'getPayout',
        summary: 'Выплата',
        description:
          'Одна выплата аккаунта мерчанта (видна ключу любого его проекта; тестовому ключу: 404 not_found). Опрос чаще раза в 3 секунды: 429 rate_limited с Retry-After; ' +
          'итог приходит вебхуками payout.paid и payout.rejected.',
        tags: ['Выплаты'],
        parameters: [{ name: 'id', in: 'path', required: true, description: 'Идентификатор выплаты', schema: { type: 'integer' } }],
        responses: {
          '200': ok('Выплата', ref('Payout')),
          '400': VALIDATION,
          '401': UNAUTHORIZED,
          '404': errorResponse('Выплата не найдена', ['not_found']),
          '429': RATE_LIMITED,
          '500': INTERNAL,
        },
      },
    },
  }, UNAVAILABLE),
  webhooks: Object.fromEntries(WEBHOOK_EVENTS.map((kind) => [kind, webhook(kind)])),
  components: {
    schemas: {
      Money: {
        type: 'string',
        pattern: MONEY_PATTERN,
        description: 'Сумма в рублях: цифры, точка, ровно две цифры',
        examples: ['1500.00'],
      },
      Customer: requestSchema(Customer),
      CreateInvoiceRequest: requestSchema(CreateInvoiceRequest),
      StorableJson: STORABLE_JSON_SCHEMA,
      InvoiceCreated: invoiceCreated,
      Invoice: invoice,
      InvoiceList: list('Страница счетов', 'Invoice'),
      RefundInvoiceRequest: requestSchema(RefundInvoiceRequest),
      Refund: refund,
      Method: method,
      MethodList: methodList,
      Balance: balance,
      Statement: statement,
      AuditKeyList: auditKeyList,
      PayoutAddress: payoutAddress,
      PayoutAddressList: payoutAddressList,
      CreatePayoutRequest: requestSchema(CreatePayoutRequest),
      Payout: payout,
      PayoutList: list('Страница выплат аккаунта, новые первыми', 'Payout'),
      InvoiceEvent: invoiceEvent,
      RefundEvent: refundEvent,
      PayoutEvent: payoutEvent,
      Event: event,
      EventList: list('Страница событий, последние поставленные в очередь первыми', 'Event'),
      BalanceTransaction: balanceTransaction,
      BalanceTransactionList: list('Страница движений баланса, новые первыми', 'BalanceTransaction'),
      Error: errorSchema,
    },
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'sk_live_… | sk_test_…',
        description: 'Режим 1: Authorization: Bearer <секретный ключ проекта> с префиксом sk_live_ (бой) или sk_test_ (песочница).',
      },
      hmacPublicId: {
        type: 'apiKey',
        in: 'header',
        name: 'X-Public-Id',
        description: 'Режим 2 (HMAC): публичный ключ проекта с префиксом pk_live_ или pk_test_. Используется вместе с X-Timestamp и X-Signature.',
      },
      hmacTimestamp: {
        type: 'apiKey',
        in: 'header',
        name: 'X-Timestamp',
        description:
          'Режим 2 (HMAC): время запроса в секундах Unix; принимается в пределах ±300 секунд от времени сервера, иначе (и если заголовка нет) 401 timestamp_invalid.',
      },
      hmacSignature: {
        type: 'apiKey',
        in: 'header',
        name: 'X-Signature',
        description:
          'Режим 2 (HMAC): hex HMAC-SHA256 строки «<X-Timestamp>.<точное сырое тело запроса>», ключ: вся строка webhook secret проекта (whsec_…) как байты UTF-8; у GET тело пустое, строка: «<timestamp>.». ' +
          'Метод, путь и query не подписываются. Принимается и заголовок Signature. Каждая подпись принимается один раз в течение 10 минут (одно тело в одну секунду: одна подпись на проект), повтор или несовпадение: 401 signature_invalid.',
      },
    },
  },
};
