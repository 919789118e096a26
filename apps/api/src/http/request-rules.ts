import { applyDecorators } from '@nestjs/common';
import { IsInt, isString, IsString, Matches, Max, Min, ValidateBy, ValidateIf, ValidationArguments, ValidationOptions } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';
import type { Kopecks, PercentRate } from '#ledger';
import { MAX_MONEY_KOPECKS, MoneyFormatError, parseMoney, parseMoneyOfAnySize, parsePercent, parsePercentOfAnySize, PercentFormatError } from '#ledger';
import { calendarInstantProblem, isCalendarInstant } from '#platform/clock';
import { pageSeq, parseCursor } from './cursor';
import type { SchemaObject } from '../docs/openapi-document';
import { literalOf, UNACCOUNTED } from './number-literals';

/**
 * The request rules class-validator has no decorator for, each small and each with the
 * reason; their JSON Schema fragments for the OpenAPI documents; and the one table that
 * turns the constraint a field breaks into the API's code and Russian message.
 */

const rule = (name: string, valid: (value: unknown, args: ValidationArguments) => boolean, constraints: unknown[] = [], options?: ValidationOptions) =>
  ValidateBy({ name, constraints, validator: { validate: (value: unknown, args?: ValidationArguments) => valid(value, args!) } }, options);

/** Sent at all. (IsDefined refuses null too; here null meets the field's type rule.) */
export const Required = (options?: ValidationOptions) => rule('required', (v) => v !== undefined, [], options);

/** Absent skips the field's rules; null does not, it meets the type rule (IsOptional, for the nullable fields, skips null too). */
export const Optional = () => ValidateIf((_object: object, value: unknown) => value !== undefined);

// Lengths in characters (code points), as JSON Schema's minLength and maxLength in the
// documents count them: class-validator's MinLength and MaxLength (validator.js) also leave
// out variation selectors. Same names, so the documents' minLength and maxLength come from
// class-validator-jsonschema's own converters.
const characterCount = (text: string): number => {
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      count--;
      i++;
    }
  }
  return count;
};
export const MinLength = (min: number) => rule('minLength', (v) => isString(v) && v.length >= min && characterCount(v) >= min, [min]);
export const MaxLength = (max: number) => rule('maxLength', (v) => isString(v) && (v.length <= max || characterCount(v) <= max), [max]);

/** Some character other than white space: a name or reason of blanks says nothing to whoever reads it (400 `blank`). */
export const NotBlank = () => Matches(/\S/, { message: 'не может состоять из одних пробелов', context: { code: 'blank' } });

/** The formats of an e-mail address and a phone number (E.164) the API takes. */
export const EMAIL = /^[^\s@"<>()[\]\\,;:]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
export const E164 = /^\+[1-9]\d{1,14}$/;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text PostgreSQL can store as json: no NUL character, no lone UTF-16 surrogate. */
export const storableText = (text: string): boolean => !text.includes('\u0000') && !LONE_SURROGATE.test(text);
/** No decorator says it: PostgreSQL refuses NUL and lone surrogates in json text. */
export const StorableText = () => rule('storableText', (v) => isString(v) && storableText(v));

export const MAX_JSON_DEPTH = 32;

/**
 * Why an arbitrary JSON value (customFields) cannot be stored, or null: nesting deeper
 * than MAX_JSON_DEPTH, or a key or string with text PostgreSQL refuses. A bounded walk.
 */
export function unstorableJson(value: unknown, depth = 0): string | null {
  if (depth > MAX_JSON_DEPTH) return `вложенность глубже ${MAX_JSON_DEPTH} уровней`;
  if (typeof value === 'string') return storableText(value) ? null : 'символ NUL (\\u0000) или одиночный суррогат UTF-16';
  // An integer past 2^53 (or past any double) was already changed by JSON parsing: refused rather than answered back changed (I-JSON, RFC 7493).
  if (typeof value === 'number' && (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value)))) {
    return 'число, которое не хранится точно (целые — до 2^53 − 1 по модулю): передайте его строкой';
  }
  if (Array.isArray(value)) {
    for (const item of value) {
      const problem = unstorableJson(item, depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (!storableText(key)) return 'символ NUL (\\u0000) или одиночный суррогат UTF-16 в имени поля';
      const problem = unstorableJson(item, depth + 1);
      if (problem) return problem;
    }
  }
  return null;
}
/** Any JSON the database can store (see unstorableJson); the document states the text rules, the depth in words. */
export const StorableJson = () => rule('storableJson', (v) => unstorableJson(v) === null);
/** The size of a value as JSON text, which JSON Schema cannot count. */
/** At most `max` bytes in UTF-8 (class-validator's IsByteLength throws on a lone surrogate: a 500). */
export const MaxUtf8Bytes = (max: number) => rule('maxUtf8Bytes', (v) => isString(v) && Buffer.byteLength(v) <= max, [max]);
export const MaxJsonBytes = (max: number) => rule('maxJsonBytes', (v) => Buffer.byteLength(JSON.stringify(v) ?? '') <= max, [max]);

