/** The repository's verbatim copies of the briefs it was built to, with their originals in ../shared (test/docs/verbatim-copies.spec.ts). */
export const BRIEF_COPIES = [
  { copy: 'docs/design.md', original: 'DESIGN.md' },
  { copy: 'docs/api/payment-gateway-api-v1.md', original: 'spec/payment-gateway-api-v1.md' },
] as const;

/** The copies' paths: their words are the briefs', not procedures of this project's docs. */
export const VERBATIM_COPIES: readonly string[] = BRIEF_COPIES.map((c) => c.copy);
