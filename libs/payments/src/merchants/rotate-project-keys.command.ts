import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Mode } from '#domain';
import { KeyPair, Registry } from '.';

/** A new key pair of the mode replaces the project's old one. */
export class RotateProjectKeys extends Command<KeyPair> {
  constructor(
    readonly projectId: string,
    readonly mode: Mode,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(RotateProjectKeys)
export class RotateProjectKeysHandler implements ICommandHandler<RotateProjectKeys> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(command: RotateProjectKeys): Promise<KeyPair> {
    return this.registry.rotateKeys(command.projectId, command.mode, command.now);
  }
}
