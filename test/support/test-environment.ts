import NodeEnvironment from 'jest-environment-node';

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
  }
}
