import { PaymentResultRequest } from '../invoices/record-payment-result/payment-result.request';
import { CreateAccountRequest, CreateProjectRequest, MethodSettings, ProjectMethods, RotateKeysRequest, UpdateProjectRequest } from '../merchants/project-settings.request';
import { AdvanceClockRequest } from '../operations/advance-clock.request';
import { FailRefundRequest } from '../refunds/fail-refund/fail-refund.request';
import { AddPayoutAddressRequest } from '../payouts/payout-addresses/add-payout-address.request';
import { PayoutReasonRequest, PayPayoutRequest } from '../payouts/transition-payout/transition-payout.request';
import { NoFieldsRequest } from '../http/request-pipe';
import { ListWebhookDeliveriesQuery } from '../webhooks/list-webhook-deliveries.request';
import { LedgerBalanceQuery, LedgerEntriesQuery } from '../ledger/ledger-audit.request';
import { ReadStreamQuery } from '../operations/read-stream.request';
import { AccountStatementQuery, ReconciliationQuery, TrialBalanceQuery } from '../audit/audit-reports.request';
import { PAYOUT_METHODS } from '#domain';
import type { Account } from '#payments/merchants';
import { PAYOUT_ADDRESS_STATUSES, PROJECT_STATUSES } from '#payments/merchants';
import type { checkpointView } from '../audit/audit-checkpoint.controller';
import { OperatorStatementQuery } from '../audit/signed-statement/signed-statement.request';
import type { projectView } from '../merchants/projects.controller';
import type { addressView } from '../payouts/payout-addresses/payout-addresses.route';
import type { OpenApiDocument, OperationObject, ParameterObject, ResponseObject, SchemaObject } from './openapi-document';
import { answer, OPENAPI_DOCUMENT, ref, UNAVAILABLE } from './openapi-document';
import { queryParameters, requestSchema } from './request-schemas';

/**
 * The operator API (`/admin/v1/*`, `Authorization: Bearer <ADMIN_TOKEN>`): OpenAPI 3.1.0,
 * served as `GET /admin/v1/openapi.json` behind the operator token. Request bodies and
 * the webhook-delivery query are generated from the operator DTOs (the validator's
 * declaration); responses are written here, open objects like the merchant document's.
 */

const json = (schema: SchemaObject) => ({ 'application/json': { schema } }) as const;
const ok = (description: string, schema: SchemaObject): ResponseObject => ({ description, content: json(schema) });
const error = (description: string): ResponseObject => ({ description, content: json(ref('Error')) });
const body = (name: string, required = true) => ({ required, content: json(ref(name)) });
const idParam = (description: string, schema: SchemaObject = { type: 'string' }): ParameterObject => ({ name: 'id', in: 'path', required: true, description, schema });

const ERRORS = {
  '400': error('Запрос не прошёл проверку (также любой параметр адреса, которого маршрут не принимает): code validation, param и details называют поля'),
  '408': error('Запрос (заголовки или тело) не получен целиком за 60 секунд: code request_timeout; безопасно отправить снова'),
  '413': error('Тело запроса больше 64 КБ: code payload_too_large'),
  '415': error('Тело не application/json или сжато (Content-Encoding не identity): code unsupported_media_type'),
  '401': error('Нет токена оператора или он неверный: code unauthorized'),
  '429': error('Слишком много неудачных попыток авторизации: code rate_limited, заголовок Retry-After'),
  '500': error('Внутренняя ошибка: code internal'),
} as const;

/** Every route refuses a parameter it does not take (400), answers 408 (not all in within 60 s), 500 and 503 as any (a 503 of its own: its description); a body that could not be read is 413 or 415. */
function operation(o: Omit<OperationObject, 'tags' | 'responses'> & { tag: string; responses: Record<string, ResponseObject> }): OperationObject {
  const { tag, ...rest } = o;
  const unread: Record<string, ResponseObject> = o.requestBody ? { '413': ERRORS['413'], '415': ERRORS['415'] } : {};
  const failed = { '408': ERRORS['408'], '500': ERRORS['500'], '503': o.responses['503'] ?? UNAVAILABLE };
  return { ...rest, tags: [tag], responses: { ...o.responses, '400': ERRORS['400'], ...unread, '401': ERRORS['401'], '429': ERRORS['429'], ...failed } };
}