/** A character no URI holds, which WHATWG URL parsing would drop or read as `/`: whitespace, control, backslash. */
const NOT_IN_URI = /[\s\p{Cc}\\]/u;
/**
 * http:// or https:// as WHATWG URL reads it (class-validator's IsUrl is validator.js's
 * own, different, reading), written as a URI: with none of the characters that reading drops.
 */
export const IsHttpUrl = () =>
  rule('httpUrl', (v) => {
    try {
      return isString(v) && !NOT_IN_URI.test(v) && ['http:', 'https:'].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  });

/**
 * A URL without a user name or password: a buyer sent to `https://bank.ru@evil.example/`
 * from the gateway's own page reads the bank's name and lands elsewhere.
 */
export const NoCredentialsInUrl = () =>
  rule('noUrlCredentials', (v) => {
    try {
      const url = new URL(v as string);
      return url.username === '' && url.password === '';
    } catch {
      return true; // not a URL: the URL's own rule says so
    }
  });

/** An ISO 8601 date and time that names a real calendar moment (IsISO8601 also takes dates alone and week dates). */
export const IsIsoDateTime = () => rule('isoDateTime', (v) => isString(v) && isCalendarInstant(v));

/**
 * An instant as ISO 8601 text (from, to, asOf, createdFrom...): a string PostgreSQL can
 * store, at most 40 characters, an existing date and time. The four rules are applied in
 * the order the stacked decorators were (the lowest first), for the pipe and the documents.
 */
export const IsoInstant = () => applyDecorators(IsIsoDateTime(), MaxLength(40), StorableText(), IsString());

/** A page cursor: the nextCursor of the previous page. */
export const IsCursor = () => rule('cursor', (v) => isString(v) && parseCursor(v, pageSeq) !== null);

export interface QueryIntegerOptions {
  /** Text that is not digits is `invalid` with this message; without it, one `out_of_range` says both. */
  readonly notDigits?: string;
  readonly range?: string;
}
const digitsUpTo = (max: number) => new RegExp(`^\\d{1,${Math.max(9, String(max).length)}}$`);
/** An integer as a query string carries it: digits (leading zeros too), in range. */
export const IsQueryInteger = (min: number, max: number, options: QueryIntegerOptions = {}) => {
  const digits = digitsUpTo(max);
  return rule('queryInteger', (v) => isString(v) && digits.test(v) && Number(v) >= min && Number(v) <= max, [min, max, options]);
};

// Money and percent: JSON.parse reads `1e3` and `1000`, `10.1` and `10.100` alike; the rules need the number as written.

interface Problem {
  readonly code: string;
  readonly message: string;
}
const LITERAL_MESSAGE = 'число не удалось сверить с его записью в теле запроса';

function decimalProblem(
  kind: 'money' | 'percent',
  parse: (value: unknown, literal?: string) => number,
  value: unknown,
  args: ValidationArguments,
): Problem | null {
  const literal = literalOf(args.object, args.property, value);
  if (literal === UNACCOUNTED) return { code: `invalid_${kind}_literal`, message: LITERAL_MESSAGE };
  try {
    parse(value, literal);
    return null;
  } catch (error) {
    if (error instanceof MoneyFormatError || error instanceof PercentFormatError) return { code: `invalid_${kind}_${error.reason}`, message: error.message };
    throw error;
  }
}
const anySize = (args: ValidationArguments): boolean => (args.constraints[0] as { anySize?: boolean }).anySize === true;
const moneyProblem = (value: unknown, args: ValidationArguments): Problem | null => {
  const problem = decimalProblem('money', anySize(args) ? parseMoneyOfAnySize : parseMoney, value, args);
  const positive = (args.constraints[0] as { positive?: string }).positive;
  return problem ?? (positive !== undefined && moneyAsSent(args.object, args.property) === 0 ? { code: 'out_of_range', message: positive } : null);
};
const percentProblem = (value: unknown, args: ValidationArguments): Problem | null =>
  (args.constraints[0] as { numberOnly?: boolean }).numberOnly && typeof value !== 'number'
    ? { code: 'invalid_type', message: 'ожидается число' }
    : decimalProblem('percent', anySize(args) ? parsePercentOfAnySize : parsePercent, value, args);

/**
 * A validated IsMoney field of a request, read from its literal: with `anySize`, an amount
 * above the largest one (MAX_MONEY_KOPECKS) is MONEY_ABOVE_MAXIMUM, which the route's own
 * limit refuses as too much (422), never the float JSON.parse made of it.
 */
export const moneyAsSent = (request: object, property: string): Kopecks => {
  const value = (request as Record<string, unknown>)[property];
  return parseMoneyOfAnySize(value, literalAt(request, property, value));
};
/** A validated IsPercent field of a request, read from its literal; with `anySize`, above 100 is PERCENT_ABOVE_MAXIMUM. */
export const percentAsSent = (request: object, property: string): PercentRate => {
  const value = (request as Record<string, unknown>)[property];
  return parsePercentOfAnySize(value, literalAt(request, property, value));
};
const literalAt = (request: object, property: string, value: unknown): string | undefined => {
  const literal = literalOf(request, property, value);
  return literal === UNACCOUNTED ? undefined : literal;
};

// Integers: JSON.parse reads `1440.0000000000000001` as 1440 and `1e3` as 1000, so IsInt, Min and Max on the parsed number would take them.

/** An integer as a JSON body writes it: digits, a '-' for a negative (`-0` is zero), no point, no exponent. */
/**
 * The exact integer a JSON number literal writes (`60.0` and `6e1` are 60, as JSON
 * Schema's `integer` reads them), or null when it writes a fraction, however small
 * (`0.99999999999999999` is not 1). Beyond 10^30 in size: ±10^31 (out of any range).
 */
function exactInteger(literal: string): bigint | null {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal);
  if (!m) return null;
  const digits = `${m[2]}${m[3] ?? ''}`.replace(/^0+/, '');
  if (digits === '') return 0n;
  const sign = m[1] === '-' ? -1n : 1n;
  // value = digits × 10^exponent
  const exponent = Number(m[4] ?? '0') - (m[3]?.length ?? 0);
  if (exponent >= 0) return exponent + digits.length > 31 ? sign * 10n ** 31n : sign * BigInt(digits) * 10n ** BigInt(exponent);
  const cut = -exponent;
  if (cut >= digits.length || !/^0+$/.test(digits.slice(-cut))) return null;
  const whole = digits.slice(0, -cut);
  return whole.length > 31 ? sign * 10n ** 31n : sign * BigInt(whole);
}

