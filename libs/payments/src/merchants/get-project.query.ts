import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { Project, Registry } from '.';

/** A project with its settings, or null. */
export class GetProject extends Query<Project | null> {
  constructor(readonly projectId: string) {
    super();
  }
}

@QueryHandler(GetProject)
export class GetProjectHandler implements IQueryHandler<GetProject> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(query: GetProject): Promise<Project | null> {
    return this.registry.project(query.projectId);
  }
}