const account = answer<Account>({
  required: ['id', 'name', 'email', 'createdAt'],
  properties: { id: { type: 'string', format: 'uuid' }, name: { type: 'string' }, email: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' } },
});
const project = answer<ReturnType<typeof projectView>>({
  description: 'Проект с настройками; webhookSecret виден только оператору',
  required: ['id', 'accountId', 'name', 'status', 'webhookUrl', 'webhookEvents', 'usdtEnabled', 'holdHours', 'customerFeeShare', 'methods', 'webhookSecret', 'createdAt', 'updatedAt'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    accountId: { type: 'string', format: 'uuid' },
    name: { type: 'string' },
    status: { type: 'string', enum: PROJECT_STATUSES },
    webhookUrl: { type: ['string', 'null'] },
    webhookEvents: { type: 'array', items: { type: 'string' } },
    usdtEnabled: { type: 'boolean' },
    holdHours: { type: 'integer' },
    customerFeeShare: { type: 'integer' },
    methods: { type: 'object', description: 'Способы по коду: feePct, min, max, enabled' },
    webhookSecret: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
    updatedAt: { type: 'string', format: 'date-time' },
    webhookDisabledAt: { type: ['string', 'null'], format: 'date-time', description: 'Когда адрес вебхуков отключён после 3 дней отказов; null: включён' },
  },
});
const keys: SchemaObject = { type: 'object', description: 'Ключи: секретные показываются только при создании и ротации' };
const payoutAddress = answer<ReturnType<typeof addressView>>({
  required: ['id', 'accountId', 'method', 'account', 'status', 'createdAt'],
  properties: {
    id: { type: 'integer' },
    accountId: { type: 'string', format: 'uuid' },
    method: { type: 'string', enum: PAYOUT_METHODS },
    account: { type: 'string', description: 'Полностью, без маски' },
    bank: { type: ['string', 'null'] },
    label: { type: ['string', 'null'] },
    status: { type: 'string', enum: PAYOUT_ADDRESS_STATUSES },
    confirmedAt: { type: ['string', 'null'], format: 'date-time' },
    createdAt: { type: 'string', format: 'date-time' },
  },
});
const open = (description: string): SchemaObject => ({ type: 'object', description });
const DISABLED_ENDPOINT = 'Адрес вебхуков проекта отключён после 3 дней отказов: code conflict, ничего не отправлено; включение (webhook-endpoint/enable) отправит снова всё, что ему задолжали';
/** A later batch (5,000 a transaction) of resend-failed or enable finding the endpoint disabled again: the batches before it stay resent. */
const DISABLED_MEANWHILE =
  'Адрес вебхуков отключён (code conflict): до первой пачки — ничего не отправлено; если его отключила проверка здоровья, пока отправлялись первые пачки по 5 000, — они уже снова в очереди (часть, возможно, доставлена), остальные нет; включение отправит их';
const logCheckpoint = answer<Awaited<ReturnType<typeof checkpointView>>>({
  description: 'Контрольная точка журнала событий (docs/audit-log.md): записать вне шлюза, проверить npm run log:verify -- --expect <position> <hash>',
  required: ['position', 'events', 'hash', 'algorithm', 'kid', 'signedText', 'signature'],
  additionalProperties: false,
  properties: {
    position: { type: 'string', pattern: '^\\d+/\\d+$', description: 'Позиция последнего события, которое она покрывает (commit/prepare); 0/0 для пустого журнала' },
    events: { type: 'integer', minimum: 0, description: 'Число событий журнала до этой позиции включительно' },
    hash: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'Текущий хеш журнала (SHA-256 по цепочкам событий в порядке журнала), hex' },
    algorithm: { type: 'string', enum: ['Ed25519'] },
    kid: { type: 'string', pattern: '^[0-9a-f]{16}$', description: 'Ключ подписи: его открытая часть в GET /v1/audit/keys' },
    signedText: { type: 'string', description: 'Подписанный текст: gateway-log-checkpoint-v1, позиция, число событий, хеш, по строке на каждое' },
    signature: { type: 'string', description: 'Подпись Ed25519 подписанного текста (UTF-8), base64' },
  },
});

const merchantSchemas = OPENAPI_DOCUMENT.components.schemas;

