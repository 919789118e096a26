/**
 * Jest workers send failure details to the parent as JSON; positions and revisions are
 * BigInt, which JSON cannot carry. Without this a failing assertion on them is
 * reported as "Do not know how to serialize a BigInt" instead of its diff.
 */
(BigInt.prototype as unknown as { toJSON: () => string }).toJSON = function toJSON(this: bigint) {
  return `${this.toString()}n`;
};
