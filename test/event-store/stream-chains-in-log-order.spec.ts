/**
 * The stream chain check fed the log in log order (StreamChainsInLogOrder, decision
 * 0123): on random logs of interleaved streams, untouched and tampered with in each way
 * the verification names (data edited, events deleted, data or whole events exchanged
 * within a stream, places in the log exchanged, stored hashes edited, a stream's first
 * events gone), it reports exactly what the stream-by-stream check (StreamChainCheck)
 * reports when fed the same events stream after stream in revision order, which is what
 * `log:verify` did before it read the log once. And the PostgreSQL read's checks
 * (decision 0123: each event checked against its stream's previous revision, the
 * streams it flags checked again) report exactly what these checks and the order of
 * each stream's revisions (LogOrderCheck) report, also with a revision twice in the log.
 */
import {
  CHAIN_HASH_BYTES,
  chainHashes,
  ContentBytesDigest,
  describeProblem,
  LogOrderCheck,
  LogProblem,
  StoredChainedEvent,
  StreamChainCheck,
  StreamChainsInLogOrder,
  StreamsCheckedAgain,
} from '#event-store';
import type { Random } from '../../apps/tools/src/seed/random';
import { intBelow, seededRandom } from '../support/test-seed';

type Tampering = 'data_edited' | 'deleted' | 'data_exchanged' | 'events_exchanged' | 'places_exchanged' | 'hash_edited' | 'head_gone' | 'revision_twice';
const TAMPERINGS: readonly Tampering[] = [
  'data_edited',
  'deleted',
  'data_exchanged',
  'events_exchanged',
  'places_exchanged',
  'hash_edited',
  'head_gone',
  'revision_twice',
];

/** Streams of random lengths, chained as the stores chain them, interleaved at random in the log (each stream's revisions ascending). */
function randomLog(rng: Random, streams: number, maxLength: number): StoredChainedEvent[] {
  const pending = Array.from({ length: streams }, (_, s) => {
    const streamName = `${rng.chance(0.5) ? 'invoice' : 'ledger'}-${s}`;
    const contents = Array.from({ length: intBelow(rng, 1, maxLength + 1) }, (_, r) => ({
      streamName,
      revision: BigInt(r),
      id: rng.uuid(),
      type: rng.chance(0.5) ? 'InvoicePaid' : 'LedgerEntryPosted',
      dataJson: `{"n": ${intBelow(rng, 0, 1_000_000)}, "amount": "${intBelow(rng, 1, 10_000)}.00"}`,
      metadataJson: '{}',
    }));
    const hashes = chainHashes(null, contents);
    return contents.map((c, i) => ({ ...c, storedHash: hashes[i]! }));
  });
  const log: StoredChainedEvent[] = [];
  while (pending.some((p) => p.length > 0)) {
    const open = pending.filter((p) => p.length > 0);
    const next = open[intBelow(rng, 0, open.length)]!.shift()!;
    log.push({ ...next, position: `${1000 + log.length}/${1000 + log.length}` });
  }
  return log;
}

/** The log tampered with once, in the given way (the log is in log order; positions stay with their places). */
function tamper(rng: Random, log: StoredChainedEvent[], how: Tampering): StoredChainedEvent[] {
  const out = [...log];
  const pick = () => intBelow(rng, 0, out.length);
  const sameStream = (i: number) => out.map((e, j) => ({ e, j })).filter(({ e, j }) => j !== i && e.streamName === out[i]!.streamName);
  switch (how) {
    case 'data_edited': {
      const i = pick();
      out[i] = { ...out[i]!, dataJson: out[i]!.dataJson.replace('"n": ', '"n": 7') };
      return out;
    }
    case 'deleted':
      out.splice(pick(), 1);
      return out;
    case 'data_exchanged':
    case 'events_exchanged': {
      const i = pick();
      const others = sameStream(i);
      if (others.length === 0) return out;
      const j = others[intBelow(rng, 0, others.length)]!.j;
      const [a, b] = [out[i]!, out[j]!];
      if (how === 'data_exchanged') {
        out[i] = { ...a, dataJson: b.dataJson };
        out[j] = { ...b, dataJson: a.dataJson };
      } else {
        // Each event at the other's revision; the stored chain hashes stay at their revisions.
        out[i] = { ...b, revision: a.revision, position: a.position, storedHash: a.storedHash };
        out[j] = { ...a, revision: b.revision, position: b.position, storedHash: b.storedHash };
      }
      return out;
    }
    case 'places_exchanged': {
      // Two events exchange their places in the log (each keeps its stream and revision).
      const [i, j] = [pick(), pick()];
      const [a, b] = [out[i]!, out[j]!];
      out[i] = { ...b, position: a.position };
      out[j] = { ...a, position: b.position };
      return out;
    }
    case 'hash_edited': {
      const i = pick();
      const edited = Buffer.from(out[i]!.storedHash!);
      edited[0] = edited[0]! ^ 0xff;
      out[i] = { ...out[i]!, storedHash: edited };
      return out;
    }
    case 'revision_twice': {
      // A copy of an event, its chain hash valid, later in the log (a store whose unique constraint on revisions was dropped).
      const i = pick();
      const j = intBelow(rng, i + 1, out.length + 1);
      out.splice(j, 0, { ...out[i]! });
      return out.map((e, k) => ({ ...e, position: `${1000 + k}/${1000 + k}` }));
    }
    case 'head_gone': {
      const name = out[pick()]!.streamName;
      const cut = BigInt(intBelow(rng, 1, 4));
      return out.filter((e) => !(e.streamName === name && e.revision < cut));
    }
  }
}

