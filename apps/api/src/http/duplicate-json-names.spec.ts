import { duplicateJsonName } from './duplicate-json-names';

describe('duplicateJsonName', () => {
  it.each([
    ['{"amount":"1.00","orderId":"a"}', null],
    ['{"amount":100.001,"orderId":"a","amount":"100.00"}', 'amount'],
    ['{"customer":{"email":"a@b.c","email":"d@e.f"}}', 'customer.email'],
    // The same name in two objects is no duplicate.
    ['{"a":{"x":1},"b":{"x":2}}', null],
    ['{"items":[{"code":1},{"code":2,"code":3}]}', 'items[1].code'],
    ['[{"a":1},[{"b":1,"b":2}]]', '[1][0].b'],
    // Escapes spell one name in several ways.
    ['{"amount":"1.00","\\u0061mount":"2.00"}', 'amount'],
    ['{"a\\"b":1,"a\\"b":2}', 'a"b'],
    // A string value that looks like a name, or holds braces, is a value.
    ['{"a":"b","c":"{\\"a\\":1}","b":"a"}', null],
    ['{ "a" : 1 , "a" : 2 }', 'a'],
    ['{}', null],
    ['[]', null],
    ['"amount"', null],
    ['12.5', null],
    ['{"a":[],"b":{},"c":null,"d":true,"e":-1.5e3}', null],
  ])('%s → %s', (text, expected) => {
    JSON.parse(text); // every case is valid JSON
    expect(duplicateJsonName(text)).toBe(expected);
  });

  it('scans any depth JSON.parse takes without deep recursion', () => {
    const deep = `${'['.repeat(50_000)}{"a":1,"a":2}${']'.repeat(50_000)}`;
    JSON.parse(deep);
    expect(duplicateJsonName(deep)).toBe(`${'[0]'.repeat(50_000)}.a`);
  });
});
