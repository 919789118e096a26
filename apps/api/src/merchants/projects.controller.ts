import { Body, Controller, Get, HttpCode, Inject, Param, Patch, Post, Query, UseGuards } from '@nestjs/common';
import type { Clock } from '#platform/clock';
import type { Infrastructure } from '#payments/composition';
import { hostAddresses } from '#payments/webhooks';
import { webhookUrlRefusal } from '#payments/webhooks';
import { formatMoney, formatPercent } from '#ledger';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { Project, ProjectSettings, Registry } from '#payments/merchants';
import { RotateWebhookSecret, UnopenableWebhookSecretError } from '#payments/merchants';
import { CreateAccount } from '#payments/merchants';
import { CreateProject } from '#payments/merchants';
import { GetAccount } from '#payments/merchants';
import { GetProject } from '#payments/merchants';
import { RotateProjectKeys } from '#payments/merchants';
import { UpdateProject } from '#payments/merchants';
import { methodsOf, WEBHOOK_EVENTS } from '#payments/merchants';
import { isUuid } from '#domain';
import { ApiError } from '../http/errors/api-error';
import { NoFieldsRequest, NoParameters, readBody, readQuery, validOptionalBody, validRequest } from '../http/request-pipe';
import { CreateAccountRequest, CreateProjectRequest, RotateKeysRequest, settingsOf, UpdateProjectRequest } from './project-settings.request';
import type { ErrorDetail } from '../http/errors/api-error';
import { CLOCK_TOKEN, INFRASTRUCTURE, REGISTRY } from '../http/tokens';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';

/** A project as the operator sees it, with its webhook secret opened (Registry.webhookSecretOf). */
export const projectView = (p: Project, webhookSecret: string) => ({
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
  webhookSecret,
  createdAt: p.createdAt.toISOString(),
  updatedAt: p.updatedAt.toISOString(),
  /** When the webhook endpoint was disabled for failing 3 days (re-enabled by POST .../webhook-endpoint/enable), or null. */
  webhookDisabledAt: p.webhookDisabledAt?.toISOString() ?? null,
});

/**
 * The rules of project settings that need more than the request: a webhook URL with a
 * user name or password is refused (they would not be sent); unless private networks
 * are allowed, a webhook URL whose host is an IP literal that is not globally routable
 * (or is the gateway host's own) is refused now (a host name's addresses are checked at
 * each delivery); every method's min is at least 0.01 and at most its max once merged
 * with `base`.
 */
