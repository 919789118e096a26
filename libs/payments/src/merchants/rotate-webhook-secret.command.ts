import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { outcomeOf, writeStatement } from '#platform/database';
import { READ_MODELS } from '../payments.tokens';
import { Registry } from './registry';

/** A new webhook secret replaces the project's (after a leak, or one that does not open); answers it, or null for an unknown project. */
export class RotateWebhookSecret extends Command<string | null> {
  constructor(
    /** As stored (lower case): the secret is sealed for it. */
    readonly projectId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(RotateWebhookSecret)
export class RotateWebhookSecretHandler implements ICommandHandler<RotateWebhookSecret> {
  constructor(
    @Inject(Registry) private readonly registry: Registry,
    @Inject(READ_MODELS) private readonly pool: Pool,
  ) {}

  /**
   * The new secret, sealed for the project with the current key, replaces the stored one in
   * one statement (its trigger counts the change: every API process forgets the secrets it
   * remembers within a poll, and an HMAC request signed with the old one is refused at its
   * lookup from the commit on). The old one is never opened: this is also the way out for a
   * stored secret that does not open.
   */
  async execute({ projectId, now }: RotateWebhookSecret): Promise<string | null> {
    const { secret, sealed } = this.registry.newWebhookSecret(projectId);
    const liveKeys = `SELECT k.public_key FROM rotated LEFT JOIN api_keys k ON k.project_id = rotated.id AND k.revoked_at IS NULL`;
    // Its answer lost: the stored secret tells whether it is the new one (sealed anew, so no other write stores it).
    const r = await outcomeOf(
      () =>
        writeStatement<{ public_key: string }>(
          this.pool,
          `WITH rotated AS (UPDATE projects SET webhook_secret = $2, updated_at = $3 WHERE id = $1 RETURNING id) ${liveKeys}`,
          [projectId, sealed, now],
        ),
      async () => {
        const found = await this.pool.query<{ public_key: string }>(
          `WITH rotated AS (SELECT id FROM projects WHERE id = $1 AND webhook_secret = $2) ${liveKeys}`,
          [projectId, sealed],
        );
        return found.rowCount === 0 ? null : found;
      },
    );
    if (r.rowCount === 0) return null;
    // This process forgets what it remembered, and its next request looks the secret up: remembering this one would keep
    // a rotation's secret that another, committed after it but answered before it, replaced (the one in force refused).
    for (const { public_key } of r.rows) if (public_key !== null) this.registry.knownPublicIds.forget(public_key);
    return secret;
  }
}