const integerProblem = (value: unknown, args: ValidationArguments): Problem | null => {
  if (typeof value !== 'number') return null;
  const [min, max] = args.constraints as [number, number];
  const literal = literalOf(args.object, args.property, value);
  if (literal === undefined) return null;
  if (literal === UNACCOUNTED) return { code: 'invalid_type', message: LITERAL_MESSAGE };
  const n = exactInteger(literal);
  if (n === null) return { code: 'invalid_type', message: 'ожидается целое число' };
  return n < BigInt(min) || n > BigInt(max) ? { code: 'out_of_range', message: `от ${min} до ${max}` } : null;
};

/**
 * An integer from min to max, judged on the literal's exact value (`60.0` and `6e1` are
 * 60; `1440.0000000000000001` is refused whatever it parses to): IsInt, Min and Max for the
 * number and the documents, and the literal's own rule. `options` (a message, a code)
 * apply to all four.
 */
export const IsInteger = (min: number, max: number, options?: ValidationOptions) =>
  applyDecorators(
    rule('integerAsWritten', (v, args) => integerProblem(v, args) === null, [min, max], options),
    Max(max, options),
    Min(min, options),
    IsInt(options),
  );

/**
 * Money as written: a string with two decimals, or a number whose literal has at most two;
 * `positive`: zero refused with this message; `anySize`: no upper bound here (the route's
 * limit answers 422 for too much; read the value with moneyAsSent), else at most 1,000,000,000.00.
 */
export const IsMoney = (options: { positive?: string; anySize?: boolean } = {}) => rule('money', (v, args) => moneyProblem(v, args) === null, [options]);
/** A percent as written: up to four decimals, 0 to 100 (`anySize`: any size, read with percentAsSent); `numberOnly`: a JSON number, not a string. */
export const IsPercent = (options: { numberOnly?: boolean; anySize?: boolean } = {}) =>
  rule('percent', (v, args) => percentProblem(v, args) === null, [options]);

