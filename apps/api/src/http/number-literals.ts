import { ApiError } from './errors/api-error';

/**
 * The literal text of every number in a JSON document, by path. JSON.parse turns `1e3`
 * and `1000` into the same float; money rules need to know which was written.
 *
 * A path is the list of keys and array indexes from the root (`["methods", "sbp",
 * "feePct"]`, `["items", 2]`), so a key that contains a dot can never stand for a
 * nested field. The scan reads the whole text with sticky patterns from the current
 * index (no window: a literal of any length is read whole) and an explicit stack (no
 * recursion: any depth; literals are kept to MAX_LITERAL_DEPTH). It is only run on text that has already parsed as JSON, so
 * anything it cannot follow is a NumberLiteralScanError: the caller refuses the body
 * rather than checking its numbers without their literals.
 */
export type LiteralPath = readonly (string | number)[];

/** The map key of a path (unambiguous: JSON of the list). */
export const literalKey = (path: LiteralPath): string => JSON.stringify(path);

export class NumberLiteralScanError extends Error {
  constructor(
    readonly index: number,
    expected: string,
  ) {
    super(`JSON text: expected ${expected} at character ${index}`);
    this.name = 'NumberLiteralScanError';
  }
}

const WHITESPACE = /[ \t\n\r]*/y;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const KEYWORD = /true|false|null/y;

/**
 * Numbers nested deeper than this are scanned past but not recorded: no request field
 * is that deep (a field there has no literal and is refused), and building paths for
 * them would make a deep, number-heavy body cost the square of its size.
 */
export const MAX_LITERAL_DEPTH = 16;

type Frame = { readonly kind: 'object'; key: string | null } | { readonly kind: 'array'; index: number };

export function numberLiterals(json: string): Map<string, string> {
  const literals = new Map<string, string>();
  const stack: Frame[] = [];
  let i = 0;

  const fail = (expected: string): never => {
    throw new NumberLiteralScanError(i, expected);
  };
  const skipWhitespace = () => {
    WHITESPACE.lastIndex = i;
    WHITESPACE.exec(json);
    i = WHITESPACE.lastIndex;
  };
  /** The pattern's match at i (advancing past it), or null. */
  const sticky = (pattern: RegExp): string | null => {
    pattern.lastIndex = i;
    const match = pattern.exec(json);
    if (match === null) return null;
    i = pattern.lastIndex;
    return match[0];
  };
  /** A string token at i: its JSON text (quotes included). */
  const stringToken = (): string => {
    const start = i;
    if (json.charCodeAt(i) !== 0x22) fail('a string');
    i++;
    for (;;) {
      const c = json.charCodeAt(i);
      if (Number.isNaN(c)) fail('the end of a string');
      if (c === 0x22) break;
      if (c < 0x20) fail('no control character in a string');
      i += c === 0x5c ? 2 : 1;
    }
    i++;
    return json.slice(start, i);
  };
  /** Where the value about to be read sits. */
  const currentPath = (): LiteralPath => stack.map((f) => (f.kind === 'object' ? f.key! : f.index));

  // The body parser drops a leading byte-order mark; so does the scan.
  if (json.charCodeAt(0) === 0xfeff) i = 1;
  let expecting: 'value' | 'key' | 'after' = 'value';
  for (;;) {
    skipWhitespace();
    if (expecting === 'value') {
      const c = json[i];
      if (c === '{' || c === '[') {
        i++;
        stack.push(c === '{' ? { kind: 'object', key: null } : { kind: 'array', index: 0 });
        skipWhitespace();
        if (json[i] === (c === '{' ? '}' : ']')) {
          i++;
          stack.pop();
          expecting = 'after';
        } else expecting = c === '{' ? 'key' : 'value';
        continue;
      }
      if (c === '"') stringToken();
      else {
        const number = sticky(NUMBER);
        if (number !== null) {
          if (stack.length <= MAX_LITERAL_DEPTH) literals.set(literalKey(currentPath()), number);
        } else if (sticky(KEYWORD) === null) fail('a value');
      }
      expecting = 'after';
      continue;
    }
    if (expecting === 'key') {
      const token = stringToken();
      let key: string;
      try {
        key = JSON.parse(token) as string;
      } catch {
        return fail('a valid key');
      }
      skipWhitespace();
      if (json[i] !== ':') fail('":"');
      i++;
      (stack[stack.length - 1] as Frame & { kind: 'object' }).key = key;
      expecting = 'value';
      continue;
    }
    const top = stack[stack.length - 1];
    if (top === undefined) {
      if (i !== json.length) fail('the end of the text');
      return literals;
    }
    if (json[i] === ',') {
      i++;
      if (top.kind === 'array') {
        top.index++;
        expecting = 'value';
      } else expecting = 'key';
    } else if (json[i] === (top.kind === 'object' ? '}' : ']')) {
      i++;
      stack.pop();
    } else fail(top.kind === 'object' ? '"," or "}"' : '"," or "]"');
  }
}

// ---------------------------------------------------------------------------
// The literals of a request's numbers, for the money and percent rules
// ---------------------------------------------------------------------------

/** The exact bytes of each JSON body, by its parsed object (recorded by the body hook of create-api.ts). */
export const RAW_BODIES = new WeakMap<object, Buffer>();

/** Where an object of a request sits in its raw body: the keys from the root, and the body's literals (scanned once, when first asked). */
interface LiteralContext {
  readonly segments: readonly string[];
  readonly literals: () => Map<string, string> | null;
}
const CONTEXTS = new WeakMap<object, LiteralContext>();

/** Records where `object` (a DTO instance) sits in the raw body whose literals `literals` gives. */
export const placeLiterals = (object: object, segments: readonly string[], literals: LiteralContext['literals']): void => {
  CONTEXTS.set(object, { segments, literals });
};

/** The literals of `raw`, scanned when first asked: null without a raw body; a body the scan cannot follow is refused (400, param body). */
export function lazyLiterals(raw: Buffer | undefined): LiteralContext['literals'] {
  let scanned: Map<string, string> | undefined;
  return () => {
    if (raw === undefined) return null;
    try {
      scanned ??= numberLiterals(raw.toString('utf8'));
    } catch (error) {
      if (!(error instanceof NumberLiteralScanError)) throw error;
      throw ApiError.validation([
        { param: 'body', code: 'unreadable_numbers', message: 'body: числа в теле запроса не удалось прочитать так, как они записаны' },
      ]);
    }
    return scanned;
  };
}

/** A number the literal scan cannot account for. */
export const UNACCOUNTED = Symbol('unaccounted number literal');

/**
 * The literal text of a number field as written in the raw body: undefined when the
 * value is not a number or there is no raw body; UNACCOUNTED when the scan has no
 * literal at this path that reads as the parsed value.
 */
export function literalOf(object: object, property: string, value: unknown): string | undefined | typeof UNACCOUNTED {
  if (typeof value !== 'number') return undefined;
  const context = CONTEXTS.get(object);
  const literals = context?.literals() ?? null;
  if (literals === null) return undefined;
  const literal = literals.get(literalKey([...context!.segments, property]));
  return literal !== undefined && Number(literal) === value ? literal : UNACCOUNTED;
}
