/**
 * A pure decider: the whole behaviour of one kind of stream. `decide` answers a command
 * from the folded state with the events to append (none: nothing to do) or a refusal;
 * `evolve` folds one event into the state. No I/O: the event store's command handling
 * (libs/event-store, handleCommand) loads, decides and appends.
 */
export interface Decider<State, Command, Event, Failure> {
  initialState(): State;
  evolve(state: State, event: Event): State;
  decide(command: Command, state: State): Event[] | Failure;
  /**
   * Optional: the same as reducing `events` with `evolve`, done faster (e.g. copying
   * the state once and applying the events in place). Used when loading a stream.
   */
  fold?(state: State, events: readonly Event[]): State;
}
