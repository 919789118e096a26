/**
 * Exact money and percentages.
 *
 * Inside the code money is an integer number of kopecks and a percentage rate is an
 * integer number of 1/10000ths of a percent; neither is ever a float on a money path.
 * On the wire (API spec, "Conventions") an amount is a string in rubles with exactly two
 * decimals ("100.00"); requests may also send a JSON number. Conversions here are done
 * on decimal text, never by multiplying floats, and fees are rounded half-up to the
 * kopeck with BigInt (DESIGN.md, "Decisions").
 */

/** Integer number of kopecks (1 ruble = 100 kopecks). A safe integer; may be negative only for ledger system balances. */
export type Kopecks = number & { readonly __brand?: 'Kopecks' };

/** The sane maximum of any single amount: 1,000,000,000.00 rubles. */
export const MAX_MONEY_KOPECKS: Kopecks = 100_000_000_000;

export type MoneyErrorReason = 'type' | 'format' | 'too_many_decimals' | 'exponent' | 'negative' | 'not_finite' | 'too_large';

/** An amount that is not the spec's Money. `reason` is for code; `message` (Russian) is for the merchant. */
export class MoneyFormatError extends Error {
  constructor(
    readonly reason: MoneyErrorReason,
    message: string,
  ) {
    super(message);
    this.name = 'MoneyFormatError';
  }
}

const MONEY_MESSAGES: Record<MoneyErrorReason, string> = {
  type: 'Сумма должна быть строкой вида 100.00 или числом с не более чем двумя знаками после точки',
  format: 'Сумма должна быть строкой вида 100.00: цифры, точка и ровно две цифры после неё',
  too_many_decimals: 'В сумме не может быть больше двух знаков после точки',
  exponent: 'Сумма не может быть записана в экспоненциальной форме',
  negative: 'Сумма не может быть отрицательной',
  not_finite: 'Сумма должна быть конечным числом',
  too_large: 'Сумма не может превышать 1000000000.00',
};

/** A percentage rate, exact: the number of 1/10000ths of a percent (2.5% → 25_000; 100% → 1_000_000). */
export type PercentRate = number & { readonly __brand?: 'PercentRate' };

/** PercentRate units in one percent. */
export const PERCENT_SCALE = 10_000;

/** 100%, the largest rate parsePercent accepts. */
export const MAX_PERCENT_RATE: PercentRate = 100 * PERCENT_SCALE;

/** Same reasons as money; 'too_large' means above 100%. */
export type PercentErrorReason = MoneyErrorReason;

/** A percentage that is not a decimal from 0 to 100 with at most four decimals. */
export class PercentFormatError extends Error {
  constructor(
    readonly reason: PercentErrorReason,
    message: string,
  ) {
    super(message);
    this.name = 'PercentFormatError';
  }
}

const PERCENT_MESSAGES: Record<PercentErrorReason, string> = {
  type: 'Процент должен быть числом или строкой вида 2.5',
  format: 'Процент должен быть десятичным числом вида 2.5: цифры и, при необходимости, точка и до четырёх знаков после неё',
  too_many_decimals: 'В проценте не может быть больше четырёх знаков после точки',
  exponent: 'Процент не может быть записан в экспоненциальной форме',
  negative: 'Процент не может быть отрицательным',
  not_finite: 'Процент должен быть конечным числом',
  too_large: 'Процент не может быть больше 100',
};

/** How one kind of decimal (money or percent) is read. */
interface DecimalRules {
  /** Digits after the point that make one unit: 2 for kopecks, 4 for PercentRate. */
  readonly decimals: number;
  /** Strings must carry exactly `decimals` decimals (money) instead of up to that many (percent). */
  readonly exactDecimalsInStrings: boolean;
  /** Largest accepted value, in units. */
  readonly maxUnits: number;
  /** Largest accepted value, in whole units of the wire (rubles, percent); an exact double. */
  readonly maxWhole: number;
  readonly fail: (reason: MoneyErrorReason) => never;
}

const MONEY_RULES: DecimalRules = {
  decimals: 2,
  exactDecimalsInStrings: true,
  maxUnits: MAX_MONEY_KOPECKS,
  maxWhole: MAX_MONEY_KOPECKS / 100,
  fail: (reason) => {
    throw new MoneyFormatError(reason, MONEY_MESSAGES[reason]);
  },
};

