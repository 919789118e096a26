import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';
import { READ_MODELS } from '../payments.tokens';
import type { Project, ProjectSettings } from './registry';
import { ProjectRow, recordWebhookSettings, settingsParams, toProject } from './project-rows';

/** The operator changes a project's settings (`change` of the settings it has when written); null for an unknown project. */
export class UpdateProject extends Command<Project | null> {
  constructor(
    readonly projectId: string,
    readonly change: (current: Project) => ProjectSettings,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(UpdateProject)
export class UpdateProjectHandler implements ICommandHandler<UpdateProject> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  /**
   * `change` is applied to the settings read under the project's row lock in the same
   * transaction: two changes at once both land, the second on the first's result (a change
   * read before and written after would undo the other). `change` may throw to refuse;
   * nothing is written then.
   */
  execute({ projectId: id, change, now }: UpdateProject): Promise<Project | null> {
    return inTransaction(this.pool, async (tx) => {
      const current = await tx.query<ProjectRow>('SELECT * FROM projects WHERE id = $1 FOR UPDATE', [id]);
      if (!current.rows[0]) return null;
      const settings = change(toProject(current.rows[0]));
      const r = await tx.query<ProjectRow>(
        // A new URL is a new endpoint: one disabled for failing (endpoint-health.ts) is on again, as `enable` turns it;
        // its streak starts afresh (a health check that read the old URL's is refused by the changed enabled_at).
        `UPDATE projects SET name = $2, status = $3, webhook_url = $4, webhook_events = $5, usdt_enabled = $6, hold_hours = $7,
           methods = $8, customer_fee_share = $9, updated_at = $10,
           webhook_enabled_at = CASE WHEN webhook_url IS DISTINCT FROM $4 THEN $10 ELSE webhook_enabled_at END,
           webhook_disabled_at = CASE WHEN webhook_url IS DISTINCT FROM $4 THEN NULL ELSE webhook_disabled_at END
         WHERE id = $1 RETURNING *`,
        [id, ...settingsParams(settings), now],
      );
      const after = toProject(r.rows[0]!);
      // Against the settings history, not the row: a row changed by hand in SQL drifts from it, and a PATCH with the URL
      // the project shows must still take effect for deliveries.
      const last = await tx.query<{ webhook_url: string | null; webhook_events: string[] }>(
        'SELECT webhook_url, webhook_events FROM project_webhook_settings WHERE project_id = $1 ORDER BY valid_from DESC LIMIT 1',
        [id],
      );
      const recorded = last.rows[0];
      if (recorded?.webhook_url !== after.webhookUrl || recorded.webhook_events.join() !== after.webhookEvents.join())
        await recordWebhookSettings(tx, id, after, now);
      return after;
    });
  }
}
