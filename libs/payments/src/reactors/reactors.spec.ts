import type { CommandBus } from '@nestjs/cqrs';
import { allReactors, REACTOR_NAMES } from '.';

describe('REACTOR_NAMES', () => {
  it('names every reactor the projector runs, in order (the bench starts them at the head by these names)', () => {
    const names = allReactors({} as CommandBus).map((r) => r.name);
    expect(names).toEqual(REACTOR_NAMES);
    expect(new Set(names).size).toBe(names.length);
  });
});
