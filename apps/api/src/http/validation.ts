import {
  Kopecks,
  MoneyFormatError,
  parseMoney,
  parsePercent,
  PercentFormatError,
  PercentRate,
} from '../../../../libs/ledger/src/money';
import { ApiError, ErrorDetail } from '../errors/api-error';
import { literalKey, NumberLiteralScanError, numberLiterals } from './number-literals';

/** A number the literal scan cannot account for. */
const UNACCOUNTED = Symbol('unaccounted number literal');

type Obj = Record<string, unknown>;

export const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const EMAIL = /^[^\s@"<>()[\]\\,;:]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
const E164 = /^\+[1-9]\d{1,14}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO_DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;

export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID.test(v);

/**
 * Reads a request field by field, collecting every violation with the field's path
 * (`customer.email`); `done()` throws one 400 `validation` listing them all.
 */
export class Fields {
  private readonly problems: ErrorDetail[] = [];
  /** The fields this reader looked at: any other field of the source is unknown. */
  private readonly read = new Set<string>();

  constructor(
    private readonly source: Obj,
    private readonly prefix = '',
    /** The number literals of the raw body by path, or null when there is no raw text to read them from. */
    private readonly literals: () => Map<string, string> | null = () => null,
    /** The keys from the body's root to this object (the literals' paths). */
    private readonly segments: readonly string[] = [],
  ) {}

  /**
   * A JSON body. With its raw text, numbers are checked as written (`1e3` and
   * `10.100` are not money even though they parse to 1000 and 10.1); a number whose
   * literal cannot be found is refused, never judged by its float alone.
   */
  static ofBody(body: unknown, rawBody?: Buffer | string): Fields {
    if (!isObject(body)) {
      throw ApiError.validation([{ param: 'body', code: 'invalid_type', message: 'Тело запроса должно быть JSON-объектом' }]);
    }
    if (rawBody === undefined) return new Fields(body);
    let scanned: Map<string, string> | NumberLiteralScanError | null = null;
    return new Fields(body, '', () => {
      if (scanned === null) {
        try {
          scanned = numberLiterals(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
        } catch (error) {
          if (!(error instanceof NumberLiteralScanError)) throw error;
          scanned = error;
        }
      }
      if (scanned instanceof NumberLiteralScanError) {
        throw ApiError.validation([{ param: 'body', code: 'unreadable_numbers', message: 'body: числа в теле запроса не удалось прочитать так, как они записаны' }]);
      }
      return scanned;
    });
  }

  path(name: string): string {
    return this.prefix ? `${this.prefix}.${name}` : name;
  }

  has(name: string): boolean {
    this.read.add(name);
    return this.source[name] !== undefined;
  }

  fail(name: string, code: string, message: string): undefined {
    this.problems.push({ param: this.path(name), code, message: `${this.path(name)}: ${message}` });
    return undefined;
  }

  private value(name: string, required: boolean, nullable: boolean): { present: boolean; value: unknown } {
    this.read.add(name);
    const value = this.source[name];
    if (value === undefined || (value === null && nullable)) {
      if (required) this.fail(name, 'required', 'обязательное поле');
      return { present: false, value: undefined };
    }
    return { present: true, value };
  }

  string(name: string, o: { required?: boolean; nullable?: boolean; min?: number; max: number; pattern?: RegExp; patternMessage?: string }): string | undefined {
    const { present, value } = this.value(name, o.required ?? false, o.nullable ?? false);
    if (!present) return undefined;
    if (typeof value !== 'string') return this.fail(name, 'invalid_type', 'ожидается строка');
    if (!storableText(value)) return this.fail(name, 'invalid_character', 'символ NUL (\\u0000) и одиночные суррогаты UTF-16 не допускаются');
    if (value.length < (o.min ?? 0)) return this.fail(name, 'too_short', `не короче ${o.min} символов`);
    if (value.length > o.max) return this.fail(name, 'too_long', `не длиннее ${o.max} символов`);
    if (o.pattern && !o.pattern.test(value)) return this.fail(name, 'invalid_format', o.patternMessage ?? 'неверный формат');
    return value;
  }

  enumOf<T extends string>(name: string, allowed: readonly T[], o: { required?: boolean; nullable?: boolean } = {}): T | undefined {
    const { present, value } = this.value(name, o.required ?? false, o.nullable ?? false);
    if (!present) return undefined;
    if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
      return this.fail(name, 'invalid_enum', `одно из значений: ${allowed.join(', ')}`);
    }
    return value as T;
  }

  integer(name: string, o: { required?: boolean; nullable?: boolean; min: number; max: number }): number | undefined {
    const { present, value } = this.value(name, o.required ?? false, o.nullable ?? false);
    if (!present) return undefined;
    if (typeof value !== 'number' || !Number.isInteger(value)) return this.fail(name, 'invalid_type', 'ожидается целое число');
    if (value < o.min || value > o.max) return this.fail(name, 'out_of_range', `от ${o.min} до ${o.max}`);
    return value;
  }

  boolean(name: string, o: { required?: boolean } = {}): boolean | undefined {
    const { present, value } = this.value(name, o.required ?? false, false);
    if (!present) return undefined;
    if (typeof value !== 'boolean') return this.fail(name, 'invalid_type', 'ожидается true или false');
    return value;
  }

  money(name: string, o: { required?: boolean; nullable?: boolean } = {}): Kopecks | undefined {
    const { present, value } = this.value(name, o.required ?? false, o.nullable ?? false);
    if (!present) return undefined;
    const literal = this.literalOf(name, value);
    if (literal === UNACCOUNTED) return this.fail(name, 'invalid_money_literal', 'число не удалось сверить с его записью в теле запроса');
    try {
      return parseMoney(value, literal);
    } catch (error) {
      if (error instanceof MoneyFormatError) return this.fail(name, `invalid_money_${error.reason}`, error.message);
      throw error;
    }
  }

  percent(name: string, o: { required?: boolean; nullable?: boolean; numberOnly?: boolean } = {}): PercentRate | undefined {
    const { present, value } = this.value(name, o.required ?? false, o.nullable ?? false);
    if (!present) return undefined;
    if (o.numberOnly && typeof value !== 'number') return this.fail(name, 'invalid_type', 'ожидается число');
    const literal = this.literalOf(name, value);
    if (literal === UNACCOUNTED) return this.fail(name, 'invalid_percent_literal', 'число не удалось сверить с его записью в теле запроса');
    try {
      return parsePercent(value, literal);
    } catch (error) {
      if (error instanceof PercentFormatError) return this.fail(name, `invalid_percent_${error.reason}`, error.message);
      throw error;
    }
  }

  url(name: string, o: { nullable?: boolean } = {}): string | undefined {
    const raw = this.string(name, { nullable: o.nullable, max: 2048 });
    if (raw === undefined) return undefined;
    let parsed: URL | null = null;
    try {
      parsed = new URL(raw);
    } catch {
      parsed = null;
    }
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
      return this.fail(name, 'invalid_url', 'ожидается адрес http:// или https://');
    }
    return raw;
  }

  email(name: string, o: { nullable?: boolean } = {}): string | undefined {
    return this.string(name, { nullable: o.nullable, max: 254, pattern: EMAIL, patternMessage: 'некорректный адрес электронной почты' });
  }

  phone(name: string, o: { nullable?: boolean } = {}): string | undefined {
    return this.string(name, { nullable: o.nullable, max: 16, pattern: E164, patternMessage: 'телефон в формате E.164, например +79991234567' });
  }

  uuid(name: string, o: { required?: boolean } = {}): string | undefined {
    return this.string(name, { required: o.required, max: 36, pattern: UUID, patternMessage: 'ожидается UUID' });
  }

  datetime(name: string): Date | undefined {
    const raw = this.string(name, { max: 40 });
    if (raw === undefined) return undefined;
    const date = ISO_DATETIME.test(raw) ? new Date(raw) : null;
    if (!date || Number.isNaN(date.getTime())) return this.fail(name, 'invalid_datetime', 'дата и время в ISO 8601, например 2026-01-31T21:00:00Z');
    return date;
  }

  /** A nested object read with its own Fields, whose problems join these. */
  object<T>(name: string, read: (fields: Fields) => T, o: { nullable?: boolean } = {}): T | undefined {
    const { present, value } = this.value(name, false, o.nullable ?? false);
    if (!present) return undefined;
    if (!isObject(value)) return this.fail(name, 'invalid_type', 'ожидается объект');
    const nested = new Fields(value, this.path(name), this.literals, [...this.segments, name]);
    const result = read(nested);
    nested.flagUnknownFields();
    this.problems.push(...nested.problems);
    return result;
  }

  /**
   * The literal text of a number field as written in the raw body: undefined when the
   * value is not a number or there is no raw body; UNACCOUNTED when the scan has no
   * literal at this path that reads as the parsed value (the check is then refused,
   * never made on the float alone).
   */
  private literalOf(name: string, value: unknown): string | undefined | typeof UNACCOUNTED {
    if (typeof value !== 'number') return undefined;
    const literals = this.literals();
    if (literals === null) return undefined;
    const literal = literals.get(literalKey([...this.segments, name]));
    return literal !== undefined && Number(literal) === value ? literal : UNACCOUNTED;
  }

  raw(name: string): unknown {
    this.read.add(name);
    return this.source[name];
  }

  private flagUnknownFields(): void {
    for (const key of Object.keys(this.source)) {
      if (!this.read.has(key)) this.fail(key, 'unknown_field', 'неизвестное поле');
    }
  }

  /** Throws the collected violations, if any, unknown fields included. */
  done(): void {
    this.flagUnknownFields();
    if (this.problems.length > 0) throw ApiError.validation(this.problems);
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text PostgreSQL can store as json: no NUL character, no lone UTF-16 surrogate. */
export const storableText = (text: string): boolean => !text.includes('\u0000') && !LONE_SURROGATE.test(text);

export const MAX_JSON_DEPTH = 32;

/**
 * Why an arbitrary JSON value (customFields) cannot be stored, or null: nesting deeper
 * than MAX_JSON_DEPTH, or a key or string with text PostgreSQL refuses. Checked by a
 * bounded walk before anything serialises it.
 */
export function unstorableJson(value: unknown, depth = 0): string | null {
  if (depth > MAX_JSON_DEPTH) return `вложенность глубже ${MAX_JSON_DEPTH} уровней`;
  if (typeof value === 'string') return storableText(value) ? null : 'символ NUL (\\u0000) или одиночный суррогат UTF-16';
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

/** Query strings: every value is a string (or repeated: an array, which is refused). */
export function queryFields(query: unknown): Fields {
  return new Fields(isObject(query) ? query : {});
}

export function queryInteger(f: Fields, name: string, o: { min: number; max: number; fallback: number }): number {
  const raw = f.raw(name);
  if (raw === undefined) return o.fallback;
  if (typeof raw !== 'string' || !/^\d{1,9}$/.test(raw) || Number(raw) < o.min || Number(raw) > o.max) {
    f.fail(name, 'out_of_range', `целое число от ${o.min} до ${o.max}`);
    return o.fallback;
  }
  return Number(raw);
}