const positionKey = (p: string | null) => (p === null ? [Infinity, Infinity] : p.split('/').map(Number));
const sorted = (problems: readonly LogProblem[]) =>
  [...problems].sort((x, y) => {
    const [a, b] = [positionKey(x.position), positionKey(y.position)];
    return a[0]! - b[0]! || a[1]! - b[1]! || describeProblem(x).localeCompare(describeProblem(y));
  });

function streamByStream(log: readonly StoredChainedEvent[]): LogProblem[] {
  const check = new StreamChainCheck();
  const inRevisionOrder = [...log].sort((a, b) => (a.streamName < b.streamName ? -1 : a.streamName > b.streamName ? 1 : Number(a.revision - b.revision)));
  for (const e of inRevisionOrder) check.event(e);
  check.finish();
  return sorted(check.problems);
}

function inLogOrder(log: readonly StoredChainedEvent[]): { problems: LogProblem[]; streams: number; events: number } {
  const check = new StreamChainsInLogOrder();
  for (const e of log) check.event(e);
  check.finish();
  return { problems: sorted(check.problems), streams: check.streams, events: check.events };
}

/**
 * The checks as the PostgreSQL read of the log makes them (decision 0123): each event
 * is checked against its stream's previous revision as the read finds it (by stream
 * and revision; whether it is earlier in the log), and goes on its chain when it is in
 * order and its digest over its texts as the UTF-8 bytes of a row (ContentBytesDigest),
 * from the previous revision's stored hash, is its stored hash; any other event flags
 * its stream, as does a revision twice (revisionsTwice); the flagged streams are then
 * checked again, each in log order (StreamsCheckedAgain). The order check is fed the
 * events as columns (`eventInColumns`). Nothing is kept per stream but the flags.
 */
function asTheLogReadFeedsIt(log: readonly StoredChainedEvent[]) {
  const order = new LogOrderCheck();
  const digest = new ContentBytesDigest({ streamName: 0, id: 1, type: 2, data: 3, metadata: 4 });
  const flagged = new Set<string>();
  let revisionZeros = 0;
  const at = new Map<string, number>();
  log.forEach((e, j) => {
    const key = `${e.streamName}\n${e.revision}`;
    if (at.has(key)) flagged.add(e.streamName);
    else at.set(key, j);
  });
  log.forEach((e, j) => {
    const hashed = e.storedHash !== null && e.storedHash.length === CHAIN_HASH_BYTES;
    if (e.revision === 0n) revisionZeros += 1;
    const previousAt = e.revision === 0n ? undefined : at.get(`${e.streamName}\n${e.revision - 1n}`);
    const previous = previousAt === undefined ? null : log[previousAt]!;
    const inOrder = e.revision === 0n || (previousAt !== undefined && previousAt < j);
    const previousHashed = previous !== null && previous.storedHash !== null && previous.storedHash.length === CHAIN_HASH_BYTES;
    // The event as the read of the log has it: its texts as the UTF-8 bytes of a row.
    const row = rowOf([e.streamName, e.id, e.type, e.dataJson, e.metadataJson]);
    const goesOn =
      hashed &&
      inOrder &&
      (e.revision === 0n || previousHashed) &&
      digest.digest(e.revision === 0n ? null : previous!.storedHash, 0, row.bytes, row.starts, row.ends, Number(e.revision)) === e.storedHash!.toString('hex');
    if (!goesOn) flagged.add(e.streamName);
    order.eventInColumns(
      {
        chainHashes: hashed ? e.storedHash! : Buffer.alloc(CHAIN_HASH_BYTES),
        hashless: new Uint8Array([hashed ? 0 : 1]),
        event: () => ({ ...e, chainHash: e.storedHash }),
      },
      0,
    );
  });
  order.finish();
  const again = new StreamsCheckedAgain();
  const ofFlagged = log.map((e, j) => ({ e, j })).filter(({ e }) => flagged.has(e.streamName));
  ofFlagged.sort((x, y) => (x.e.streamName < y.e.streamName ? -1 : x.e.streamName > y.e.streamName ? 1 : x.j - y.j));
  for (const { e } of ofFlagged) again.event(e);
  again.finish();
  return { problems: again.problems, streams: revisionZeros + again.streamsLessRevisionZeros, events: log.length, order };
}