// ---------------------------------------------------------------------------
// The answer of a broken constraint
// ---------------------------------------------------------------------------

/** The constraints of one property, by name: a message may need a sibling's arguments (a range states both bounds). */
export type PropertyRules = ReadonlyMap<string, ValidationMetadata>;
type Say = (args: ValidationArguments, rules: PropertyRules) => string;
const say =
  (text: string): Say =>
  () =>
    text;
/** `n символа` or `n символов`, as "не длиннее" takes it (1, 21, 101: символа). */
const characters = (n: number) => `${n} ${n % 10 === 1 && n % 100 !== 11 ? 'символа' : 'символов'}`;
const bounds = (rules: PropertyRules) => `от ${rules.get('min')?.constraints[0]} до ${rules.get('max')?.constraints[0]}`;
const queryInteger = (args: ValidationArguments) => {
  const [min, max, options] = args.constraints as [number, number, QueryIntegerOptions];
  const notDigits = options.notDigits !== undefined && !(isString(args.value) && digitsUpTo(max).test(args.value));
  return notDigits ? { code: 'invalid', message: options.notDigits! } : { code: 'out_of_range', message: options.range ?? `целое число от ${min} до ${max}` };
};

/**
 * class-validator's constraint names (and ours) with the API's code and Russian message,
 * in the order a field's violation is chosen, the first it breaks: presence, type,
 * storable text, length, format, value. A decorator's own `message` replaces the
 * message here, its `context.code` the code. Codes and messages are the contract.
 */
export const ANSWERS: Readonly<Record<string, readonly [code: string | ((args: ValidationArguments) => string), message: Say]>> = {
  required: ['required', say('обязательное поле')],
  isString: ['invalid_type', say('ожидается строка')],
  isInt: ['invalid_type', say('ожидается целое число')],
  integerAsWritten: [(args) => integerProblem(args.value, args)!.code, (args) => integerProblem(args.value, args)!.message],
  isBoolean: ['invalid_type', say('ожидается true или false')],
  isObject: ['invalid_type', say('ожидается объект')],
  isArray: ['invalid_type', say('ожидается массив')],
  storableText: ['invalid_character', say('символ NUL (\\u0000) и одиночные суррогаты UTF-16 не допускаются')],
  minLength: ['too_short', ({ constraints }) => (constraints[0] === 1 ? 'не может быть пустой строкой' : `не короче ${characters(constraints[0] as number)}`)],
  maxLength: ['too_long', ({ constraints }) => `не длиннее ${characters(constraints[0] as number)}`],
  maxUtf8Bytes: ['too_long', ({ constraints }) => `не длиннее ${constraints[0]} байт в UTF-8`],
  matches: ['invalid_format', say('неверный формат')],
  isUuid: ['invalid_format', say('ожидается UUID')],
  httpUrl: ['invalid_url', say('ожидается адрес http:// или https:// без пробелов, управляющих символов и обратной косой черты')],
  noUrlCredentials: ['credentials_in_url', say('адрес без имени и пароля: покупатель увидел бы их как адрес сайта')],
  isoDateTime: [
    'invalid_datetime',
    ({ value }) =>
      isString(value) && calendarInstantProblem(value) === 'range'
        ? 'момент от 0000-01-01T00:00:00Z до 9999-12-31T23:59:59.999Z в UTC'
        : 'дата и время в ISO 8601, например 2026-01-31T21:00:00Z',
  ],
  isIn: ['invalid_enum', ({ constraints }) => `одно из значений: ${(constraints[0] as unknown[]).join(', ')}`],
  min: ['out_of_range', (_, rules) => bounds(rules)],
  max: ['out_of_range', (_, rules) => bounds(rules)],
  money: [(args) => moneyProblem(args.value, args)!.code, (args) => moneyProblem(args.value, args)!.message],
  percent: [(args) => percentProblem(args.value, args)!.code, (args) => percentProblem(args.value, args)!.message],
  storableJson: ['invalid_value', ({ value }) => unstorableJson(value)!],
  maxJsonBytes: ['too_large', ({ constraints }) => `не больше ${constraints[0]} байт в JSON`],
  cursor: ['invalid_cursor', say('передайте nextCursor из предыдущего ответа')],
  queryInteger: [(args) => queryInteger(args).code, (args) => queryInteger(args).message],
  whitelistValidation: ['unknown_field', say('неизвестное поле')],
};

// ---------------------------------------------------------------------------
// What the OpenAPI documents say of our constraints (class-validator-jsonschema converters)
// ---------------------------------------------------------------------------

