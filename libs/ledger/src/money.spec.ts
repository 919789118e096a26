import fc from 'fast-check';
import {
  MAX_MONEY_KOPECKS,
  MAX_PERCENT_RATE,
  MONEY_ABOVE_MAXIMUM,
  MoneyFormatError,
  PERCENT_ABOVE_MAXIMUM,
  PERCENT_SCALE,
  PercentFormatError,
  addKopecks,
  formatMoney,
  formatPercent,
  isKopecks,
  parseMoney,
  parseMoneyOfAnySize,
  parsePercent,
  parsePercentOfAnySize,
  percentOf,
  shareOfRate,
  subtractKopecks,
} from './money';

/** Runs `parse` and returns the refusal, failing the test when it does not refuse with the given class. */
function refusal<E extends Error>(parse: () => unknown, errorClass: new (...args: never[]) => E): E {
  try {
    const accepted = parse();
    throw new Error(`expected a refusal, got ${String(accepted)}`);
  } catch (error) {
    if (!(error instanceof errorClass)) throw error;
    return error;
  }
}

/** Kopecks → "rubles.kk", built with BigInt arithmetic only (independent of formatMoney). */
function moneyText(kopecks: number): string {
  const value = BigInt(kopecks);
  return `${value / 100n}.${(value % 100n).toString().padStart(2, '0')}`;
}

/**
 * Reference for percentOf: amount (kopecks) × rate (1/10000 %) = kopecks × 10^-6, as a
 * decimal digit string; half-up decided by the first dropped digit, no division at all.
 */
function referencePercentOf(amount: number, rate: number): number {
  const digits = (BigInt(amount) * BigInt(rate)).toString().padStart(7, '0');
  const whole = BigInt(digits.slice(0, -6));
  const firstDropped = digits[digits.length - 6];
  return Number(firstDropped >= '5' ? whole + 1n : whole);
}

