import { LogCheckpoint } from './hash-chain';
import { LogOrderCheck, LogProblem, StoredChainedEvent, StreamChainCheck } from './log-checks';

/** What a verification of the whole log found (both stores). */
export interface EventLogReport {
  readonly streams: number;
  readonly events: number;
  readonly checkpointsCompared: number;
  /** The running hash of the whole visible log as recomputed (compare it with a checkpoint recorded off-site at the same position). */
  readonly head: LogCheckpoint;
  /** The recomputed running hash at each position asked for (`at`), when the log reached it. */
  readonly at: ReadonlyMap<string, LogCheckpoint>;
  /** Every problem found, the first (in the log) first. */
  readonly problems: readonly LogProblem[];
  /**
   * The first event (in the log) whose content does not give its stored chain hash
   * (one of `problems`), or null: the running hash folds the stored chain hashes, so it
   * is L(n) of docs/audit-log.md only up to before this event.
   */
  readonly contentDiffers: LogProblem | null;
}

export interface VerifyEventLogOptions {
  readonly pageSize?: number;
  /** Positions (`commit/prepare`) at which to report the recomputed running hash. */
  readonly at?: readonly string[];
  readonly onProgress?: (phase: 'streams' | 'log', events: number) => void;
}

/**
 * A log that carries each event's chain hash with the event (EventStoreDB: in its
 * metadata), read in pages. `C` is the store's cursor in log order.
 */
export interface ChainedLogSource<C> {
  /** User events of the log in log order after `after` (null: from the start), at most `maxCount`; `next` continues after the last. */
  logPage(after: C | null, maxCount: number): Promise<{ readonly events: readonly StoredChainedEvent[]; readonly next: C | null }>;
  /** Events of one stream from `fromRevision` on, in revision order, at most `maxCount` (none: the stream is gone). */
  streamPage(streamName: string, fromRevision: bigint, maxCount: number): Promise<readonly StoredChainedEvent[]>;
}

/**
 * Verifies a log whose events carry their chain hashes (docs/audit-log.md), with the
 * checks the PostgreSQL verification makes: pass 1 reads the log in log order (each
 * stream's revisions ascend; the running hash, reported at the positions asked for)
 * and notes the stream names; pass 2 reads each stream from revision 0 and recomputes
 * its chain (an edited, missing or swapped event is named). Recorded checkpoints are
 * kept over the PostgreSQL events table only, so none is compared here. Memory: one
 * page, and one name and revision per stream.
 */
export async function verifyChainedLog<C>(source: ChainedLogSource<C>, options: VerifyEventLogOptions = {}): Promise<EventLogReport> {
  const pageSize = options.pageSize ?? 1000;
  const order = new LogOrderCheck();
  const wanted = new Set(options.at ?? []);
  const at = new Map<string, LogCheckpoint>();
  const streams = new Set<string>();
  let lastPosition = '0/0';
  let cursor: C | null = null;
  for (;;) {
    const page: { events: readonly StoredChainedEvent[]; next: C | null } = await source.logPage(cursor, pageSize);
    for (const event of page.events) {
      streams.add(event.streamName);
      order.event({ streamName: event.streamName, revision: event.revision, position: event.position, chainHash: event.storedHash });
      lastPosition = event.position;
      if (wanted.has(event.position)) at.set(event.position, { position: event.position, events: order.events, hash: order.runningHash });
    }
    options.onProgress?.('log', Number(order.events));
    if (page.events.length < pageSize || page.next === null) break;
    cursor = page.next;
  }
  order.finish();

  const chains = new StreamChainCheck();
  for (const streamName of [...streams].sort()) {
    for (let from = 0n; ;) {
      const events = await source.streamPage(streamName, from, pageSize);
      for (const event of events) chains.event(event);
      if (events.length < pageSize) break;
      from = events[events.length - 1]!.revision + 1n;
    }
    options.onProgress?.('streams', chains.events);
  }
  chains.finish();

  return {
    streams: streams.size,
    events: Number(order.events),
    checkpointsCompared: 0,
    head: { position: lastPosition, events: order.events, hash: order.runningHash },
    at,
    problems: inLogOrder([...chains.problems, ...order.problems]),
    contentDiffers: inLogOrder(chains.contentDiffers)[0] ?? null,
  };
}

/** Problems in log order of the event they name (those without a position last, in the order found). */
export function inLogOrder(problems: readonly LogProblem[]): LogProblem[] {
  const key = (p: LogProblem): [bigint, bigint] | null => {
    if (p.position === null) return null;
    const [commit, prepare] = p.position.split('/');
    return [BigInt(commit!), BigInt(prepare!)];
  };
  return problems
    .map((p, i) => ({ p, i, k: key(p) }))
    .sort((a, b) => {
      if (a.k === null || b.k === null) return a.k === null && b.k === null ? a.i - b.i : a.k === null ? 1 : -1;
      if (a.k[0] !== b.k[0]) return a.k[0] < b.k[0] ? -1 : 1;
      if (a.k[1] !== b.k[1]) return a.k[1] < b.k[1] ? -1 : 1;
      return a.i - b.i;
    })
    .map((x) => x.p);
}
