import { randomUUID } from 'node:crypto';
import { DuplicateEventIdError, EventToAppend } from '#event-store';
import { InMemoryEventStore } from '../support/in-memory-event-store';
import { eventStoreContract } from './event-store.contract';

// The in-memory implementation of the port (test/support), used by unit tests of the
// ledger, must behave as the real adapters do: it passes their contract suite, with
// either way of checking event ids.
for (const eventIds of ['unique_in_store', 'checked_at_expected_revision'] as const) {
  let store: InMemoryEventStore;
  eventStoreContract(
    `in memory (event ids ${eventIds})`,
    async () => (store = new InMemoryEventStore({ eventIds })),
    async () => store.close(),
    { refusesEventIds: eventIds === 'unique_in_store' ? 'everywhere' : 'at-expected-position' },
  );
}

describe('in-memory event store: event ids', () => {
  const event = (id = randomUUID()): EventToAppend => ({ id, type: 'Something', data: {} });

  it('unique_in_store (as PostgreSQL): an id already stored is refused at the end of any stream', async () => {
    const store = new InMemoryEventStore({ eventIds: 'unique_in_store' });
    const old = event();
    await store.appendToStream('thing-1', [old, event()], { expectedRevision: 'no_stream' });
    await expect(store.appendToStream('thing-1', [old], { expectedRevision: 1n })).rejects.toBeInstanceOf(DuplicateEventIdError);
    await expect(store.appendToStream('thing-2', [old], { expectedRevision: 'no_stream' })).rejects.toBeInstanceOf(DuplicateEventIdError);
    expect(store.size).toBe(2);
  });

  it('checked_at_expected_revision (as EventStoreDB): an old id appended at the end of the stream is stored again', async () => {
    const store = new InMemoryEventStore({ eventIds: 'checked_at_expected_revision' });
    const old = event();
    await store.appendToStream('thing-1', [old, event()], { expectedRevision: 'no_stream' });
    // A retry where it was first appended: nothing written.
    expect((await store.appendToStream('thing-1', [old], { expectedRevision: 'no_stream' })).nextExpectedRevision).toBe(0n);
    // The same id at the end of the stream: stored a second time.
    const again = await store.appendToStream('thing-1', [old], { expectedRevision: 1n });
    expect(again.nextExpectedRevision).toBe(2n);
    expect((await store.readStream('thing-1')).map((e) => e.id)).toEqual([old.id, expect.any(String), old.id]);
  });
});
