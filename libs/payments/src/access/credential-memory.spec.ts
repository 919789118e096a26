import { CredentialMemory } from './credential-memory';

describe('CredentialMemory', () => {
  it('probes a credential once for every concurrent first sighting, and remembers the answer', async () => {
    const memory = new CredentialMemory<string>();
    let lookups = 0;
    let release!: (found: string | null) => void;
    const lookUp = () => {
      lookups++;
      return new Promise<string | null>((resolve) => (release = resolve));
    };
    const waiting = Array.from({ length: 30 }, () => memory.probe('pk_test_a', lookUp, (found) => found.toUpperCase()));
    release('secret');
    expect(await Promise.all(waiting)).toEqual(Array(30).fill('secret'));
    expect(lookups).toBe(1);
    expect(memory.seenLive('pk_test_a')).toBe('SECRET');
    expect(memory.isDead('pk_test_a')).toBe(false);
  });

  it.each([
    ['one credential forgotten (its secret rotated here)', (memory: CredentialMemory<string>) => memory.forget('pk_test_a')],
    ['every live credential forgotten (a secret changed elsewhere)', (memory: CredentialMemory<string>) => memory.forgetLive()],
  ])('%s while its probe runs: the probe remembers nothing, and the next sighting probes anew', async (_, forget) => {
    const memory = new CredentialMemory<string>();
    let release!: (found: string | null) => void;
    const before = memory.probe(
      'pk_test_a',
      () => new Promise<string | null>((resolve) => (release = resolve)),
      (found) => found,
    );
    forget(memory);
    const after = memory.probe(
      'pk_test_a',
      () => Promise.resolve('whsec_new'),
      (found) => found,
    );
    release('whsec_old');
    expect([await before, await after]).toEqual(['whsec_old', 'whsec_new']);
    expect(memory.seenLive('pk_test_a')).toBe('whsec_new');
  });

  it('a credential found dead stays dead; a failed lookup is forgotten and asked again', async () => {
    const memory = new CredentialMemory<true>();
    expect(
      await memory.probe(
        'dead',
        () => Promise.resolve(null),
        () => true as const,
      ),
    ).toBeNull();
    expect(memory.isDead('dead')).toBe(true);
    await expect(
      memory.probe(
        'flaky',
        () => Promise.reject(new Error('connection lost')),
        () => true as const,
      ),
    ).rejects.toThrow('connection lost');
    expect(memory.isDead('flaky')).toBe(false);
    expect(
      await memory.probe(
        'flaky',
        () => Promise.resolve(1),
        () => true as const,
      ),
    ).toBe(1);
    expect(memory.seenLive('flaky')).toBe(true);
  });

  it('a revoked credential leaves the seen ones; each fact keeps at most `max` entries, the oldest forgotten first', () => {
    const memory = new CredentialMemory<true>(3);
    for (const k of ['a', 'b', 'c', 'd']) memory.markLive(k, true);
    expect(['a', 'b', 'c', 'd'].map((k) => memory.seenLive(k) ?? null)).toEqual([null, true, true, true]);
    memory.markDead('c');
    expect(memory.seenLive('c')).toBeUndefined();
    expect(memory.isDead('c')).toBe(true);
  });

  it('forgets what it saw of live credentials when told it changed; a probe that read before that remembers nothing; dead stays dead', async () => {
    const memory = new CredentialMemory<string>();
    memory.markLive('pk_test_a', 'whsec_old');
    memory.markLive('pk_test_b', 'whsec_b');
    memory.markDead('pk_test_revoked');
    memory.forget('pk_test_b');
    expect(memory.seenLive('pk_test_b')).toBeUndefined();
    expect(memory.seenLive('pk_test_a')).toBe('whsec_old');

    // A lookup that read the old secret, still under way when the change is noticed.
    let release!: (found: string) => void;
    const probing = memory.probe(
      'pk_test_c',
      () => new Promise<string>((resolve) => (release = resolve)),
      (found) => found,
    );
    memory.forgetLive();
    release('whsec_read_before_the_change');
    expect(await probing).toBe('whsec_read_before_the_change');
    expect(memory.seenLive('pk_test_c')).toBeUndefined();
    expect(memory.seenLive('pk_test_a')).toBeUndefined();
    expect(memory.isDead('pk_test_revoked')).toBe(true);
    // A probe begun after it remembers again.
    await memory.probe(
      'pk_test_a',
      () => Promise.resolve('whsec_new'),
      (found) => found,
    );
    expect(memory.seenLive('pk_test_a')).toBe('whsec_new');
  });
});