function rowOf(texts: readonly string[]): { bytes: Buffer; starts: Int32Array; ends: Int32Array } {
  const parts = texts.map((text) => Buffer.from(text, 'utf8'));
  const starts = new Int32Array(parts.length);
  const ends = new Int32Array(parts.length);
  let at = 0;
  parts.forEach((part, i) => {
    starts[i] = at;
    at += part.length;
    ends[i] = at;
  });
  return { bytes: Buffer.concat(parts), starts, ends };
}

function byName(log: readonly StoredChainedEvent[]) {
  const order = new LogOrderCheck();
  for (const e of log) order.event({ streamName: e.streamName, revision: e.revision, position: e.position, chainHash: e.storedHash });
  order.finish();
  return order;
}

describe('the stream chain check fed the log in log order', () => {
  it('finds nothing in untouched random logs, and counts their streams and events', () => {
    const rng = seededRandom('stream chains in log order, untouched');
    for (let run = 0; run < 50; run++) {
      const log = randomLog(rng, intBelow(rng, 1, 30), 12);
      const found = inLogOrder(log);
      expect(found.problems).toEqual([]);
      expect([found.streams, found.events]).toEqual([new Set(log.map((e) => e.streamName)).size, log.length]);
    }
  });

  it.each(TAMPERINGS)('reports what the stream-by-stream check reports, for random logs tampered with: %s', (how) => {
    const rng = seededRandom(`stream chains in log order, ${how}`);
    let found = 0;
    for (let run = 0; run < 200; run++) {
      const log = tamper(rng, randomLog(rng, intBelow(rng, 1, 12), 10), how);
      const expected = streamByStream(log);
      // (A revision twice: the stream-by-stream check sees the copy as a changed event, the check in log order leaves it to LogOrderCheck.)
      if (how !== 'revision_twice') expect(inLogOrder(log).problems).toEqual(expected);
      found += expected.length;
      // As the PostgreSQL read checks it: the same problems of the chains and of each stream's order, the same counts and running hash.
      const plain = new StreamChainsInLogOrder();
      for (const e of log) plain.event(e);
      plain.finish();
      const named = byName(log);
      const fed = asTheLogReadFeedsIt(log);
      expect([sorted(fed.problems), fed.streams, fed.events]).toEqual([sorted([...plain.problems, ...named.problems]), plain.streams, plain.events]);
      expect([fed.order.problems, fed.order.runningHash, fed.order.events]).toEqual([[], named.runningHash, named.events]);
    }
    // The tamperings are seen (an exchange of places alone changes no chain: LogOrderCheck names it).
    if (how !== 'places_exchanged') expect(found).toBeGreaterThan(100);
  });

  it("holds back a stream's events while an earlier revision is to come, and reports a revision that never comes by the first event after it", () => {
    const rng = seededRandom('stream chains in log order, long gap');
    const log = randomLog(rng, 3, 1).concat(
      (() => {
        const contents = Array.from({ length: 600 }, (_, r) => ({
          streamName: 'ledger-long',
          revision: BigInt(r),
          id: rng.uuid(),
          type: 'LedgerEntryPosted',
          dataJson: `{"r": ${r}}`,
          metadataJson: '{}',
        }));
        const hashes = chainHashes(null, contents);
        return contents.map((c, i) => ({ ...c, storedHash: hashes[i]!, position: `${5000 + i}/${5000 + i}` }));
      })(),
    );
    // Revision 3 comes last in the log, after 596 later revisions: past what is held back, it is reported missing once.
    const third = log.findIndex((e) => e.streamName === 'ledger-long' && e.revision === 3n);
    const moved = [...log.slice(0, third), ...log.slice(third + 1), log[third]!];
    expect(inLogOrder(moved).problems).toEqual([
      expect.objectContaining({ kind: 'event_missing', streamName: 'ledger-long', revision: 3n, position: '5004/5004' }),
    ]);
    // Moved only a few places: held back, checked in revision order, nothing wrong in the chain.
    const near = [...log];
    [near[third], near[third + 5]] = [near[third + 5]!, near[third]!];
    expect(inLogOrder(near).problems).toEqual([]);
    // Deleted: the same report as the stream-by-stream check.
    const deleted = log.filter((_, i) => i !== third);
    expect(inLogOrder(deleted).problems).toEqual(streamByStream(deleted));
    expect(inLogOrder(deleted).problems).toHaveLength(1);
  });
});
