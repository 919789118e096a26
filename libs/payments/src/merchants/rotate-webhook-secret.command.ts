import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Registry } from '.';

/** A new webhook secret replaces the project's (after a leak, or one that does not open); answers it, or null for an unknown project. */
export class RotateWebhookSecret extends Command<string | null> {
  constructor(
    readonly projectId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(RotateWebhookSecret)
export class RotateWebhookSecretHandler implements ICommandHandler<RotateWebhookSecret> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(command: RotateWebhookSecret): Promise<string | null> {
    return this.registry.rotateWebhookSecret(command.projectId, command.now);
  }
}
