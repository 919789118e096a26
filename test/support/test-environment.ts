import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import NodeEnvironment from 'jest-environment-node';
import { FILE_DATA_DIR, STARTED_PROCESSES } from './started-processes';

/**
 * Jest workers send each file's results to the parent as JSON, serialised in the
 * worker's own realm (not the realm the tests run in). Positions and revisions are
 * BigInt, which JSON cannot carry: without this, a failing assertion on them is
 * reported as "Do not know how to serialize a BigInt" instead of its diff. This module
 * is loaded in the worker's realm, so the patch reaches the serialiser; the test realm
 * gets the same one for assertions that print JSON.
 */
function patch(bigIntPrototype: object): void {
  Object.defineProperty(bigIntPrototype, 'toJSON', {
    value: function toJSON(this: bigint) {
      return `${this.toString()}n`;
    },
    configurable: true,
    writable: true,
  });
}

patch(BigInt.prototype);

export default class GatewayTestEnvironment extends NodeEnvironment {
  override async setup(): Promise<void> {
    await super.setup();
    const testBigInt = this.getVmContext()?.BigInt as { prototype: object } | undefined;
    if (testBigInt) patch(testBigInt.prototype);
    this.global[STARTED_PROCESSES] = new Set<ChildProcess>();
  }

  /**
   * A process a test file started and left running (a test that failed before its own
   * kill) is killed when the file ends: left alone it would go on polling its dropped
   * database for the rest of the run, taking CPU from every later test and benchmark.
   */
  override async teardown(): Promise<void> {
    const started = this.global[STARTED_PROCESSES] as Set<ChildProcess> | undefined;
    const running = [...(started ?? [])].filter((c) => c.exitCode === null && c.signalCode === null);
    await Promise.all(
      running.map(
        (child) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, 5_000);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            // A process started as the leader of its group (npm and what its script starts) goes with its group.
            try {
              process.kill(-child.pid!, 'SIGKILL');
            } catch {
              child.kill('SIGKILL');
            }
          }),
      ),
    );
    if (running.length > 0)
      process.stderr.write(
        `killed ${running.length} process(es) the test file left running: ${running.map((c) => c.spawnargs.slice(1).join(' ')).join('; ')}\n`,
      );
    const dataDir = this.global[FILE_DATA_DIR] as string | undefined;
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    await super.teardown();
  }
}
