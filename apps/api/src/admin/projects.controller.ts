import { Body, Controller, Get, HttpCode, Inject, Param, Patch, Post, UseGuards } from '@nestjs/common';
import type { Clock } from '../../../../libs/clock/src';
import type { Infrastructure } from '../../../../libs/infrastructure/src/infrastructure';
import { hostAddresses } from '../../../../libs/webhooks/src/http-delivery';
import { webhookUrlRefusal } from '../../../../libs/webhooks/src/webhook-address';
import { METHOD_CODES, MethodCode, MethodOverride, MethodOverrides } from '../../../../libs/domain/src';
import { formatMoney, formatPercent } from '../../../../libs/ledger/src/money';
import type { Project, ProjectSettings, Registry } from '../../../../libs/registry/src';
import { methodsOf, PROJECT_STATUSES, WEBHOOK_EVENTS, WebhookEventKind } from '../../../../libs/registry/src';
import { ApiError } from '../errors/api-error';
import { RawBody } from '../http/raw-body';
import { Fields, isObject, isUuid } from '../http/validation';
import { CLOCK_TOKEN, INFRASTRUCTURE, REGISTRY } from '../tokens';
import { AdminTokenGuard } from './admin-token.guard';

const projectView = (p: Project) => ({
  id: p.id,
  accountId: p.accountId,
  name: p.name,
  status: p.status,
  webhookUrl: p.webhookUrl,
  webhookEvents: p.webhookEvents,
  usdtEnabled: p.usdtEnabled,
  holdHours: p.holdHours,
  customerFeeShare: p.customerFeeShare,
  methods: Object.fromEntries(
    methodsOf(p).map((m) => [m.code, { feePct: formatPercent(m.feePct), min: formatMoney(m.min), max: formatMoney(m.max), enabled: m.enabled }]),
  ),
  webhookSecret: p.webhookSecret,
  createdAt: p.createdAt.toISOString(),
  updatedAt: p.updatedAt.toISOString(),
});

/**
 * Reads project settings over `base` (defaults for a new project, the stored ones for
 * PATCH). Unless private networks are allowed, a webhook URL whose host is an IP
 * literal that is not globally routable (or is the gateway host's own) is refused
 * now; a host name's addresses are checked at each delivery.
 */
function readSettings(f: Fields, base: ProjectSettings, webhookAllowPrivateNetworks: boolean): ProjectSettings {
  const name = f.string('name', { min: 1, max: 255 });
  const status = f.enumOf('status', PROJECT_STATUSES);
  const webhookUrl = f.has('webhookUrl') && f.raw('webhookUrl') === null ? null : f.url('webhookUrl');
  if (typeof webhookUrl === 'string' && !webhookAllowPrivateNetworks && webhookUrlRefusal(webhookUrl, hostAddresses()) !== null) {
    f.fail(
      'webhookUrl',
      'private_address',
      'вебхуки не отправляются на внутренние, зарезервированные и собственные адреса шлюза: укажите публичный адрес (песочнице на своей машине оператор включает WEBHOOK_ALLOW_PRIVATE_NETWORKS=true)',
    );
  }
  let webhookEvents: WebhookEventKind[] | undefined;
  if (f.has('webhookEvents')) {
    const raw = f.raw('webhookEvents');
    if (!Array.isArray(raw) || raw.some((e) => !(WEBHOOK_EVENTS as readonly unknown[]).includes(e))) {
      f.fail('webhookEvents', 'invalid_enum', `массив из значений: ${WEBHOOK_EVENTS.join(', ')}`);
    } else webhookEvents = [...new Set(raw as WebhookEventKind[])];
  }
  const usdtEnabled = f.boolean('usdtEnabled');
  const holdHours = f.integer('holdHours', { min: 0, max: 720 });
  const customerFeeShare = f.integer('customerFeeShare', { min: 0, max: 100 });
  const methods = f.object('methods', (m) => {
    const overrides: MethodOverrides = { ...base.methodOverrides };
    for (const code of METHOD_CODES) {
      const override = m.object(code, (t) => {
        const o: { -readonly [K in keyof MethodOverride]: MethodOverride[K] } = { ...(base.methodOverrides[code] ?? {}) };
        const feePct = t.percent('feePct');
        const min = t.money('min');
        const max = t.money('max');
        const enabled = t.boolean('enabled');
        if (feePct !== undefined) o.feePct = feePct;
        if (min !== undefined) o.min = min;
        if (max !== undefined) o.max = max;
        if (enabled !== undefined) o.enabled = enabled;
        return o;
      });
      if (override) (overrides as Record<MethodCode, MethodOverride>)[code] = override;
    }
    return overrides;
  });
  const merged: ProjectSettings = {
    name: name ?? base.name,
    status: status ?? base.status,
    webhookUrl: webhookUrl === undefined ? base.webhookUrl : webhookUrl,
    webhookEvents: webhookEvents ?? base.webhookEvents,
    usdtEnabled: usdtEnabled ?? base.usdtEnabled,
    holdHours: holdHours ?? base.holdHours,
    customerFeeShare: customerFeeShare ?? base.customerFeeShare,
    methodOverrides: methods ?? base.methodOverrides,
  };
  for (const m of methodsOf({ methodOverrides: merged.methodOverrides, usdtEnabled: merged.usdtEnabled } as Project)) {
    if (m.min > m.max) f.fail(`methods.${m.code}`, 'invalid_range', 'min не может быть больше max');
  }
  return merged;
}

