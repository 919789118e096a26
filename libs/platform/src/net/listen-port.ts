import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Whether nothing listens on 127.0.0.1:port now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** The lowest port Linux hands out to outgoing connections and to listen(0) (32768 where it cannot be read). */
export function ephemeralPortsFrom(rangeFile = '/proc/sys/net/ipv4/ip_local_port_range'): number {
  try {
    const low = Number(readFileSync(rangeFile, 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 1024 && low < 65536 ? low : 32768;
  } catch {
    return 32768;
  }
}

const LOWEST = 10_000;

/**
 * A free port for a server that must keep its number (nginx's upstreams, the embedded
 * server's port file). Taken below the ephemeral range: a port from listen(0) is one the
 * kernel also gives to outgoing connections as their local port, so between choosing it
 * and binding it again (or on a restart) a client's connection can hold it (EADDRINUSE).
 */
export async function freeListenPort(random: () => number = Math.random): Promise<number> {
  const below = ephemeralPortsFrom();
  if (below - LOWEST >= 100) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = LOWEST + Math.floor(random() * (below - LOWEST));
      if (await portIsFree(port)) return port;
    }
  }
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
