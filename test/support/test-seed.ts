import { randomBytes } from 'node:crypto';
import { Random } from '../../apps/tools/src/seed/random';

/**
 * The seed of a randomised test: TEST_SEED when set (to replay a failure), else a
 * fresh one. Printed with the command that replays it.
 */
function testSeed(testName: string): string {
  const seed = process.env.TEST_SEED ?? randomBytes(8).toString('hex');
  console.log(`${testName}: random seed ${seed} (replay: TEST_SEED=${seed} npx jest ${expect.getState().testPath ?? ''})`);
  return seed;
}

/**
 * The random source of a randomised test, seeded and printed so that a failure can
 * be replayed: TEST_SEED=<seed> runs the same choices again (amounts, ids, the
 * moments of the kills; what the machine's timing does with them may still differ).
 */
export function seededRandom(testName: string): Random {
  return new Random(testSeed(testName));
}

/**
 * The seed to give fast-check (`fc.assert(..., { seed })`), from the printed test seed:
 * TEST_SEED=<seed> generates the same runs again. (fast-check also prints the seed
 * and path of a failing run itself.)
 */
export function fastCheckSeed(testName: string): number {
  return new Random(testSeed(testName)).int(-0x80000000, 0x7fffffff);
}

/** An integer in [min, max) (as crypto.randomInt), from the seeded source. */
export const intBelow = (rng: Random, min: number, max: number): number => rng.int(min, max - 1);