const NEW_PROJECT: ProjectSettings = {
  name: '',
  status: 'active',
  webhookUrl: null,
  webhookEvents: [...WEBHOOK_EVENTS],
  usdtEnabled: false,
  holdHours: 24,
  customerFeeShare: 100,
  methodOverrides: {},
};

/** Merchant set-up on the operator API: accounts, projects with their settings, keys. */
@Controller('admin/v1')
@UseGuards(AdminTokenGuard)
export class ProjectsController {
  constructor(
    @Inject(REGISTRY) private readonly registry: Registry,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(INFRASTRUCTURE) private readonly infrastructure: Infrastructure,
  ) {}

  private get allowPrivateNetworks(): boolean {
    return this.infrastructure.config.webhookAllowPrivateNetworks;
  }

  @Post('accounts')
  async createAccount(@Body() body: unknown) {
    const f = Fields.ofBody(body);
    const name = f.string('name', { required: true, min: 1, max: 255 });
    const email = f.email('email');
    if (!f.has('email')) f.fail('email', 'required', 'обязательное поле');
    f.done();
    const account = await this.registry.createAccount(name!, email!, this.clock.now());
    return { ...account, createdAt: account.createdAt.toISOString() };
  }

  @Post('projects')
  async createProject(@Body() body: unknown, @RawBody() rawBody: Buffer | undefined) {
    const f = Fields.ofBody(body, rawBody);
    const accountId = f.uuid('accountId', { required: true });
    if (!f.has('name')) f.fail('name', 'required', 'обязательное поле');
    const settings = readSettings(f, NEW_PROJECT, this.allowPrivateNetworks);
    f.done();
    if (!(await this.registry.account(accountId!))) throw new ApiError(404, 'not_found', 'Аккаунт не найден', 'accountId');
    const { project, keys } = await this.registry.createProject(accountId!, settings, this.clock.now());
    // Secret keys are shown here and on rotation only; the gateway keeps their hashes.
    return { ...projectView(project), keys };
  }

  @Get('projects/:id')
  async getProject(@Param('id') id: string) {
    return projectView(await this.find(id));
  }

  @Patch('projects/:id')
  async updateProject(@Param('id') id: string, @Body() body: unknown, @RawBody() rawBody: Buffer | undefined) {
    const project = await this.find(id);
    const f = Fields.ofBody(body, rawBody);
    if (f.has('accountId')) f.fail('accountId', 'read_only', 'аккаунт проекта не меняется');
    const settings = readSettings(f, project, this.allowPrivateNetworks);
    f.done();
    return projectView((await this.registry.updateProject(id, settings, this.clock.now()))!);
  }

  @Post('projects/:id/keys/rotate')
  @HttpCode(201)
  async rotate(@Param('id') id: string, @Body() body: unknown) {
    await this.find(id);
    const f = Fields.ofBody(isObject(body) ? body : {});
    const mode = f.enumOf('mode', ['test', 'live'] as const, { required: true });
    f.done();
    return this.registry.rotateKeys(id, mode!, this.clock.now());
  }

  private async find(id: string): Promise<Project> {
    const project = isUuid(id) ? await this.registry.project(id) : null;
    if (!project) throw new ApiError(404, 'not_found', 'Проект не найден');
    return project;
  }
}