describe('parseMoney', () => {
  it('caps a single amount at 1,000,000,000.00 rubles', () => {
    expect(MAX_MONEY_KOPECKS).toBe(100_000_000_000);
  });

  it.each([
    ['0.00', 0],
    ['0.01', 1],
    ['0.10', 10],
    ['1.00', 100],
    ['19.99', 1_999],
    ['100.00', 10_000],
    ['123.45', 12_345],
    ['000100.00', 10_000], // the spec's "digits" allows leading zeros
    ['999999999.99', 99_999_999_999],
    ['1000000000.00', MAX_MONEY_KOPECKS],
  ])('accepts the string %j as %d kopecks', (text, kopecks) => {
    expect(parseMoney(text)).toBe(kopecks);
  });

  it.each([
    [0, 0],
    [0.01, 1],
    [0.1, 10],
    [0.29, 29], // 0.29 * 100 === 28.999999999999996
    [1.1, 110], // 1.1 * 100 === 110.00000000000001
    [19.99, 1_999], // 19.99 * 100 === 1998.9999999999998
    [100, 10_000],
    [100.5, 10_050],
    [1e3, 100_000], // a float 1000, however it was written; see the rawLiteral cases
    [999_999_999.99, 99_999_999_999],
    [1_000_000_000, MAX_MONEY_KOPECKS],
  ])('accepts the number %p as %d kopecks', (value, kopecks) => {
    expect(parseMoney(value)).toBe(kopecks);
  });

  it.each([
    [1000, '1000', 100_000],
    [10.1, '10.10', 1_010],
    [10.1, '10.1', 1_010],
    [0, '0', 0],
    [0.05, '0.05', 5],
    [1_000_000_000, '1000000000.00', MAX_MONEY_KOPECKS],
  ])('accepts the number %p written as %j as %d kopecks', (value, literal, kopecks) => {
    expect(parseMoney(value, literal)).toBe(kopecks);
  });

  it.each([
    ['number -0', () => parseMoney(-0)],
    ['number -0 written as "-0"', () => parseMoney(-0, '-0')],
    ['number -0 written as "-0.00"', () => parseMoney(-0, '-0.00')],
  ])('reads %s as +0', (_name, parse) => {
    expect(Object.is(parse(), 0)).toBe(true);
  });

  it.each([
    ['', 'format'],
    [' 1.00', 'format'],
    ['1.00 ', 'format'],
    ['1', 'format'],
    ['100', 'format'],
    ['1.0', 'format'],
    ['1.', 'format'],
    ['.50', 'format'],
    ['1,00', 'format'],
    ['+1.00', 'format'],
    ['0x10', 'format'],
    ['١.٠٠', 'format'], // Arabic-Indic digits
    ['１.００', 'format'], // full-width digits
    ['1 000.00', 'format'],
    ['abc', 'format'],
    ['-', 'format'],
    ['1.000', 'too_many_decimals'],
    ['1.005', 'too_many_decimals'],
    ['0.001', 'too_many_decimals'],
    ['-1.00', 'negative'],
    ['-0.00', 'negative'],
    ['-1', 'negative'],
    ['1e3', 'exponent'],
    ['1E3', 'exponent'],
    ['1.00e2', 'exponent'],
    ['1000000000.01', 'too_large'],
    ['9999999999.99', 'too_large'],
    ['10000000000.00', 'too_large'],
    ['1'.repeat(397) + '.00', 'too_large'], // 400 characters, refused before any conversion
    ['1'.repeat(400), 'format'], // 400 digits without the two decimals
  ])('refuses the string %j: %s', (text, reason) => {
    const error = refusal(() => parseMoney(text), MoneyFormatError);
    expect(error.reason).toBe(reason);
    expect(error.message).toMatch(/[а-яё]/i);
  });

  it.each([
    [NaN, 'not_finite'],
    [Infinity, 'not_finite'],
    [-Infinity, 'not_finite'],
    [-1, 'negative'],
    [-0.01, 'negative'],
    [1.005, 'too_many_decimals'], // 1.005 * 100 === 100.49999999999999
    [0.1 + 0.2, 'too_many_decimals'], // 0.30000000000000004
    [0.001, 'too_many_decimals'],
    [1e-7, 'too_many_decimals'], // String(1e-7) === "1e-7": tiny, so more than two decimals
    [1_000_000_000.01, 'too_large'],
    [1e21, 'too_large'], // String(1e21) === "1e+21", above the maximum in any case
    [Number.MAX_VALUE, 'too_large'],
  ])('refuses the number %p: %s', (value, reason) => {
    expect(refusal(() => parseMoney(value), MoneyFormatError).reason).toBe(reason);
  });

  it.each([
    [1e3, '1e3', 'exponent'],
    [1e3, '1E+3', 'exponent'],
    [1, '100e-2', 'exponent'],
    [10.005, '10.005', 'too_many_decimals'],
    [10.1, '10.100', 'too_many_decimals'], // three decimal digits on the wire, even if zero
    [-1, '-1', 'negative'],
    [-0.01, '-0.01', 'negative'],
    [1_000_000_000.01, '1000000000.01', 'too_large'],
    [1e21, '1000000000000000000000', 'too_large'],
    [Infinity, '1' + '0'.repeat(400), 'too_large'], // what JSON.parse makes of 401 digits
    [Infinity, '1e400', 'exponent'],
  ])('refuses the number %p written as %j: %s', (value, literal, reason) => {
    expect(JSON.parse(literal)).toBe(value); // the case is one a real JSON body can produce
    expect(refusal(() => parseMoney(value, literal), MoneyFormatError).reason).toBe(reason);
  });

  it.each([
    ['a literal of another value', 10, '10.10'],
    ['a literal that is not JSON number text', 1, '+1'],
    ['a literal with spaces', 1, ' 1'],
    ['NaN with a literal', NaN, 'NaN'],
  ])('throws TypeError for %s (a caller bug, not a client error)', (_name, value, literal) => {
    expect(() => parseMoney(value, literal)).toThrow(TypeError);
  });

  it.each([
    ['true', true],
    ['false', false],
    ['null', null],
    ['undefined', undefined],
    ['{}', {}],
    ['[]', []],
    ['["1.00"]', ['1.00']],
    ['10n', 10n],
    ['a Number object', new Number(1)],
    ['a String object', new String('1.00')],
    ['a symbol', Symbol('1.00')],
  ])('refuses %s: type', (_name, value) => {
    const error = refusal(() => parseMoney(value), MoneyFormatError);
    expect(error.reason).toBe('type');
    expect(error.message).toBe('Сумма должна быть строкой вида 100.00 или числом с не более чем двумя знаками после точки');
  });

  it('reads every canonical string from 0.00 to the maximum exactly and formats it back', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_MONEY_KOPECKS }), (kopecks) => {
        const text = moneyText(kopecks);
        const parsed = parseMoney(text);
        expect(parsed).toBe(kopecks);
        expect(formatMoney(parsed)).toBe(text);
      }),
      { numRuns: 2_000 },
    );
  });

  it('reads every two-decimal JSON number exactly, with and without its literal', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_MONEY_KOPECKS }), (kopecks) => {
        const literal = moneyText(kopecks); // "123.40" is valid JSON number text
        const value = JSON.parse(literal) as number;
        expect(parseMoney(value, literal)).toBe(kopecks);
        expect(parseMoney(value)).toBe(kopecks);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses every number with a third decimal, with and without its literal', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_MONEY_KOPECKS / 10 - 1 }), fc.integer({ min: 1, max: 9 }), (cents, thirdDigit) => {
        // ≤ 12 significant digits, so the float's shortest text is this decimal, trailing digit kept
        const literal = `${moneyText(cents)}${thirdDigit}`;
        const value = JSON.parse(literal) as number;
        expect(refusal(() => parseMoney(value, literal), MoneyFormatError).reason).toBe('too_many_decimals');
        expect(refusal(() => parseMoney(value), MoneyFormatError).reason).toBe('too_many_decimals');
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('formatMoney', () => {
  it.each([
    [0, '0.00'],
    [1, '0.01'],
    [5, '0.05'],
    [10, '0.10'],
    [99, '0.99'],
    [100, '1.00'],
    [12_345, '123.45'],
    [MAX_MONEY_KOPECKS, '1000000000.00'],
    [Number.MAX_SAFE_INTEGER, '90071992547409.91'],
    [-5, '-0.05'],
    [-250, '-2.50'],
    [-0, '0.00'],
  ])('formats %p kopecks as %j', (kopecks, text) => {
    expect(formatMoney(kopecks)).toBe(text);
  });

  it.each([[1.5], [0.1], [NaN], [Infinity], [2 ** 53], [-(2 ** 53)]])('throws RangeError for %p', (value) => {
    expect(() => formatMoney(value)).toThrow(RangeError);
  });
});

describe('kopeck arithmetic', () => {
  it.each([
    [1, 2, 3],
    [-5, 3, -2],
    [MAX_MONEY_KOPECKS, MAX_MONEY_KOPECKS, 2 * MAX_MONEY_KOPECKS],
    [Number.MAX_SAFE_INTEGER - 1, 1, Number.MAX_SAFE_INTEGER],
  ])('adds %p + %p = %p', (a, b, sum) => {
    expect(addKopecks(a, b)).toBe(sum);
  });

  it.each([
    [5, 3, 2],
    [3, 5, -2],
    [Number.MIN_SAFE_INTEGER + 1, 1, Number.MIN_SAFE_INTEGER],
  ])('subtracts %p − %p = %p', (a, b, difference) => {
    expect(subtractKopecks(a, b)).toBe(difference);
  });

  it.each([
    ['a sum past the safe range', () => addKopecks(Number.MAX_SAFE_INTEGER, 1)],
    ['a difference past the safe range', () => subtractKopecks(Number.MIN_SAFE_INTEGER, 1)],
    ['a fractional operand', () => addKopecks(0.1, 0.2)],
    ['a NaN operand', () => subtractKopecks(NaN, 0)],
  ])('throws RangeError for %s', (_name, operation) => {
    expect(operation).toThrow(RangeError);
  });

  it.each([
    [0, true],
    [-1, true],
    [Number.MAX_SAFE_INTEGER, true],
    [1.5, false],
    [2 ** 53, false],
    [NaN, false],
    ['1', false],
    [1n, false],
    [null, false],
  ])('isKopecks(%p) is %p', (value, expected) => {
    expect(isKopecks(value)).toBe(expected);
  });
});

describe('parseMoneyOfAnySize and parsePercentOfAnySize', () => {
  it.each<[unknown, string | undefined]>([
    ['1000000000.01', undefined],
    ['9'.repeat(400) + '.00', undefined],
    [1_000_000_000.01, undefined],
    [1e21, undefined],
    [1e30, '1' + '0'.repeat(30)],
    [Infinity, '1' + '0'.repeat(400)], // what JSON.parse makes of 401 digits: judged on the literal
  ])('a well-formed amount above the maximum, %p, is MONEY_ABOVE_MAXIMUM (a safe integer above every limit)', (value, literal) => {
    expect(parseMoneyOfAnySize(value, literal)).toBe(MONEY_ABOVE_MAXIMUM);
    expect(MONEY_ABOVE_MAXIMUM).toBe(MAX_MONEY_KOPECKS + 1);
  });

  it.each<[unknown, string | undefined, string]>([
    ['1000000000.001', undefined, 'too_many_decimals'],
    [1_000_000_000.001, undefined, 'too_many_decimals'],
    [1e21, '1e21', 'exponent'],
    ['1e21', undefined, 'exponent'],
    [Infinity, undefined, 'not_finite'],
    ['-1000000000.01', undefined, 'negative'],
  ])('the format rules still refuse %p (%p): %s', (value, literal, reason) => {
    expect(refusal(() => parseMoneyOfAnySize(value, literal), MoneyFormatError).reason).toBe(reason);
  });

  it('is parseMoney up to the maximum; percentages above 100 are PERCENT_ABOVE_MAXIMUM', () => {
    expect(parseMoneyOfAnySize('1000000000.00')).toBe(MAX_MONEY_KOPECKS);
    expect(parseMoneyOfAnySize(10.5, '10.50')).toBe(1050);
    expect(parsePercentOfAnySize(100)).toBe(MAX_PERCENT_RATE);
    for (const [value, literal] of [
      [150, undefined],
      [100.0001, undefined],
      [Infinity, '9'.repeat(400)],
    ] as const) {
      expect(parsePercentOfAnySize(value, literal)).toBe(PERCENT_ABOVE_MAXIMUM);
    }
    expect(refusal(() => parsePercentOfAnySize(150.00001), PercentFormatError).reason).toBe('too_many_decimals');
  });
});

describe('parsePercent and formatPercent', () => {
  it('counts rates in 1/10000ths of a percent', () => {
    expect(PERCENT_SCALE).toBe(10_000);
    expect(MAX_PERCENT_RATE).toBe(1_000_000);
  });

  it.each([
    ['2.5', 25_000, '2.50'],
    ['3', 30_000, '3.00'],
    ['0.75', 7_500, '0.75'],
    ['1.125', 11_250, '1.125'],
    ['3.15', 31_500, '3.15'],
    ['0.0001', 1, '0.0001'],
    ['33.3333', 333_333, '33.3333'],
    ['0', 0, '0.00'],
    ['0.0000', 0, '0.00'],
    ['100', 1_000_000, '100.00'],
    ['100.0000', 1_000_000, '100.00'],
  ])('reads the string %j as %d and formats it as %j', (text, rate, formatted) => {
    expect(parsePercent(text)).toBe(rate);
    expect(formatPercent(rate)).toBe(formatted);
  });

  it.each([
    [2.5, undefined, 25_000],
    [0.1, undefined, 1_000],
    [0.29, undefined, 2_900], // 0.29 * 10000 === 2899.9999999999995
    [1.0005, undefined, 10_005],
    [100, undefined, 1_000_000],
    [-0, undefined, 0],
    [3, '3', 30_000],
    [3.15, '3.1500', 31_500],
    [0.0001, '0.0001', 1],
  ])('reads the number %p (literal %p) as %d', (value, literal, rate) => {
    expect(parsePercent(value, literal)).toBe(rate);
  });

  it.each([
    ['101', 'too_large'],
    ['100.0001', 'too_large'],
    ['1000', 'too_large'],
    ['9'.repeat(400), 'too_large'],
    ['-1', 'negative'],
    ['1.00001', 'too_many_decimals'],
    ['abc', 'format'],
    ['', 'format'],
    ['2,5', 'format'],
    [' 2.5', 'format'],
    ['2.', 'format'],
    ['.5', 'format'],
    ['+2.5', 'format'],
    ['2.5%', 'format'],
    ['2e0', 'exponent'],
  ])('refuses the string %j: %s', (text, reason) => {
    const error = refusal(() => parsePercent(text), PercentFormatError);
    expect(error.reason).toBe(reason);
    expect(error.message).toMatch(/[а-яё]/i);
  });

  it.each([
    [101, undefined, 'too_large'],
    [100.0001, undefined, 'too_large'],
    [-1, undefined, 'negative'],
    [1.00001, undefined, 'too_many_decimals'],
    [1e-7, undefined, 'too_many_decimals'],
    [NaN, undefined, 'not_finite'],
    [Infinity, undefined, 'not_finite'],
    [2, '2e0', 'exponent'],
    [2.5, '2.50000', 'too_many_decimals'],
    [-1, '-1', 'negative'],
    [101, '101', 'too_large'],
    [true, undefined, 'type'],
    [null, undefined, 'type'],
    [{}, undefined, 'type'],
    [25n, undefined, 'type'],
  ])('refuses %p (literal %p): %s', (value, literal, reason) => {
    expect(refusal(() => parsePercent(value, literal), PercentFormatError).reason).toBe(reason);
  });

  it('round-trips every rate from 0 to 100%', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_PERCENT_RATE }), (rate) => {
        const text = formatPercent(rate);
        expect(text).toMatch(/^\d{1,3}\.\d{2,4}$/);
        expect(parsePercent(text)).toBe(rate);
        expect(parsePercent(Number(text))).toBe(rate);
      }),
      { numRuns: 2_000 },
    );
  });

  it.each([[1.5], [NaN], [2 ** 53]])('formatPercent throws RangeError for %p', (value) => {
    expect(() => formatPercent(value)).toThrow(RangeError);
  });
});

