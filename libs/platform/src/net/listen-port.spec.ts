import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ephemeralPortsFrom, freeListenPort, portIsFree } from './listen-port';

describe('a port for a server that keeps its number', () => {
  it('is free and below the range the kernel gives outgoing connections (which could take it before it is bound again)', async () => {
    const below = ephemeralPortsFrom();
    for (let i = 0; i < 20; i++) {
      const port = await freeListenPort();
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(below);
      expect(await portIsFree(port)).toBe(true);
    }
  });

  it('skips a port something listens on', async () => {
    const server = createServer();
    const taken = await freeListenPort();
    await new Promise<void>((resolve) => server.listen(taken, '127.0.0.1', () => resolve()));
    try {
      expect(await portIsFree(taken)).toBe(false);
      // The first candidate is the taken port, the second is free.
      const draws = [(taken - 10_000) / (ephemeralPortsFrom() - 10_000), 0.5];
      const port = await freeListenPort(() => draws.shift() ?? 0.5);
      expect(port).not.toBe(taken);
      expect(port).toBeLessThan(ephemeralPortsFrom());
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('reads the range from the kernel, 32768 where it cannot', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'port-range-'));
    writeFileSync(path.join(dir, 'range'), '40000\t60999\n');
    writeFileSync(path.join(dir, 'bad'), 'x y\n');
    expect(ephemeralPortsFrom(path.join(dir, 'range'))).toBe(40000);
    expect(ephemeralPortsFrom(path.join(dir, 'bad'))).toBe(32768);
    expect(ephemeralPortsFrom(path.join(dir, 'missing'))).toBe(32768);
    rmSync(dir, { recursive: true, force: true });
  });
});
