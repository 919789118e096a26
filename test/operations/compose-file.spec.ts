/**
 * docker-compose.yml, read as text (no Docker engine runs on the build machines): every
 * service, the API and projector replicas above all, is started again when it exits (a
 * crash, an OOM kill) until it is stopped, as docs/operations.md ("Deployment and
 * scaling") says.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROCESS_POOL_SIZE } from '#payments/composition';
import { ROOT } from '../support/gateway-process';

describe('docker-compose.yml', () => {
  it('gives every service restart: unless-stopped', () => {
    const text = readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
    const services = text.slice(text.indexOf('\nservices:\n'), text.indexOf('\nvolumes:\n'));
    // One block per service: a line of two spaces and its name, up to the next such line.
    const blocks = [...services.matchAll(/^ {2}([a-z][a-z0-9-]*):\n((?:(?: {4}.*)?\n)*)/gm)].map(([, name, body]) => ({ name: name!, body: body! }));
    expect(blocks.map((b) => b.name)).toEqual(expect.arrayContaining(['api', 'projector']));
    expect(blocks.filter((b) => !/^ {4}restart: unless-stopped$/m.test(b.body)).map((b) => b.name)).toEqual([]);
  });

  // postgres:18 allows 100 connections by default: the scale the file suggests asked for 120 under load (53300: 503s).
  it('lets PostgreSQL take the connections of the scale it suggests, with room for the operator and the commands', () => {
    const text = readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
    const [, api, projector] = /^# Scale: docker compose up --scale api=(\d+) --scale projector=(\d+)$/m.exec(text)!;
    const maxConnections = Number(/'-c', 'max_connections=(\d+)'/.exec(text)?.[1] ?? 100);
    expect(maxConnections).toBeGreaterThanOrEqual((Number(api) + Number(projector)) * (PROCESS_POOL_SIZE + 1) + 20);
  });
});
