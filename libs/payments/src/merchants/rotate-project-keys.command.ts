import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Mode } from '#domain';
import { inTransaction, outcomeOf } from '#platform/database';
import { READ_MODELS } from '../payments.tokens';
import { hashSecretKey, KeyPair, Registry } from './registry';
import { issueKeys } from './project-rows';

/** A new key pair of the mode replaces the project's old one, which stops working at once (same transaction). */
export class RotateProjectKeys extends Command<KeyPair> {
  constructor(
    readonly projectId: string,
    readonly mode: Mode,
    readonly now: Date,
  ) {
    super();
  }
}

type Revoked = { secret_key_hash: string; public_key: string };

@CommandHandler(RotateProjectKeys)
export class RotateProjectKeysHandler implements ICommandHandler<RotateProjectKeys> {
  constructor(
    @Inject(Registry) private readonly registry: Registry,
    @Inject(READ_MODELS) private readonly pool: Pool,
  ) {}

  async execute({ projectId, mode, now }: RotateProjectKeys): Promise<KeyPair> {
    const tags = await this.registry.keyTags();
    let issued: { pair: KeyPair; revoked: Revoked[]; webhookSecret: string | null } | null = null;
    const write = () =>
      inTransaction(this.pool, async (tx) => {
        const project = await tx.query<{ id: string; webhook_secret: string }>('SELECT id, webhook_secret FROM projects WHERE id = $1 FOR UPDATE', [projectId]);
        const old = await tx.query<Revoked>(
          'UPDATE api_keys SET revoked_at = $3 WHERE project_id = $1 AND mode = $2 AND revoked_at IS NULL RETURNING secret_key_hash, public_key',
          [projectId, mode, now],
        );
        // Opened for the id as stored (lower case), which it is sealed for: `projectId` may spell it in capitals.
        const stored = project.rows[0];
        issued = {
          pair: await issueKeys(tx, tags, projectId, mode, now),
          revoked: old.rows,
          webhookSecret: stored === undefined ? null : this.registry.openedOrNull(stored.id, stored.webhook_secret),
        };
        return issued;
      });
    // Its COMMIT's answer lost: the new pair's row (written with the revocation) tells whether it committed.
    const lookup = async () =>
      issued !== null && (await this.pool.query('SELECT 1 FROM api_keys WHERE secret_key_hash = $1', [hashSecretKey(issued.pair.secretKey)])).rowCount === 1
        ? issued
        : null;
    const { pair, revoked, webhookSecret } = await outcomeOf(write, lookup);
    // Only once committed: a revocation rolled back must leave the old key live.
    for (const key of revoked) {
      this.registry.knownSecretKeys.markDead(key.secret_key_hash);
      this.registry.knownPublicIds.markDead(key.public_key);
    }
    if (webhookSecret !== null) this.registry.rememberIssued(pair, webhookSecret);
    return pair;
  }
}