describe('percentOf', () => {
  it.each([
    ['1% of 0.50 (0.005 → 0.01)', '0.50', '1', '0.01'],
    ['1% of 1.50 (0.015 → 0.02)', '1.50', '1', '0.02'],
    ['1% of 0.49 (0.0049 → 0.00)', '0.49', '1', '0.00'],
    ['1% of 2.50 (0.025 → 0.03)', '2.50', '1', '0.03'],
    ['1% of 2.49 (0.0249 → 0.02)', '2.49', '1', '0.02'],
    ['2.5% of 100.00', '100.00', '2.5', '2.50'],
    ['3.15% of 333.33 (10.499895 → 10.50)', '333.33', '3.15', '10.50'],
    ['3.15% of 333.17 (10.494855 → 10.49)', '333.17', '3.15', '10.49'],
    ['0% of the maximum', '1000000000.00', '0', '0.00'],
    ['100% of the maximum', '1000000000.00', '100', '1000000000.00'],
    ['0.0001% of 1.00 (0.000001 → 0.00)', '1.00', '0.0001', '0.00'],
    ['0.0001% of 5000.00 (0.005 → 0.01)', '5000.00', '0.0001', '0.01'],
    ['0.0001% of the maximum', '1000000000.00', '0.0001', '1000.00'],
    ['33.3333% of 0.03 (0.00999999 → 0.01)', '0.03', '33.3333', '0.01'],
    ['any rate of 0.00', '0.00', '100', '0.00'],
  ])('%s', (_name, amount, rate, fee) => {
    expect(formatMoney(percentOf(parseMoney(amount), parsePercent(rate)))).toBe(fee);
  });

  it.each([
    ['0.5', 0],
    ['1', 0],
    ['1.5', 0],
    ['2', 0],
    ['2.5', 0],
    ['3', 0],
    ['3.5', 0],
    ['4', 0],
    ['5', 0],
    ['10', 0],
    ['49.9999', 0],
    ['50', 1], // exactly half a kopeck rounds up
    ['99.9999', 1],
    ['100', 1],
  ])('%s%% of the smallest amount 0.01 is %d kopecks', (rate, kopecks) => {
    expect(percentOf(1, parsePercent(rate))).toBe(kopecks);
  });

  it.each([
    ['a negative amount', () => percentOf(-1, 10_000)],
    ['a fractional amount', () => percentOf(0.5, 10_000)],
    ['a negative rate', () => percentOf(100, -1)],
    ['a fractional rate', () => percentOf(100, 2.5)],
    ['a result past the safe range', () => percentOf(Number.MAX_SAFE_INTEGER, 2_000_000)],
  ])('throws RangeError for %s', (_name, operation) => {
    expect(operation).toThrow(RangeError);
  });

  it('equals the exact decimal reference for any amount up to the maximum and any rate up to 100%', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_MONEY_KOPECKS }), fc.integer({ min: 0, max: MAX_PERCENT_RATE }), (amount, rate) => {
        expect(percentOf(amount, rate)).toBe(referencePercentOf(amount, rate));
      }),
      { numRuns: 5_000 },
    );
  });

  it('agrees with the reference around every half-kopeck boundary', () => {
    // amount × rate ≡ 500_000 (mod 10^6) exactly at a half: rate 50% and odd amounts hit it.
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_MONEY_KOPECKS / 2 - 1 }), fc.integer({ min: -1, max: 1 }), (n, delta) => {
        const amount = 2 * n + 1;
        const rate = 500_000 + delta;
        expect(percentOf(amount, rate)).toBe(referencePercentOf(amount, rate));
      }),
      { numRuns: 1_000 },
    );
  });

  it('is monotonic in the amount', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: MAX_MONEY_KOPECKS }),
        fc.integer({ min: 0, max: MAX_MONEY_KOPECKS }),
        fc.integer({ min: 0, max: MAX_PERCENT_RATE }),
        (a, b, rate) => {
          const [smaller, larger] = a <= b ? [a, b] : [b, a];
          expect(percentOf(smaller, rate)).toBeLessThanOrEqual(percentOf(larger, rate));
          expect(percentOf(larger, rate)).toBeLessThanOrEqual(larger);
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe('shareOfRate', () => {
  it.each([
    [25_000, 50, 12_500],
    [30_000, 33, 9_900],
    [1, 50, 1], // 0.00005% → 0.0001%: halves round up
    [1, 49, 0],
    [33_333, 50, 16_667], // 16_666.5
    [33_333, 10, 3_333], // 3_333.3
    [0, 100, 0],
  ])('shareOfRate(%d, %d) = %d', (rate, share, expected) => {
    expect(shareOfRate(rate, share)).toBe(expected);
  });

  it('keeps the whole rate at 100 and none at 0', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_PERCENT_RATE }), (rate) => {
        expect(shareOfRate(rate, 100)).toBe(rate);
        expect(shareOfRate(rate, 0)).toBe(0);
      }),
    );
  });

  it.each([[101], [-1], [0.5], [NaN]])('throws RangeError for a share of %p', (share) => {
    expect(() => shareOfRate(25_000, share)).toThrow(RangeError);
  });

  it('throws RangeError for a negative rate', () => {
    expect(() => shareOfRate(-1, 50)).toThrow(RangeError);
  });
});