/** A money string: digits, a point, exactly two decimals, at most 1 000 000 000.00 (leading zeros allowed); ANY_: of any size. */
const MONEY_STRING_PATTERN = '^0*(?:\\d{1,9}\\.\\d{2}|1000000000\\.00)$';
const ANY_MONEY_STRING_PATTERN = '^\\d+\\.\\d{2}$';
/** A percent string: up to four decimals, from 0 to 100. */
const PERCENT_STRING_PATTERN = '^0*(?:\\d{1,2}(?:\\.\\d{1,4})?|100(?:\\.0{1,4})?)$';
/** A string with a NUL or a lone surrogate (Ajv's unicode expressions see a lone surrogate as a code point of its own). */
const UNSTORABLE_TEXT: SchemaObject = { type: 'string', pattern: '[\\u0000\\uD800-\\uDFFF]' };
const percentNumber = (anySize: boolean): SchemaObject => ({
  type: 'number',
  minimum: 0,
  ...(anySize ? {} : { maximum: 100 }),
  multipleOf: 0.0001,
  description: 'Число процентов, не больше четырёх знаков после точки, как записано в теле (без экспоненты и лишних нулей)',
});

/** The schema fragment each of our constraints states (class-validator-jsonschema's `additionalConverters`). */
export const CONVERTERS: Readonly<Record<string, SchemaObject | ((meta: ValidationMetadata) => SchemaObject)>> = {
  required: {},
  // No `type`: the type rule of the field says it (a range would otherwise make an integer a number).
  min: (meta) => ({ minimum: meta.constraints[0] }),
  max: (meta) => ({ maximum: meta.constraints[0] }),
  storableText: { not: UNSTORABLE_TEXT },
  // WHATWG URL parsing is wider than any pattern (it takes `http:x`): the rule on the scheme and the characters.
  httpUrl: { pattern: '^[hH][tT][tT][pP][sS]?:[^\\s\\x00-\\x1f\\x7f-\\x9f\\\\]*$' },
  isoDateTime: { format: 'date-time' },
  cursor: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,512}$' },
  queryInteger: (meta) => ({ type: 'integer', minimum: meta.constraints[0], maximum: meta.constraints[1] }),
  storableJson: { propertyNames: { not: UNSTORABLE_TEXT }, additionalProperties: { $ref: '#/components/schemas/StorableJson' } },
  // JSON Schema cannot count the bytes of JSON text: the property count bounds it (each takes at least 6 bytes, `"":0,`).
  maxJsonBytes: (meta) => ({ maxProperties: Math.floor(meta.constraints[0] / 6) }),
  money: (meta) => ({
    oneOf: [
      {
        type: 'string',
        pattern: meta.constraints[0].anySize ? ANY_MONEY_STRING_PATTERN : MONEY_STRING_PATTERN,
        description: 'Строка: рубли, точка и ровно две цифры копеек',
      },
      {
        type: 'number',
        minimum: meta.constraints[0].positive !== undefined ? 0.01 : 0,
        ...(meta.constraints[0].anySize ? {} : { maximum: MAX_MONEY_KOPECKS / 100 }),
        multipleOf: 0.01,
        description: 'Число рублей, не больше двух знаков после точки, как записано в теле (без экспоненты и лишних нулей)',
      },
    ],
  }),
  percent: (meta) =>
    meta.constraints[0].numberOnly
      ? percentNumber(meta.constraints[0].anySize === true)
      : { oneOf: [{ type: 'string', pattern: PERCENT_STRING_PATTERN }, percentNumber(false)] },
};

/**
 * The schema of any JSON value customFields may hold: one recursive schema (the depth and
 * the byte size are the validator's, said in words). Its arrays say "no item that is not
 * StorableJson" rather than `items`: the same rule, and a union that holds an array of
 * itself does not compile as TypeScript (TS2502) in clients made by openapi-typescript.
 */
export const STORABLE_JSON_SCHEMA: SchemaObject = {
  description: 'Любое значение JSON: строки и имена полей без NUL и одиночных суррогатов, целые числа до 2^53 − 1 по модулю',
  anyOf: [
    { type: 'string', not: UNSTORABLE_TEXT },
    { type: ['boolean', 'null'] },
    { type: 'number', not: { type: 'integer' } },
    { type: 'integer', minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER },
    { type: 'array', not: { contains: { not: { $ref: '#/components/schemas/StorableJson' } } } },
    { type: 'object', propertyNames: { not: UNSTORABLE_TEXT }, additionalProperties: { $ref: '#/components/schemas/StorableJson' } },
  ],
};