export const OPERATOR_OPENAPI_DOCUMENT: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Платёжный шлюз: API оператора',
    version: '1.0.0',
    description: 'Настройка мерчантов, бэк-офис выплат и возвратов, аудит журнала и событий, доставки вебхуков. Все запросы: Authorization: Bearer <ADMIN_TOKEN>.',
  },
  jsonSchemaDialect: OPENAPI_DOCUMENT.jsonSchemaDialect,
  servers: [{ url: '/admin/v1' }],
  security: [{ operatorToken: [] }],
  tags: [
    { name: 'Мерчанты', description: 'Аккаунты, проекты, ключи' },
    { name: 'Выплаты и возвраты', description: 'Реквизиты, переходы выплат, отказ банка по возврату' },
    { name: 'Счета', description: 'Ответ эквайера по счёту' },
    { name: 'Аудит', description: 'Журнал, балансы, события потоков' },
    { name: 'Вебхуки', description: 'История доставок и повторная отправка' },
    { name: 'Эксплуатация', description: 'Ручные часы (CLOCK=manual), это описание' },
  ],
  paths: {
    '/accounts': { post: operation({ operationId: 'createAccount', summary: 'Новый аккаунт мерчанта', tag: 'Мерчанты', requestBody: body('CreateAccountRequest'), responses: { '201': ok('Аккаунт', ref('Account')) } }) },
    '/projects': { post: operation({ operationId: 'createProject', summary: 'Новый проект с ключами', tag: 'Мерчанты', requestBody: body('CreateProjectRequest'), responses: { '201': ok('Проект и его ключи (секретные показываются один раз)', { allOf: [ref('Project')], type: 'object', properties: { keys: ref('Keys') } }), '404': error('Аккаунт не найден') } }) },
    '/projects/{id}': {
      get: operation({ operationId: 'getProject', summary: 'Проект', tag: 'Мерчанты', parameters: [idParam('Проект', { type: 'string', format: 'uuid' })], responses: { '200': ok('Проект', ref('Project')), '404': error('Проект не найден') } }),
      patch: operation({ operationId: 'updateProject', summary: 'Изменить настройки проекта', tag: 'Мерчанты', parameters: [idParam('Проект', { type: 'string', format: 'uuid' })], requestBody: body('UpdateProjectRequest'), responses: { '200': ok('Проект', ref('Project')), '404': error('Проект не найден (проверяется до тела)') } }),
    },
    '/projects/{id}/keys/rotate': { post: operation({ operationId: 'rotateKeys', summary: 'Новая пара ключей режима; старая отзывается', tag: 'Мерчанты', parameters: [idParam('Проект', { type: 'string', format: 'uuid' })], requestBody: body('RotateKeysRequest'), responses: { '201': ok('Новые ключи', ref('Keys')), '404': error('Проект не найден (проверяется до тела)') } }) },
    '/projects/{id}/webhook-secret/rotate': { post: operation({ operationId: 'rotateWebhookSecret', summary: 'Новый секрет вебхуков проекта; старый больше не подписывает запросы и вебхуки (заменяет и секрет, который не открывается)', tag: 'Мерчанты', parameters: [idParam('Проект', { type: 'string', format: 'uuid' })], requestBody: body('NoFieldsRequest', false), responses: { '201': ok('Новый секрет (показывается здесь и в GET /projects/{id})', { type: 'object', required: ['webhookSecret'], additionalProperties: false, properties: { webhookSecret: { type: 'string', pattern: '^whsec_' } } }), '404': error('Проект не найден (проверяется до тела)') } }) },
    '/accounts/{id}/payout-addresses': { post: operation({ operationId: 'addPayoutAddress', summary: 'Реквизиты для выплат (не подтверждены)', tag: 'Выплаты и возвраты', parameters: [idParam('Аккаунт', { type: 'string', format: 'uuid' })], requestBody: body('AddPayoutAddressRequest'), responses: { '201': ok('Добавлены', ref('OperatorPayoutAddress')), '200': ok('Уже были добавлены', ref('OperatorPayoutAddress')), '404': error('Аккаунт не найден'), '409': error('Уже добавлены с другим банком или подписью: conflict') } }) },
    '/payout-addresses/{id}/confirm': { post: operation({ operationId: 'confirmPayoutAddress', summary: 'Подтвердить реквизиты (вместо ссылки из письма)', tag: 'Выплаты и возвраты', parameters: [idParam('Реквизиты', { type: 'integer' })], requestBody: body('NoFieldsRequest', false), responses: { '200': ok('Подтверждены', ref('OperatorPayoutAddress')), '404': error('Реквизиты не найдены') } }) },
    '/payouts/{id}/approve': { post: operation({ operationId: 'approvePayout', summary: 'Одобрить выплату', tag: 'Выплаты и возвраты', parameters: [idParam('Выплата', { type: 'integer' })], requestBody: body('NoFieldsRequest', false), responses: { '200': ok('Выплата', ref('Payout')), '404': error('Выплата не найдена'), '409': error('Переход невозможен из статуса выплаты: conflict') } }) },
    '/payouts/{id}/process': { post: operation({ operationId: 'processPayout', summary: 'Начать обработку', tag: 'Выплаты и возвраты', parameters: [idParam('Выплата', { type: 'integer' })], requestBody: body('NoFieldsRequest', false), responses: { '200': ok('Выплата', ref('Payout')), '404': error('Выплата не найдена'), '409': error('Переход невозможен: conflict') } }) },
    '/payouts/{id}/pay': { post: operation({ operationId: 'payPayout', summary: 'Выплата отправлена', tag: 'Выплаты и возвраты', parameters: [idParam('Выплата', { type: 'integer' })], requestBody: body('PayPayoutRequest', false), responses: { '200': ok('Выплата', ref('Payout')), '404': error('Выплата не найдена'), '409': error('Переход невозможен: conflict') } }) },
    '/payouts/{id}/reject': { post: operation({ operationId: 'rejectPayout', summary: 'Отклонить выплату', tag: 'Выплаты и возвраты', parameters: [idParam('Выплата', { type: 'integer' })], requestBody: body('PayoutReasonRequest'), responses: { '200': ok('Выплата', ref('Payout')), '404': error('Выплата не найдена'), '409': error('Переход невозможен: conflict') } }) },
    '/payouts/{id}/cancel': { post: operation({ operationId: 'cancelPayout', summary: 'Отменить выплату', tag: 'Выплаты и возвраты', parameters: [idParam('Выплата', { type: 'integer' })], requestBody: body('PayoutReasonRequest'), responses: { '200': ok('Выплата', ref('Payout')), '404': error('Выплата не найдена'), '409': error('Переход невозможен: conflict') } }) },
    '/refunds/{id}/fail': { post: operation({ operationId: 'failRefund', summary: 'Банк отказал в возврате', tag: 'Выплаты и возвраты', parameters: [idParam('Возврат (rf_…)')], requestBody: body('FailRefundRequest', false), responses: { '200': ok('Возврат', ref('Refund')), '404': error('Возврат не найден'), '409': error('Возврат уже выполнен: conflict') } }) },
    '/invoices/{id}/payment': { post: operation({ operationId: 'recordPaymentResult', summary: 'Ответ эквайера по счёту', tag: 'Счета', parameters: [idParam('Счёт', { type: 'string', format: 'uuid' })], requestBody: body('PaymentResultRequest'), responses: { '200': ok('Счёт', ref('Invoice')), '404': error('Счёт не найден'), '409': error('Счёт уже оплачен, отклонён или истёк: conflict'), '422': error('Метода нет среди способов счёта, закреплённых при его создании: method_unavailable') } }) },
    '/accounts/{id}/ledger': { get: operation({ operationId: 'ledgerEntries', summary: 'Проводки журнала аккаунта, старые первыми', tag: 'Аудит', parameters: [idParam('Аккаунт'), ...queryParameters(LedgerEntriesQuery)], responses: { '200': ok('Страница проводок', open('{accountId, mode, items, nextCursor, hasMore}')), '404': error('Аккаунт не найден: нет ни аккаунта, ни проводок') } }) },
    '/accounts/{id}/balance': { get: operation({ operationId: 'ledgerBalance', summary: 'Баланс, пересчитанный из журнала событий (сейчас или на asOf)', tag: 'Аудит', parameters: [idParam('Аккаунт'), ...queryParameters(LedgerBalanceQuery)], responses: { '200': ok('Баланс', open('{accountId, mode, asOf, available, pending, reserved, currency, system, entries}')), '404': error('Аккаунт не найден: нет ни аккаунта, ни проводок') } }) },
    '/accounts/{id}/statement': { get: operation({ operationId: 'accountStatement', summary: 'Выписка по журналу за период (from, to]: входящий остаток, проводки с текущими остатками, исходящий остаток; JSON или CSV, потоком', tag: 'Аудит', parameters: [idParam('Аккаунт'), ...queryParameters(AccountStatementQuery)], responses: { '200': { description: 'Выписка', content: { ...json(open('{accountId, mode, from, to, currency, opening, entries, entryCount, movements, closing}')), 'text/csv': { schema: { type: 'string', description: 'record,entry_id,seq,occurred_at,kind,cause,account,amount,balance_after' } } } }, '404': error('Аккаунт не найден: нет ни аккаунта, ни проводок') } }) },
    '/audit/trial-balance': { get: operation({ operationId: 'trialBalance', summary: 'Оборотно-сальдовая ведомость всех журналов на момент, пересчитанная из журнала событий; JSON или CSV', tag: 'Аудит', parameters: queryParameters(TrialBalanceQuery), responses: { '200': { description: 'Ведомость', content: { ...json(open('{asOf, logPosition, currency, ledgers, totals, balanced}')), 'text/csv': { schema: { type: 'string', description: 'account_id,mode,account,debits,credits,balance' } } } } } }) },
    '/audit/reconciliation': { get: operation({ operationId: 'reconciliation', summary: 'Сверка за период (from, to]: оплаченные счета, возвраты, выплаты и удержания против проводок; каждое расхождение с id', tag: 'Аудит', parameters: queryParameters(ReconciliationQuery), responses: { '200': { description: 'Расхождения', content: { ...json(open('{from, to, checked, differenceCount, differences}')), 'text/csv': { schema: { type: 'string', description: 'kind,flow,flow_id,account_id,mode,entry_id,cause,expected,actual,detail' } } } } } }) },
    '/accounts/{id}/signed-statement': { get: operation({ operationId: 'signedStatement', summary: 'Подписанная выписка мерчанта за период (from, to] в режиме mode: та же, что GET /v1/statements', tag: 'Аудит', parameters: [idParam('Аккаунт'), ...queryParameters(OperatorStatementQuery)], responses: { '200': { description: 'Выписка (канонический JSON, подпись Ed25519)', content: json(open('{object, accountId, mode, currency, from, to, opening, closing, transactions, checkpoint, signature}: схема Statement документа /v1/openapi.json')) }, '404': error('Аккаунт не найден: нет ни аккаунта, ни проводок') } }) },
    '/audit/checkpoint': { get: operation({ operationId: 'logCheckpoint', summary: 'Контрольная точка журнала событий: позиция, число событий, хеш и подпись Ed25519 (для записи вне шлюза)', tag: 'Аудит', responses: { '200': ok('Контрольная точка', ref('LogCheckpoint')), '409': error('Журнал событий не в PostgreSQL (EVENT_STORE=eventstoredb): code conflict') } }) },
    '/streams/{streamName}': { get: operation({ operationId: 'readStream', summary: 'События потока, как хранятся', tag: 'Аудит', parameters: [{ name: 'streamName', in: 'path', required: true, schema: { type: 'string' } }, ...queryParameters(ReadStreamQuery)], responses: { '200': ok('События', open('{streamName, events, nextRevision}; createdAt события — когда хранилище его записало, по часам базы данных (не по CLOCK=manual; время решения — в его data)')), '404': error('Поток не найден') } }) },
    '/webhook-deliveries': { get: operation({ operationId: 'listWebhookDeliveries', summary: 'Доставки вебхуков со всеми попытками, новые первыми', tag: 'Вебхуки', parameters: queryParameters(ListWebhookDeliveriesQuery), responses: { '200': ok('Страница доставок', open('{items, nextCursor, hasMore}')) } }) },
    '/webhook-deliveries/{id}/resend': { post: operation({ operationId: 'resendWebhookDelivery', summary: 'Отправить доставку снова сейчас', tag: 'Вебхуки', parameters: [idParam('Доставка', { type: 'string', format: 'uuid' })], requestBody: body('NoFieldsRequest', false), responses: { '202': ok('Поставлена в очередь', open('{id, status, nextAttemptAt}')), '404': error('Доставка не найдена'), '409': error(DISABLED_ENDPOINT) } }) },
    '/projects/{id}/webhook-deliveries/resend-failed': { post: operation({ operationId: 'resendFailedWebhookDeliveries', summary: 'Отправить снова сейчас все неудавшиеся (failed) доставки проекта', tag: 'Вебхуки', parameters: [idParam('Проект', { type: 'string', format: 'uuid' })], requestBody: body('NoFieldsRequest', false), responses: { '202': ok('Поставлены в очередь', { type: 'object', required: ['projectId', 'resent'], properties: { projectId: { type: 'string', format: 'uuid' }, resent: { type: 'integer', minimum: 0, description: 'Сколько доставок отправлено снова' } } }), '404': error('Проект не найден'), '409': error(DISABLED_MEANWHILE) } }) },
    '/projects/{id}/webhook-endpoint/enable': { post: operation({ operationId: 'enableWebhookEndpoint', summary: 'Включить адрес вебхуков, отключённый после 3 дней отказов, и отправить снова все неудавшиеся доставки', tag: 'Вебхуки', parameters: [idParam('Проект', { type: 'string', format: 'uuid' })], requestBody: body('NoFieldsRequest', false), responses: { '202': ok('Поставлены в очередь', { type: 'object', required: ['projectId', 'resent'], properties: { projectId: { type: 'string', format: 'uuid' }, resent: { type: 'integer', minimum: 0, description: 'Сколько доставок отправлено снова' } } }), '404': error('Проект не найден'), '409': error(DISABLED_MEANWHILE) } }) },
    '/clock/advance': { post: operation({ operationId: 'advanceClock', summary: 'Перевести ручные часы вперёд (только CLOCK=manual)', tag: 'Эксплуатация', requestBody: body('AdvanceClockRequest'), responses: { '200': ok('Часы переведены: новое время, когда каждый живой процесс шлюза перешёл на него (ждёт до 5 секунд)', { type: 'object', required: ['now'], properties: { now: { type: 'string', format: 'date-time' }, lagging: { type: 'integer', minimum: 1, description: 'Только если не все подтвердили за 5 секунд (или база данных не ответила после перевода): сколько живых процессов не подтвердили новое время; {"seconds": 0} ждёт снова' } } }), '404': error('Ручные часы выключены (проверяется до тела)'), '503': { ...UNAVAILABLE, description: UNAVAILABLE.description.replace(/^[^\n]*/, 'Часы не переведены: живой процесс шлюза не ответил за 5 секунд (завис) или база данных не ответила; повторить после Retry-After') } } }) },
    '/openapi.json': { get: operation({ operationId: 'operatorOpenApi', summary: 'Это описание', tag: 'Эксплуатация', responses: { '200': ok('OpenAPI 3.1.0', open('Документ OpenAPI')) } }) },
  },
  webhooks: {},
  components: {
    schemas: {
      LogCheckpoint: logCheckpoint,
      CreateAccountRequest: requestSchema(CreateAccountRequest),
      CreateProjectRequest: requestSchema(CreateProjectRequest),
      UpdateProjectRequest: requestSchema(UpdateProjectRequest),
      ProjectMethods: requestSchema(ProjectMethods),
      MethodSettings: requestSchema(MethodSettings),
      RotateKeysRequest: requestSchema(RotateKeysRequest),
      AddPayoutAddressRequest: requestSchema(AddPayoutAddressRequest),
      NoFieldsRequest: { ...requestSchema(NoFieldsRequest), description: 'Тела нет (или пустой объект)' },
      PayPayoutRequest: requestSchema(PayPayoutRequest),
      PayoutReasonRequest: requestSchema(PayoutReasonRequest),
      FailRefundRequest: requestSchema(FailRefundRequest),
      PaymentResultRequest: requestSchema(PaymentResultRequest),
      AdvanceClockRequest: requestSchema(AdvanceClockRequest),
      Account: account,
      Project: project,
      Keys: keys,
      OperatorPayoutAddress: payoutAddress,
      // The merchant document's resources the operator API answers with, and what they refer to.
      ...Object.fromEntries(['Invoice', 'Customer', 'StorableJson', 'Money', 'Payout', 'Refund', 'Error'].map((name) => [name, merchantSchemas[name]!])),
    },
    securitySchemes: {
      operatorToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN оператора (32+ символов)' },
    },
  },
};

