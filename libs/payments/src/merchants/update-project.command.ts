import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Project, ProjectSettings, Registry } from '.';

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
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(command: UpdateProject): Promise<Project | null> {
    return this.registry.updateProject(command.projectId, command.change, command.now);
  }
}