const PERCENT_RULES: DecimalRules = {
  decimals: 4,
  exactDecimalsInStrings: false,
  maxUnits: MAX_PERCENT_RATE,
  maxWhole: MAX_PERCENT_RATE / PERCENT_SCALE,
  fail: (reason) => {
    throw new PercentFormatError(reason, PERCENT_MESSAGES[reason]);
  },
};

// All patterns below are linear (no nested quantifiers) and ASCII-only: `\d` without the
// `u` flag is [0-9], so Arabic-Indic or full-width digits fall through to 'format'.
const NEGATIVE_TEXT = /^-(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
const EXPONENT_TEXT = /^(?:\d+(?:\.\d*)?|\.\d+)[eE][+-]?\d+$/;
const PLAIN_DECIMAL = /^(\d+)(?:\.(\d+))?$/;
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * Parses the spec's Money: a string `digits.dd` (exactly two decimals), or a JSON number
 * with at most two decimals. Zero is accepted (minimums are business rules elsewhere).
 *
 * Strings: `/^\d+\.\d{2}$/`, ASCII digits only, leading zeros allowed ("0100.00" is 100.00,
 * the spec's "digits" does not forbid them). Reasons: a leading '-' → 'negative';
 * exponent notation → 'exponent'; three or more decimals → 'too_many_decimals'; fewer
 * than two, none, a '+', spaces, a comma, hex, "" → 'format'; above MAX_MONEY_KOPECKS →
 * 'too_large' (the length of the integer digits is checked before any conversion, so a
 * 400-digit string is never turned into a number).
 *
 * Numbers: NaN/±Infinity → 'not_finite'; below zero → 'negative' (-0 is 0 and accepted).
 * With `rawLiteral` (the number's text as it appeared in the JSON body) the literal is
 * checked, not the float: a '-' on a non-zero value → 'negative', an exponent ("1e3") →
 * 'exponent', three or more decimal digits, trailing zeros included ("10.005", "10.100")
 * → 'too_many_decimals', above the maximum → 'too_large'. The literal must be JSON number
 * text whose value is `value`; otherwise the caller is wrong and a TypeError is thrown.
 * Without `rawLiteral` the float is read through its shortest round-trip decimal text
 * (`String(n)`: 0.29 → "0.29" → 29 kopecks, 0.1 + 0.2 → "0.30000000000000004" → refused):
 * more than two decimals → 'too_many_decimals', then above the maximum → 'too_large'
 * (every n ≥ 1e21, whose text has an exponent, is); a tiny non-zero value whose text has
 * an exponent (1e-7) → 'too_many_decimals', since it necessarily has more decimals.
 *
 * Anything else (boolean, null, undefined, object, array, bigint, …) → 'type'.
 * `rawLiteral` is ignored when `value` is a string.
 */
export function parseMoney(value: unknown, rawLiteral?: string): Kopecks {
  return parseDecimal(value, rawLiteral, MONEY_RULES);
}

/**
 * A decimal string ("2.5", "3", "0.75", at most four decimals, ASCII digits, no sign or
 * spaces) or a JSON number with at most 4 decimals, from 0 to 100 inclusive. Same reasons
 * and the same `rawLiteral` rule as parseMoney; 'too_large' means above 100.
 */
export function parsePercent(value: unknown, rawLiteral?: string): PercentRate {
  return parseDecimal(value, rawLiteral, PERCENT_RULES);
}

function parseDecimal(value: unknown, rawLiteral: string | undefined, rules: DecimalRules): number {
  if (typeof value === 'string') return parseDecimalString(value, rules);
  if (typeof value !== 'number') return rules.fail('type');
  if (rawLiteral !== undefined) return parseNumberLiteral(value, rawLiteral, rules);
  return parseFloatValue(value, rules);
}

function parseDecimalString(text: string, rules: DecimalRules): number {
  if (NEGATIVE_TEXT.test(text)) return rules.fail('negative');
  if (EXPONENT_TEXT.test(text)) return rules.fail('exponent');
  const match = PLAIN_DECIMAL.exec(text);
  if (match === null) return rules.fail('format');
  const [, integerDigits, fraction = ''] = match;
  if (fraction.length > rules.decimals) return rules.fail('too_many_decimals');
  if (rules.exactDecimalsInStrings && fraction.length !== rules.decimals) return rules.fail('format');
  return toUnits(integerDigits, fraction, rules);
}

function parseNumberLiteral(value: number, rawLiteral: string, rules: DecimalRules): number {
  if (typeof rawLiteral !== 'string' || !JSON_NUMBER.test(rawLiteral) || Number(rawLiteral) !== value) {
    throw new TypeError(`rawLiteral ${JSON.stringify(rawLiteral)} is not the JSON literal of ${String(value)}`);
  }
  let literal = rawLiteral;
  if (literal.startsWith('-')) {
    if (value !== 0) return rules.fail('negative');
    literal = literal.slice(1);
  }
  if (/[eE]/.test(literal)) return rules.fail('exponent');
  const [integerDigits, fraction = ''] = literal.split('.');
  if (fraction.length > rules.decimals) return rules.fail('too_many_decimals');
  return toUnits(integerDigits, fraction, rules);
}

function parseFloatValue(value: number, rules: DecimalRules): number {
  if (!Number.isFinite(value)) return rules.fail('not_finite');
  if (value < 0) return rules.fail('negative');
  // Shortest round-trip text: exactly the decimal the sender meant, when it fits in a double.
  const text = String(value);
  // An exponent appears for value ≥ 1e21 (an integer, above any maximum) and for 0 < value < 1e-6 (too many decimals).
  if (/[eE]/.test(text)) return rules.fail(value > rules.maxWhole ? 'too_large' : value > 0 && value < 1 ? 'too_many_decimals' : 'exponent');
  const match = PLAIN_DECIMAL.exec(text);
  if (match === null) return rules.fail('format');
  const [, integerDigits, fraction = ''] = match;
  if (fraction.length > rules.decimals) return rules.fail('too_many_decimals');
  return toUnits(integerDigits, fraction, rules);
}

/** Whole digits and at most `rules.decimals` fraction digits → integer units, range-checked. */
function toUnits(integerDigits: string, fraction: string, rules: DecimalRules): number {
  const significant = integerDigits.replace(/^0+/, '');
  // Guard before converting: more whole digits than the maximum has cannot be in range.
  if (significant.length > String(rules.maxWhole).length) return rules.fail('too_large');
  // Both parts have at most a dozen digits here, so the arithmetic is exact integer arithmetic.
  const units = Number(significant || '0') * 10 ** rules.decimals + Number(fraction.padEnd(rules.decimals, '0'));
  if (units > rules.maxUnits) return rules.fail('too_large');
  return units;
}

/**
 * What a well-formed amount above MAX_MONEY_KOPECKS reads as where a request's own limits
 * say "too much" (an invoice's amount, a refund, a payout: 422, not 400): one kopeck above
 * the maximum, so above every limit, and a safe integer whatever was sent.
 */
export const MONEY_ABOVE_MAXIMUM: Kopecks = MAX_MONEY_KOPECKS + 1;

/** parseMoney, but a well-formed amount of any size above the maximum is MONEY_ABOVE_MAXIMUM, not 'too_large'. */
export function parseMoneyOfAnySize(value: unknown, rawLiteral?: string): Kopecks {
  return aboveMaximumAs(MONEY_ABOVE_MAXIMUM, () => parseMoney(value, rawLiteral));
}

/** What a well-formed percentage above 100 reads as where a limit below it refuses it (customerFeePct: above every rate). */
export const PERCENT_ABOVE_MAXIMUM: PercentRate = MAX_PERCENT_RATE + 1;

/** parsePercent, but a well-formed percentage of any size above 100 is PERCENT_ABOVE_MAXIMUM, not 'too_large'. */
export function parsePercentOfAnySize(value: unknown, rawLiteral?: string): PercentRate {
  return aboveMaximumAs(PERCENT_ABOVE_MAXIMUM, () => parsePercent(value, rawLiteral));
}

function aboveMaximumAs(aboveMaximum: number, parse: () => number): number {
  try {
    return parse();
  } catch (error) {
    if ((error instanceof MoneyFormatError || error instanceof PercentFormatError) && error.reason === 'too_large') return aboveMaximum;
    throw error;
  }
}

/** Two decimals, '-' for negatives: 12345 → "123.45", 5 → "0.05", -250 → "-2.50". Throws RangeError on a non-safe-integer. */
export function formatMoney(amount: Kopecks): string {
  requireSafeInteger(amount, 'amount');
  const sign = amount < 0 ? '-' : '';
  const magnitude = Math.abs(amount);
  const kopecks = magnitude % 100;
  const rubles = (magnitude - kopecks) / 100;
  return `${sign}${rubles}.${String(kopecks).padStart(2, '0')}`;
}

/** a + b; throws RangeError unless both operands and the result are safe integers. */
export function addKopecks(a: Kopecks, b: Kopecks): Kopecks {
  requireSafeInteger(a, 'a');
  requireSafeInteger(b, 'b');
  const sum = a + b;
  if (!Number.isSafeInteger(sum)) throw new RangeError(`${a} + ${b} is not a safe integer number of kopecks`);
  return sum;
}

/** a − b; throws RangeError unless both operands and the result are safe integers. */
export function subtractKopecks(a: Kopecks, b: Kopecks): Kopecks {
  requireSafeInteger(a, 'a');
  requireSafeInteger(b, 'b');
  const difference = a - b;
  if (!Number.isSafeInteger(difference)) throw new RangeError(`${a} - ${b} is not a safe integer number of kopecks`);
  return difference;
}

/** A safe integer (any sign: ledger system balances may be negative). */
export function isKopecks(value: unknown): value is Kopecks {
  return Number.isSafeInteger(value);
}

/** At least two decimals, more only when needed: 25_000 → "2.50", 30_000 → "3.00", 11_250 → "1.125", 0 → "0.00". */
export function formatPercent(rate: PercentRate): string {
  requireSafeInteger(rate, 'rate');
  const sign = rate < 0 ? '-' : '';
  const magnitude = Math.abs(rate);
  const fractionUnits = magnitude % PERCENT_SCALE;
  const whole = (magnitude - fractionUnits) / PERCENT_SCALE;
  const fraction = String(fractionUnits)
    .padStart(4, '0')
    .replace(/0{1,2}$/, '');
  return `${sign}${whole}.${fraction}`;
}

/**
 * amount × rate / 100, rounded half-up to the kopeck, computed exactly with BigInt.
 * amount ≥ 0 and rate ≥ 0 (safe integers); throws RangeError otherwise or if the result is not a safe integer.
 */
export function percentOf(amount: Kopecks, rate: PercentRate): Kopecks {
  requireNonNegativeSafeInteger(amount, 'amount');
  requireNonNegativeSafeInteger(rate, 'rate');
  return divideHalfUp(BigInt(amount) * BigInt(rate), BigInt(100 * PERCENT_SCALE));
}

/**
 * rate × share / 100 for the deprecated customerFeeShare (an integer percent 0..100),
 * rounded half-up to 1/10000 %. rate ≥ 0; throws RangeError on anything else.
 */
export function shareOfRate(rate: PercentRate, sharePercent: number): PercentRate {
  requireNonNegativeSafeInteger(rate, 'rate');
  if (!Number.isInteger(sharePercent) || sharePercent < 0 || sharePercent > 100) {
    throw new RangeError(`sharePercent must be an integer from 0 to 100, got ${String(sharePercent)}`);
  }
  return divideHalfUp(BigInt(rate) * BigInt(sharePercent), 100n);
}

/** round(numerator / denominator), halves up; numerator ≥ 0, denominator even and > 0. */
function divideHalfUp(numerator: bigint, denominator: bigint): number {
  const result = Number((numerator + denominator / 2n) / denominator);
  if (!Number.isSafeInteger(result)) throw new RangeError('the result is not a safe integer');
  return result;
}

function requireSafeInteger(value: number, name: string): void {
  if (!Number.isSafeInteger(value)) throw new RangeError(`${name} must be a safe integer, got ${String(value)}`);
}

function requireNonNegativeSafeInteger(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative safe integer, got ${String(value)}`);
  }
}
