import fc from 'fast-check';
import { literalKey, MAX_LITERAL_DEPTH, NumberLiteralScanError, numberLiterals } from './number-literals';

const entries = (json: string) => [...numberLiterals(json).entries()].map(([path, literal]) => [JSON.parse(path), literal]);

describe('number literals of a JSON body', () => {
  it('keeps each number as written, by path', () => {
    expect(entries('{ "amount": 1e3, "b": {"feePct": 10.100, "s": "x\\"1e5"}, "items": [1, -2.50, {"q": 0}], "t": true, "n": null }')).toEqual([
      [['amount'], '1e3'],
      [['b', 'feePct'], '10.100'],
      [['items', 0], '1'],
      [['items', 1], '-2.50'],
      [['items', 2, 'q'], '0'],
    ]);
  });

  it('decodes escaped keys and survives strings with brackets and quotes', () => {
    const literals = numberLiterals('{"a\\u006dount":"{[\\"]}","x":{"y":[[5E-2]]}}');
    expect(literals.get(literalKey(['x', 'y', 0, 0]))).toBe('5E-2');
    expect(literals.size).toBe(1);
  });

  it('a key with a dot is not a nested path', () => {
    const literals = numberLiterals('{"methods":{"sbp":{"feePct":1e-1}},"methods.sbp.feePct":1.5}');
    expect(literals.get(literalKey(['methods', 'sbp', 'feePct']))).toBe('1e-1');
    expect(literals.get(literalKey(['methods.sbp.feePct']))).toBe('1.5');
  });

  it('reads a literal of any length whole, and keeps its place after it', () => {
    const long = `1.${'0'.repeat(5000)}e2`;
    const literals = numberLiterals(`{"pad":${'9'.repeat(70_000)},"x":${long},"amount":1e3,"p":10.100}`);
    expect(literals.get(literalKey(['pad']))).toHaveLength(70_000);
    expect(literals.get(literalKey(['x']))).toBe(long);
    expect(literals.get(literalKey(['amount']))).toBe('1e3');
    expect(literals.get(literalKey(['p']))).toBe('10.100');
  });

  it('follows any depth without recursion, keeping literals down to MAX_LITERAL_DEPTH', () => {
    const depth = 100_000;
    const json = `{"a":${'['.repeat(depth)}7${']'.repeat(depth)},"amount":1e3,"b":${'['.repeat(MAX_LITERAL_DEPTH - 1)}5${']'.repeat(MAX_LITERAL_DEPTH - 1)}}`;
    const literals = numberLiterals(json);
    expect(literals.get(literalKey(['amount']))).toBe('1e3');
    expect(literals.get(literalKey(['b', ...Array.from({ length: MAX_LITERAL_DEPTH - 1 }, () => 0)]))).toBe('5');
    expect(literals.size).toBe(2);
  });

  it('a leading byte-order mark is skipped, as the body parser does', () => {
    expect(numberLiterals('\ufeff{"amount":1}').get(literalKey(['amount']))).toBe('1');
  });

  it.each(['{"a": 1, "b": ', '', '{"a":01}', '{"a":1}x', '{"a" 1}', '[1,]', '{"a":"x\n"}', '{"a":tru}', '{"a\\x":1}'])(
    'text it cannot follow (%j) is a NumberLiteralScanError, never a partial answer',
    (text) => {
      expect(() => numberLiterals(text)).toThrow(NumberLiteralScanError);
    },
  );

  it('agrees with JSON.parse on every JSON text: each number is found at its path and reads as the parsed value', () => {
    const seed = Date.now();

    console.log(`number-literals property seed: ${seed}`);
    const numberText = fc.oneof(
      fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
      fc.tuple(fc.integer(), fc.nat({ max: 900 })).map(([m, zeros]) => `${m}.${'0'.repeat(zeros)}1e${zeros % 7}`),
      fc.bigInt({ min: -(10n ** 500n), max: 10n ** 500n }).map(String),
    );
    // JSON values with number leaves written in any of those forms.
    const value: fc.Arbitrary<string> = fc.letrec<{ v: string }>((tie) => ({
      v: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        numberText,
        fc.string().map((t) => JSON.stringify(t)),
        fc.constantFrom('true', 'false', 'null'),
        fc.array(tie('v'), { maxLength: 4 }).map((items) => `[ ${items.join(' , ')} ]`),
        fc
          .array(fc.tuple(fc.string({ maxLength: 6 }), tie('v')), { maxLength: 4 })
          .map((pairs) => `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:\n${v}`).join(',')}}`),
      ),
    })).v;
    fc.assert(
      fc.property(value, (text) => {
        const parsed: unknown = JSON.parse(text);
        const literals = numberLiterals(text);
        const numbers: [(string | number)[], number][] = [];
        const walk = (node: unknown, path: (string | number)[]) => {
          if (typeof node === 'number') numbers.push([path, node]);
          else if (Array.isArray(node)) node.forEach((item, index) => walk(item, [...path, index]));
          else if (typeof node === 'object' && node !== null) for (const [k, v] of Object.entries(node)) walk(v, [...path, k]);
        };
        walk(parsed, []);
        for (const [path, n] of numbers) if (path.length <= MAX_LITERAL_DEPTH) expect(Number(literals.get(literalKey(path)))).toBe(n);
      }),
      { seed, numRuns: 300 },
    );
  });
});
