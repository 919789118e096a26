import { numberLiterals } from './number-literals';

describe('number literals of a JSON body', () => {
  it('keeps each number as written, by path', () => {
    const literals = numberLiterals(
      '{ "amount": 1e3, "b": {"feePct": 10.100, "s": "x\\"1e5"}, "items": [1, -2.50, {"q": 0}], "t": true, "n": null }',
    );
    expect([...literals.entries()]).toEqual([
      ['amount', '1e3'],
      ['b.feePct', '10.100'],
      ['items[0]', '1'],
      ['items[1]', '-2.50'],
      ['items[2].q', '0'],
    ]);
  });

  it('decodes escaped keys and survives strings with brackets and quotes', () => {
    const literals = numberLiterals('{"a\\u006dount":"{[\\"]}","x":{"y":[[5E-2]]}}');
    expect(literals.get('x.y[0][0]')).toBe('5E-2');
    expect(literals.size).toBe(1);
  });

  it('returns what it read from something that is not JSON, without throwing', () => {
    expect(numberLiterals('{"a": 1, "b": ').get('a')).toBe('1');
    expect(numberLiterals('').size).toBe(0);
  });
});