function settingsViolations(settings: ProjectSettings, requestedUrl: string | null | undefined, webhookAllowPrivateNetworks: boolean): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const fail = (param: string, code: string, message: string) => details.push({ param, code, message: `${param}: ${message}` });
  const url = typeof requestedUrl === 'string' && URL.canParse(requestedUrl) ? new URL(requestedUrl) : null;
  if (url !== null && (url.username !== '' || url.password !== '')) {
    // Deliveries go to the origin and path only, and the URL is shown wherever deliveries are.
    fail(
      'webhookUrl',
      'credentials_in_url',
      'имя и пароль в адресе вебхука не отправляются и были бы видны в истории доставок: получатель проверяет подпись вебхука',
    );
  } else if (typeof requestedUrl === 'string' && !webhookAllowPrivateNetworks && webhookUrlRefusal(requestedUrl, hostAddresses()) !== null) {
    // One detail per field: the first rule it breaks.
    fail(
      'webhookUrl',
      'private_address',
      'вебхуки не отправляются на внутренние, зарезервированные и собственные адреса шлюза: укажите публичный адрес (песочнице на своей машине оператор включает WEBHOOK_ALLOW_PRIVATE_NETWORKS=true)',
    );
  }
  for (const m of methodsOf({ methodOverrides: settings.methodOverrides, usdtEnabled: settings.usdtEnabled } as Project)) {
    // An invoice of nothing would be paid and could not be posted to the ledger.
    if (m.min < 1) fail(`methods.${m.code}.min`, 'out_of_range', 'минимальная сумма счёта не меньше 0.01');
    else if (m.min > m.max) fail(`methods.${m.code}`, 'invalid_range', 'min не может быть больше max');
  }
  return details;
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
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(INFRASTRUCTURE) private readonly infrastructure: Infrastructure,
    @Inject(REGISTRY) private readonly registry: Registry,
  ) {}

  private get allowPrivateNetworks(): boolean {
    return this.infrastructure.config.webhookAllowPrivateNetworks;
  }

  @Post('accounts')
  async createAccount(@Body(validRequest) body: CreateAccountRequest, @Query(validRequest) _query: NoParameters) {
    const account = await this.commands.execute(new CreateAccount(body.name, body.email, this.clock.now()));
    return { ...account, createdAt: account.createdAt.toISOString() };
  }

  @Post('projects')
  async createProject(@Body(validRequest) body: CreateProjectRequest, @Query(validRequest) _query: NoParameters) {
    const settings = this.settings(body, NEW_PROJECT);
    if (!(await this.queries.execute(new GetAccount(body.accountId)))) throw new ApiError(404, 'not_found', 'Аккаунт не найден', 'accountId');
    const { project, keys } = await this.commands.execute(new CreateProject(body.accountId, settings, this.clock.now()));
    // Secret keys are shown here and on rotation only; the gateway keeps their hashes.
    return { ...projectView(project, this.webhookSecretOf(project)), keys };
  }

  @Get('projects/:id')
  async getProject(@Param('id') id: string, @Query(validRequest) _query: NoParameters) {
    const project = await this.find(id);
    return projectView(project, this.webhookSecretOf(project));
  }

  @Patch('projects/:id')
  async updateProject(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    const found = await this.find(id);
    // Opened before anything is written: a secret that does not open is a 500 that changed nothing.
    const secret = this.webhookSecretOf(found);
    // Read after the project is found: an unknown project is 404 whatever the body.
    await readQuery(NoParameters, query);
    const request = await readBody(UpdateProjectRequest, body);
    // Merged into the settings as they are when written (a refusal there writes nothing).
    const updated = await this.commands.execute(new UpdateProject(id, (current) => this.settings(request, current), this.clock.now()));
    if (!updated) throw new ApiError(404, 'not_found', 'Проект не найден');
    return projectView(updated, updated.sealedWebhookSecret === found.sealedWebhookSecret ? secret : this.webhookSecretOf(updated));
  }

  @Post('projects/:id/keys/rotate')
  @HttpCode(201)
  async rotate(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    await this.find(id);
    await readQuery(NoParameters, query);
    // No body reads as {} (mode: required); a body that is not an object is said to be one.
    const { mode } = await readBody(RotateKeysRequest, body, validOptionalBody);
    return this.commands.execute(new RotateProjectKeys(id, mode, this.clock.now()));
  }

  /**
   * A new webhook secret replaces the project's, in one statement (the old one is not
   * opened: this also replaces one that does not open). Shown here once, and by GET.
   */
  @Post('projects/:id/webhook-secret/rotate')
  @HttpCode(201)
  async rotateWebhookSecret(@Param('id') id: string, @Body() body: unknown, @Query() query: unknown) {
    const project = await this.find(id);
    await readQuery(NoParameters, query);
    await readBody(NoFieldsRequest, body, validOptionalBody);
    // The id as stored (the path may spell it in capitals): it is what the secret is sealed for.
    const webhookSecret = await this.commands.execute(new RotateWebhookSecret(project.id, this.clock.now()));
    if (webhookSecret === null) throw new ApiError(404, 'not_found', 'Проект не найден');
    return { webhookSecret };
  }

  /** The settings of a valid request over `base`, or a 400 for the rules that need more than the request. */
  private settings(request: CreateProjectRequest | UpdateProjectRequest, base: ProjectSettings): ProjectSettings {
    const settings = settingsOf(request, base);
    const details = settingsViolations(settings, request.webhookUrl, this.allowPrivateNetworks);
    if (details.length > 0) throw ApiError.validation(details);
    return settings;
  }

  /** The project's webhook secret in clear; one that does not open is a 500 naming the project and the way out. */
  private webhookSecretOf(project: Project): string {
    try {
      return this.registry.webhookSecretOf(project);
    } catch (error) {
      if (!(error instanceof UnopenableWebhookSecretError)) throw error;
      throw new ApiError(
        500,
        'internal',
        `Секрет вебхуков проекта ${project.id} не открывается: он зашифрован для другого проекта или другим ключом. ` +
          `Замените его: POST /admin/v1/projects/${project.id}/webhook-secret/rotate`,
      );
    }
  }

  private async find(id: string): Promise<Project> {
    const project = isUuid(id) ? await this.queries.execute(new GetProject(id)) : null;
    if (!project) throw new ApiError(404, 'not_found', 'Проект не найден');
    return project;
  }
}
