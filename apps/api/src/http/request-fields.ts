import { isBoolean, isIn, isInt, isString } from 'class-validator';
import { MAX_MONEY_KOPECKS, MoneyFormatError, parseMoney, parsePercent, PercentFormatError } from '#ledger';
import type { SchemaObject } from '../docs/openapi-document';
import { parseCursor } from './cursor';
import { field, FieldRule, literalOf, nested, Presence, RequestClass, UNACCOUNTED } from './request-validation';
import { MAX_JSON_DEPTH, storableText, unstorableJson } from './validation';

/**
 * The field decorators of request DTOs. Each states its rules once: for the validator
 * (class-validator constraints, checked in this order, the first broken one reported)
 * and for the OpenAPI document (the JSON Schema fragment beside them). Messages and
 * codes are the API's contract (tests compare them byte for byte).
 */

const EMAIL = /^[^\s@"<>()[\]\\,;:]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
const E164 = /^\+[1-9]\d{1,14}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO_DATETIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * An ISO 8601 instant that names a real calendar moment. `Date` alone would take
 * 2031-02-30 as 2 March and 24:00 as the next midnight: those are refused here.
 */
function isIsoDateTime(text: string): boolean {
  const match = ISO_DATETIME.exec(text);
  if (!match) return false;
  const [year, month, day, hour] = match.slice(1, 5).map(Number) as [number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && !Number.isNaN(new Date(text).getTime());
}

/**
 * Text PostgreSQL can store: no NUL, no lone UTF-16 surrogate. With Ajv's unicode
 * regular expressions a lone surrogate is a code point of its own, so this class says it.
 */
const STORABLE_PATTERN = '^[^\\u0000\\uD800-\\uDFFF]*$';

/** One pattern for both: storable text (a lookahead over the whole string) and `pattern` (anchored with ^). */
const storableAnd = (pattern: string): string => `^(?=[^\\u0000\\uD800-\\uDFFF]*$)${pattern.replace(/^\^/, '')}`;

interface Described {
  readonly description?: string;
  readonly deprecated?: boolean;
  readonly examples?: readonly unknown[];
}
const described = (d: Described): SchemaObject => ({
  ...(d.description !== undefined ? { description: d.description } : {}),
  ...(d.deprecated ? { deprecated: true } : {}),
  ...(d.examples !== undefined ? { examples: d.examples } : {}),
});

// Text ------------------------------------------------------------------------

export interface TextOptions extends Presence, Described {
  readonly min?: number;
  readonly max: number;
  readonly pattern?: RegExp;
  readonly patternMessage?: string;
  /** The document's pattern when it is not `pattern.source` (e.g. a case-insensitive UUID). */
  readonly schemaPattern?: string;
  readonly format?: SchemaObject['format'];
}

function textRules(o: TextOptions): FieldRule[] {
  const rules: FieldRule[] = [
    { code: 'invalid_type', message: 'ожидается строка', valid: (v) => isString(v) },
    { code: 'invalid_character', message: 'символ NUL (\\u0000) и одиночные суррогаты UTF-16 не допускаются', valid: (v) => storableText(v as string) },
  ];
  if ((o.min ?? 0) > 0) rules.push({ code: 'too_short', message: `не короче ${o.min} символов`, valid: (v) => (v as string).length >= o.min! });
  rules.push({ code: 'too_long', message: `не длиннее ${o.max} символов`, valid: (v) => (v as string).length <= o.max });
  if (o.pattern) {
    const pattern = o.pattern;
    rules.push({ code: 'invalid_format', message: o.patternMessage ?? 'неверный формат', valid: (v) => pattern.test(v as string) });
  }
  return rules;
}

function textSchema(o: TextOptions): SchemaObject {
  const pattern = o.schemaPattern ?? o.pattern?.source;
  return {
    type: 'string',
    ...(o.format ? { format: o.format } : {}),
    ...((o.min ?? 0) > 0 ? { minLength: o.min } : {}),
    maxLength: o.max,
    pattern: pattern ? storableAnd(pattern) : STORABLE_PATTERN,
    ...described(o),
  };
}

/** A string: type, storable text, length (UTF-16 code units), then the pattern. */
export const Text = (o: TextOptions): PropertyDecorator => field(textRules(o), o, textSchema(o));

export const Email = (o: Presence & Described = {}): PropertyDecorator =>
  Text({ ...o, max: 254, pattern: EMAIL, patternMessage: 'некорректный адрес электронной почты' });

export const Phone = (o: Presence & Described = {}): PropertyDecorator =>
  Text({ ...o, max: 16, pattern: E164, patternMessage: 'телефон в формате E.164, например +79991234567', examples: ['+79991234567'] });

export const Uuid = (o: Presence & Described = {}): PropertyDecorator =>
  Text({
    ...o,
    max: 36,
    pattern: UUID,
    patternMessage: 'ожидается UUID',
    schemaPattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
  });

/** An http:// or https:// address of up to 2048 characters. */
export const HttpUrl = (o: Presence & Described = {}): PropertyDecorator =>
  field(
    [
      ...textRules({ max: 2048 }),
      {
        code: 'invalid_url',
        message: 'ожидается адрес http:// или https://',
        valid: (v) => {
          try {
            const protocol = new URL(v as string).protocol;
            return protocol === 'http:' || protocol === 'https:';
          } catch {
            return false;
          }
        },
      },
    ],
    o,
    // WHATWG URL parsing is wider than any pattern (it trims, takes `http:x`); the
    // document states the rule the server applies on the text: a scheme http or https.
    { type: 'string', maxLength: 2048, pattern: storableAnd('^[\\t\\n\\r\\x01-\\x20]*[hH][tT][tT][pP][sS]?:'), ...described(o) },
  );

/** ISO 8601 date and time (query strings). */
export const DateTime = (o: Described & { readonly required?: boolean } = {}): PropertyDecorator =>
  field(
    [
      ...textRules({ max: 40 }),
      {
        code: 'invalid_datetime',
        message: 'дата и время в ISO 8601, например 2026-01-31T21:00:00Z',
        valid: (v) => isIsoDateTime(v as string),
      },
    ],
    o.required ? { required: true } : {},
    { type: 'string', format: 'date-time', ...described(o) },
  );

// Enumerations, integers, booleans -------------------------------------------------

/** One of `allowed`; `message` says it in words of its own (otherwise the values are listed). */
export const OneOf = (allowed: readonly string[], o: Presence & Described & { readonly message?: string } = {}): PropertyDecorator =>
  field(
    [{ code: 'invalid_enum', message: o.message ?? `одно из значений: ${allowed.join(', ')}`, valid: (v) => isString(v) && isIn(v, allowed as string[]) }],
    o,
    {
      type: 'string',
      enum: allowed,
      ...described(o),
    },
  );

export interface IntegerOptions extends Presence, Described {
  readonly min: number;
  readonly max: number;
  readonly default?: number;
}

export const Integer = (o: IntegerOptions): PropertyDecorator =>
  field(
    [
      { code: 'invalid_type', message: 'ожидается целое число', valid: (v) => typeof v === 'number' && isInt(v) },
      { code: 'out_of_range', message: `от ${o.min} до ${o.max}`, valid: (v) => (v as number) >= o.min && (v as number) <= o.max },
    ],
    o,
    { type: 'integer', minimum: o.min, maximum: o.max, ...(o.default !== undefined ? { default: o.default } : {}), ...described(o) },
  );

export const Bool = (o: Presence & Described = {}): PropertyDecorator =>
  field([{ code: 'invalid_type', message: 'ожидается true или false', valid: (v) => isBoolean(v) }], o, { type: 'boolean', ...described(o) });

/** An array of values from `allowed` (duplicates allowed, read as one). */
export const ArrayOf = (allowed: readonly string[], o: Described = {}): PropertyDecorator =>
  field(
    [
      {
        code: 'invalid_enum',
        message: `массив из значений: ${allowed.join(', ')}`,
        valid: (v) => Array.isArray(v) && v.every((e) => (allowed as readonly unknown[]).includes(e)),
      },
    ],
    {},
    { type: 'array', items: { type: 'string', enum: allowed }, ...described(o) },
  );

/** A field that may not be sent at all (`read_only`, e.g. the project's account on PATCH). */
export const Absent = (code: string, message: string): PropertyDecorator =>
  field([{ code, message, valid: () => false }], {}, { not: {}, description: message } as SchemaObject);

// Money and percent: checked as written in the raw body --------------------------------

const MAX_RUBLES = MAX_MONEY_KOPECKS / 100;
/** A money string: digits, a point, exactly two decimals, at most 1 000 000 000.00 (leading zeros allowed). */
export const MONEY_STRING_PATTERN = '^0*(?:\\d{1,9}\\.\\d{2}|1000000000\\.00)$';
/** A percent string: up to four decimals, from 0 to 100. */
export const PERCENT_STRING_PATTERN = '^0*(?:\\d{1,2}(?:\\.\\d{1,4})?|100(?:\\.0{1,4})?)$';

const LITERAL_MESSAGE = 'число не удалось сверить с его записью в теле запроса';

/**
 * A decimal read by `parse` from the value and its literal in the raw body: one rule per
 * failure reason, in a fixed order, so the reported code is `invalid_<kind>_<reason>`.
 */
function decimalRules(
  kind: 'money' | 'percent',
  parse: (value: unknown, literal?: string) => number,
  isFormatError: (e: unknown) => e is MoneyFormatError | PercentFormatError,
): FieldRule[] {
  // Every reason's rule asks for the same outcome: it is worked out once per field and object.
  const outcomes = new WeakMap<object, Map<string, { value: unknown; reason: string | null; message: string }>>();
  const outcome = (value: unknown, args: { object: object; property: string }): { reason: string | null; message: string } => {
    const known = outcomes.get(args.object)?.get(args.property);
    if (known !== undefined && Object.is(known.value, value)) return known;
    const found = { value, ...judge(value, args) };
    const byProperty = outcomes.get(args.object) ?? new Map();
    byProperty.set(args.property, found);
    outcomes.set(args.object, byProperty);
    return found;
  };
  const judge = (value: unknown, args: { object: object; property: string }): { reason: string | null; message: string } => {
    const literal = literalOf(args.object, args.property, value);
    if (literal === UNACCOUNTED) return { reason: 'literal', message: LITERAL_MESSAGE };
    try {
      parse(value, literal);
      return { reason: null, message: '' };
    } catch (error) {
      if (isFormatError(error)) return { reason: error.reason, message: error.message };
      throw error;
    }
  };
  // 'literal' first: the literal is looked up before the value is parsed.
  return ['literal', 'type', 'format', 'too_many_decimals', 'exponent', 'negative', 'not_finite', 'too_large'].map((reason) => ({
    code: `invalid_${kind}_${reason}`,
    valid: (value, args) => outcome(value, args).reason !== reason,
    message: (value, args) => outcome(value, args).message,
  }));
}

/** The parsed value of a valid money field, in kopecks. */
export const kopecksOf = (value: unknown): number => parseMoney(value);

export interface MoneyOptions extends Presence, Described {
  /** Zero is refused with this message (`out_of_range`). */
  readonly positiveMessage?: string;
}

export const Money = (o: MoneyOptions = {}): PropertyDecorator =>
  field(
    [
      ...decimalRules('money', parseMoney, (e): e is MoneyFormatError => e instanceof MoneyFormatError),
      ...(o.positiveMessage ? [{ code: 'out_of_range', message: o.positiveMessage, valid: (v: unknown) => parseMoney(v) !== 0 }] : []),
    ],
    o,
    {
      ...described(o),
      oneOf: [
        { type: 'string', pattern: MONEY_STRING_PATTERN, description: 'Строка: рубли, точка и ровно две цифры копеек' },
        {
          type: 'number',
          minimum: o.positiveMessage ? 0.01 : 0,
          maximum: MAX_RUBLES,
          multipleOf: 0.01,
          description: 'Число рублей, не больше двух знаков после точки, как записано в теле (без экспоненты и лишних нулей)',
        },
      ],
    },
  );

export interface PercentOptions extends Presence, Described {
  /** Only a JSON number (customerFeePct), no string. */
  readonly numberOnly?: boolean;
}

export const Percent = (o: PercentOptions = {}): PropertyDecorator => {
  const number: SchemaObject = {
    type: 'number',
    minimum: 0,
    maximum: 100,
    multipleOf: 0.0001,
    description: 'Число процентов, не больше четырёх знаков после точки, как записано в теле (без экспоненты и лишних нулей)',
  };
  return field(
    [
      ...(o.numberOnly ? [{ code: 'invalid_type', message: 'ожидается число', valid: (v: unknown) => typeof v === 'number' }] : []),
      ...decimalRules('percent', parsePercent, (e): e is PercentFormatError => e instanceof PercentFormatError),
    ],
    o,
    o.numberOnly ? { ...number, ...described(o) } : { ...described(o), oneOf: [{ type: 'string', pattern: PERCENT_STRING_PATTERN }, number] },
  );
};

// Arbitrary JSON ----------------------------------------------------------------

/** An object of any JSON the database can store, up to `maxBytes` as JSON text (customFields). */
export const JsonObject = (o: { readonly maxBytes: number } & Presence & Described): PropertyDecorator =>
  field(
    [
      { code: 'invalid_type', message: 'ожидается объект', valid: (v) => typeof v === 'object' && v !== null && !Array.isArray(v) },
      { code: 'invalid_value', message: (v) => unstorableJson(v) ?? '', valid: (v) => unstorableJson(v) === null },
      { code: 'too_large', message: `не больше ${o.maxBytes} байт в JSON`, valid: (v) => Buffer.byteLength(JSON.stringify(v)) <= o.maxBytes },
    ],
    o,
    {
      ...storableJsonAt(0),
      type: 'object',
      // JSON Schema cannot count the bytes of JSON text: the property count bounds it
      // (each property takes at least 6 bytes, `"":0,`); the server counts the bytes.
      maxProperties: Math.floor(o.maxBytes / 6),
      ...described({ ...o, description: `${o.description ?? ''} (не больше ${o.maxBytes} байт в JSON, вложенность до ${MAX_JSON_DEPTH} уровней)`.trim() }),
    },
  );

/** The components name of the schema of a storable JSON value at `depth` below customFields. */
const storableJsonName = (depth: number) => `StorableJson${depth}`;

/** customFields itself (depth 0): an object whose keys are storable and values are StorableJson1. */
function storableJsonAt(depth: 0): SchemaObject {
  return {
    propertyNames: { type: 'string', pattern: STORABLE_PATTERN },
    additionalProperties: { $ref: `#/components/schemas/${storableJsonName(depth + 1)}` },
  };
}

/**
 * The schemas of any JSON value at depth 1..MAX_JSON_DEPTH below customFields that the
 * database can store (no NUL or lone surrogate in a string or key) and that nests no
 * deeper: the rule of `unstorableJson`, unrolled one named level at a time (JSON Schema
 * has no depth counter; each level is a component, so a validator compiles it once).
 */
export function storableJsonSchemas(): Record<string, SchemaObject> {
  const text: SchemaObject = { type: 'string', pattern: STORABLE_PATTERN };
  const leaf: SchemaObject = { type: ['number', 'boolean', 'null'] };
  const schemas: Record<string, SchemaObject> = {};
  for (let depth = 1; depth <= MAX_JSON_DEPTH; depth++) {
    const inner: SchemaObject = { $ref: `#/components/schemas/${storableJsonName(depth + 1)}` };
    schemas[storableJsonName(depth)] =
      depth === MAX_JSON_DEPTH
        ? {
            description: `Значение customFields на глубине ${depth}: без вложений`,
            anyOf: [text, leaf, { type: 'array', maxItems: 0 }, { type: 'object', maxProperties: 0 }],
          }
        : {
            description: `Значение customFields на глубине ${depth}`,
            anyOf: [text, leaf, { type: 'array', items: inner }, { type: 'object', propertyNames: text, additionalProperties: inner }],
          };
  }
  return schemas;
}

export const Nested = (cls: () => RequestClass, o: Presence & Described & { readonly schemaName: string }): PropertyDecorator =>
  nested(cls, o, { $ref: `#/components/schemas/${o.schemaName}`, ...described(o) });

// Query strings -----------------------------------------------------------------

export interface QueryIntegerOptions extends Described {
  readonly min: number;
  readonly max: number;
  readonly default: number;
  /**
   * Text that is not digits gets its own violation (`invalid`, this message) before the
   * range is checked (`out_of_range`, `rangeMessage`); without it one rule says both.
   */
  readonly notDigitsMessage?: string;
  readonly rangeMessage?: string;
}

/** An integer in a query string: digits only (at least 9 allowed, leading zeros too), in range; absent is the default. */
export const QueryInteger = (o: QueryIntegerOptions): PropertyDecorator => {
  const digits = new RegExp(`^\\d{1,${Math.max(9, String(o.max).length)}}$`);
  const rangeMessage = o.rangeMessage ?? `целое число от ${o.min} до ${o.max}`;
  const inRange = (v: unknown) => Number(v) >= o.min && Number(v) <= o.max;
  return field(
    o.notDigitsMessage === undefined
      ? [{ code: 'out_of_range', message: rangeMessage, valid: (v) => typeof v === 'string' && digits.test(v) && inRange(v) }]
      : [
          { code: 'invalid', message: o.notDigitsMessage, valid: (v) => typeof v === 'string' && digits.test(v) },
          { code: 'out_of_range', message: rangeMessage, valid: inRange },
        ],
    {},
    { type: 'integer', minimum: o.min, maximum: o.max, default: o.default, ...described(o) },
  );
};

/** A page cursor: nextCursor of the previous page (checked by `read`). */
export const Cursor = (read: (value: Record<string, unknown>) => unknown | null, o: Described = {}): PropertyDecorator =>
  field(
    [{ code: 'invalid_cursor', message: 'передайте nextCursor из предыдущего ответа', valid: (v) => typeof v === 'string' && parseCursor(v, read) !== null }],
    {},
    { type: 'string', pattern: '^[A-Za-z0-9_-]{1,512}$', ...described(o) },
  );
