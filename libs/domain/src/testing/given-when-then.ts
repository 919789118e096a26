/**
 * Given/when/then for the pure deciders' tests (Jest): given the events of a stream,
 * when a command, then the events decided, the refusal, or nothing. The folded state is
 * frozen (a decision that mutated it would throw) and compared before and after.
 * Test-only: excluded from the build (tsconfig.build.json).
 */
import type { Decider } from '../decider';

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** The refusal a decider answers with: an error carrying a code (and, for some, the parameter). */
interface Refusal {
  readonly code: string;
  readonly param?: string;
}

export function givenWhenThen<State, Command, Event, Failure extends Error & Refusal>(
  decider: Decider<State, Command, Event, Failure>,
  FailureClass: abstract new (...args: never[]) => Failure,
) {
  const fold = (events: readonly Event[]): State => events.reduce(decider.evolve, decider.initialState());
  return function given(events: Event[]) {
    const state = deepFreeze(fold(events));
    const snapshot = structuredClone(state);
    return {
      when(command: Command) {
        const decide = (): Event[] | Failure => {
          const decision = decider.decide(command, state);
          expect(state).toEqual(snapshot);
          return decision;
        };
        return {
          then(expected: Event[]): void {
            expect(expected.length).toBeGreaterThan(0); // use thenNothing() for []
            expect(decide()).toEqual(expected);
          },
          /** Refused with this code (and this parameter, when given). */
          thenFails(code: Failure['code'], param?: string): void {
            const decision = decide();
            expect(decision).toBeInstanceOf(FailureClass);
            const refusal = decision as Failure;
            if (param === undefined) expect(refusal.code).toBe(code);
            else expect({ code: refusal.code, param: refusal.param }).toEqual({ code, param });
          },
          thenNothing(): void {
            expect(decide()).toEqual([]);
          },
        };
      },
    };
  };
}
