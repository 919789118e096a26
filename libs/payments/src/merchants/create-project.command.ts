import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Mode } from '#domain';
import { KeyPair, Project, ProjectSettings, Registry } from '.';

/** The operator creates a project of an account, with its test and live key pairs (secret keys shown once). */
export class CreateProject extends Command<{ project: Project; keys: Record<Mode, KeyPair> }> {
  constructor(
    readonly accountId: string,
    readonly settings: ProjectSettings,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(CreateProject)
export class CreateProjectHandler implements ICommandHandler<CreateProject> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(command: CreateProject): Promise<{ project: Project; keys: Record<Mode, KeyPair> }> {
    return this.registry.createProject(command.accountId, command.settings, command.now);
  }
}
