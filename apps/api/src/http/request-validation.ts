import 'reflect-metadata';
import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import {
  getMetadataStorage,
  registerDecorator,
  ValidateIf,
  ValidateNested,
  validateSync,
  ValidationArguments,
  ValidationError,
  ValidationTypes,
} from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import type { SchemaObject } from '../docs/openapi-document';
import { ApiError, ErrorDetail } from './errors/api-error';
import { literalKey, NumberLiteralScanError, numberLiterals } from './number-literals';

/**
 * Requests as DTO classes validated by class-validator, and the one exception factory
 * that turns its ValidationErrors into the spec's 400 `validation`:
 * - `param` is the full path (`customer.email`, `methods.sbp.feePct`);
 * - `details` lists every violation, at most one per field (the first rule the value
 *   breaks, `stopAtFirstError`), in the DTO's declared field order; class-level rules
 *   (`@RequestRule`) follow the fields of their level; unknown fields come last, in the
 *   order they were sent (`whitelist` + `forbidNonWhitelisted`);
 * - every message is `<path>: <Russian text>`, the code is the rule's name.
 *
 * Each field decorator registers its rules with class-validator in the order they are
 * checked (type, storable text, length, format…) and gives class-validator-jsonschema
 * the schema fragment that states the same rules, so the OpenAPI document is generated
 * from the same declaration (`request-schemas.ts`).
 *
 * Instances are built here, not by class-transformer (docs/decisions/0085): a JSON
 * body's own keys are copied as own data properties, nested DTOs are instantiated,
 * nothing else is converted, so the rules see the JSON types as sent.
 */

export type RequestClass<T = object> = new () => T;

/** One rule of a field: its code (the class-validator constraint name) and Russian message. */
export interface FieldRule {
  readonly code: string;
  readonly message: string | ((value: unknown, args: ValidationArguments) => string);
  readonly valid: (value: unknown, args: ValidationArguments) => boolean;
}

export interface Presence {
  /** Absent (undefined) is a violation: `required`, `обязательное поле`. */
  readonly required?: boolean;
  /** `null` stands for absent; otherwise null must pass the field's rules (and fails the type rule). */
  readonly nullable?: boolean;
}

const REQUIRED_MESSAGE = 'обязательное поле';

/** The nested DTO classes of a class, by property (for instantiation and paths). */
const NESTED = new WeakMap<object, Map<string, () => RequestClass>>();
/** What `map` holds for the class or the nearest class it extends. */
function inherited<V>(map: WeakMap<object, V>, cls: object): V | undefined {
  for (let c: object | null = cls; c !== null && c !== Function.prototype; c = Object.getPrototypeOf(c)) {
    const value = map.get(c);
    if (value !== undefined) return value;
  }
  return undefined;
}
/** Class-level rules, checked after the class's fields. */
const RULES = new WeakMap<object, RequestRuleFn<never>[]>();

/**
 * Registers a field: its presence rule, then `rules` in order, and its JSON schema
 * (`null` added to the type when nullable; the object's `required` list comes from
 * presence, see request-schemas.ts).
 */
export function field(rules: readonly FieldRule[], presence: Presence, schema: SchemaObject): PropertyDecorator {
  return (target: object, key: string | symbol) => {
    const property = String(key);
    const required = presence.required ?? false;
    const nullable = presence.nullable ?? false;
    if (!required) ValidateIf((object: Record<string, unknown>) => (nullable ? object[property] != null : object[property] !== undefined))(target, property);
    const all: FieldRule[] = required
      ? [{ code: 'required', message: REQUIRED_MESSAGE, valid: (v) => v !== undefined && !(nullable && v === null) }, ...rules]
      : [...rules];
    for (const rule of all) {
      registerDecorator({
        name: rule.code,
        target: target.constructor,
        propertyName: property,
        options: { message: (args: ValidationArguments) => (typeof rule.message === 'string' ? rule.message : rule.message(args.value, args)) },
        validator: { validate: (value: unknown, args?: ValidationArguments) => rule.valid(value, args!) },
      });
    }
    const documented = nullable ? withNull(schema) : schema;
    JSONSchema(() => documented as never)(target, property);
  };
}

/** The schema with `null` allowed too. */
export function withNull(schema: SchemaObject): SchemaObject {
  if (schema.$ref !== undefined || schema.oneOf !== undefined || schema.anyOf !== undefined) {
    const { description, deprecated, examples, ...rest } = schema;
    return {
      ...(description !== undefined ? { description } : {}),
      ...(deprecated !== undefined ? { deprecated } : {}),
      ...(examples !== undefined ? { examples } : {}),
      anyOf: [rest, { type: 'null' }],
    };
  }
  if (schema.enum !== undefined) return { ...schema, type: ['string', 'null'], enum: [...schema.enum, null] };
  const type = schema.type === undefined ? undefined : Array.isArray(schema.type) ? schema.type : [schema.type as string];
  return type === undefined ? schema : { ...schema, type: [...type, 'null'] as SchemaObject['type'] };
}

/** A nested DTO: an object validated by its own class, whose violations carry this field's path. */
export function nested(nestedClass: () => RequestClass, presence: Presence, schema: SchemaObject): PropertyDecorator {
  return (target: object, key: string | symbol) => {
    const property = String(key);
    const map = new Map<string, () => RequestClass>(inherited(NESTED, target.constructor) ?? []);
    map.set(property, nestedClass);
    NESTED.set(target.constructor, map);
    field([{ code: 'invalid_type', message: 'ожидается объект', valid: isPlainObject }], presence, schema)(target, property);
    ValidateNested()(target, property);
  };
}

/** A violation a class-level rule reports, `param` relative to the class. */
export interface RuleViolation {
  readonly param: string;
  readonly code: string;
  readonly message: string;
}

/** `failed`: the fields of this object that already have a violation. */
export type RequestRuleFn<T> = (request: T, failed: ReadonlySet<string>) => readonly RuleViolation[];

/**
 * A rule over several fields of the class (`addressId` or `method` + `account`),
 * checked after the field rules; its violations follow the field violations.
 */
export function RequestRule<T>(rule: RequestRuleFn<T>, schema?: SchemaObject): ClassDecorator {
  return (target) => {
    RULES.set(target, [...(RULES.get(target) ?? []), rule as RequestRuleFn<never>]);
    if (schema) JSONSchema(schema as never)(target);
  };
}

/** The class's own schema keywords (description, anyOf…); `additionalProperties: false` is added to every request schema. */
export const RequestSchema =
  (schema: SchemaObject): ClassDecorator =>
  (target) =>
    JSONSchema(schema as never)(target);

export const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

// ---------------------------------------------------------------------------
// Raw-body number literals, for the money and percent rules
// ---------------------------------------------------------------------------

interface LiteralContext {
  /** The keys from the body's root to this object. */
  readonly segments: readonly string[];
  /** The literals of the raw body by path; null without a raw body. */
  readonly literals: () => Map<string, string> | null;
}
const LITERALS = new WeakMap<object, LiteralContext>();

/** A number the literal scan cannot account for. */
export const UNACCOUNTED = Symbol('unaccounted number literal');

/**
 * The literal text of a number field as written in the raw body: undefined when the
 * value is not a number or there is no raw body; UNACCOUNTED when the scan has no
 * literal at this path that reads as the parsed value.
 */
export function literalOf(object: object, property: string, value: unknown): string | undefined | typeof UNACCOUNTED {
  if (typeof value !== 'number') return undefined;
  const context = LITERALS.get(object);
  const literals = context?.literals() ?? null;
  if (literals === null) return undefined;
  const literal = literals.get(literalKey([...context!.segments, property]));
  return literal !== undefined && Number(literal) === value ? literal : UNACCOUNTED;
}

// ---------------------------------------------------------------------------
// Reading a request
// ---------------------------------------------------------------------------

/**
 * Values nested deeper than this are kept as empty containers of the same kind when
 * the instance is built: no rule looks that deep (customFields refuses nesting beyond
 * 32 levels before it would), and nothing recurses over the rest of a 12 000-level body.
 */
const MAX_COPY_DEPTH = 40;

function copyJson(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_COPY_DEPTH) return Array.isArray(value) ? [] : {};
  if (Array.isArray(value)) return value.map((v) => copyJson(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    Object.defineProperty(out, k, { value: copyJson(v, depth + 1), enumerable: true, writable: true, configurable: true });
  return out;
}

function instantiate<T extends object>(
  cls: RequestClass<T>,
  plain: Record<string, unknown>,
  segments: readonly string[],
  literals: LiteralContext['literals'],
  depth: number,
): T {
  const instance = Object.create(cls.prototype) as T;
  const nestedClasses = inherited(NESTED, cls);
  for (const [key, value] of Object.entries(plain)) {
    const nestedClass = nestedClasses?.get(key);
    if (key === 'constructor') {
      // class-validator finds a class's rules through `object.constructor`: a body key of
      // that name stays an (unknown, refused) own field that still leads to the class.
      Object.defineProperty(instance, key, { get: () => cls, enumerable: true, configurable: true });
      continue;
    }
    const copied =
      nestedClass && isPlainObject(value) ? instantiate(nestedClass(), value, [...segments, key], literals, depth + 1) : copyJson(value, depth + 1);
    Object.defineProperty(instance, key, { value: copied, enumerable: true, writable: true, configurable: true });
  }
  LITERALS.set(instance, { segments, literals });
  return instance;
}

const VALIDATOR_OPTIONS = {
  whitelist: true,
  forbidNonWhitelisted: true,
  forbidUnknownValues: true,
  stopAtFirstError: true,
  validationError: { target: true, value: true },
} as const;

export interface ReadOptions {
  /** No body at all reads as `{}` (optional bodies: a full refund, a transition without fields). */
  readonly absentIsEmpty?: boolean;
  /** The source is a query string: any value stands for an empty query, no body-shape check. */
  readonly query?: boolean;
}

/**
 * The request `input` as a valid `cls`, or a 400 `validation` listing every violation.
 * With the raw body, numbers are checked as written (`1e3`, `10.100` are not money).
 */
export function readRequest<T extends object>(cls: RequestClass<T>, input: unknown, rawBody?: Buffer | string, options: ReadOptions = {}): T {
  let source = input;
  if (source === undefined && options.absentIsEmpty) source = {};
  if (options.query) source = isPlainObject(source) ? source : {};
  if (!isPlainObject(source)) {
    throw ApiError.validation([{ param: 'body', code: 'invalid_type', message: 'Тело запроса должно быть JSON-объектом' }]);
  }
  let scanned: Map<string, string> | NumberLiteralScanError | null = null;
  const literals = (): Map<string, string> | null => {
    if (rawBody === undefined) return null;
    if (scanned === null) {
      try {
        scanned = numberLiterals(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
      } catch (error) {
        if (!(error instanceof NumberLiteralScanError)) throw error;
        scanned = error;
      }
    }
    if (scanned instanceof NumberLiteralScanError) {
      throw ApiError.validation([
        { param: 'body', code: 'unreadable_numbers', message: 'body: числа в теле запроса не удалось прочитать так, как они записаны' },
      ]);
    }
    return scanned;
  };
  const instance = instantiate(cls, source, [], literals, 0);
  const errors = validateSync(instance, VALIDATOR_OPTIONS);
  const details = violations(cls, instance, errors, '', true);
  if (details.length > 0) throw ApiError.validation(details);
  return instance;
}

/** The declared fields of a class, in declaration order (class-validator's metadata). */
export function declaredFields(cls: RequestClass): readonly string[] {
  let names = DECLARED.get(cls);
  if (names === undefined) {
    const found: string[] = [];
    for (const m of getMetadataStorage().getTargetValidationMetadatas(cls, '', true, false)) {
      if (!found.includes(m.propertyName)) found.push(m.propertyName);
    }
    names = found;
    DECLARED.set(cls, names);
  }
  return names;
}
/** Classes are declared once, at load: their field lists are kept. */
const DECLARED = new WeakMap<object, readonly string[]>();

/**
 * Maps class-validator's errors of one object to the spec's details, in the contract's
 * order: declared fields, then the class's rules, then unknown fields. Unknown fields are
 * the object's own keys that are not declared: class-validator's whitelist looks keys up
 * in a plain object, so `constructor`, `hasOwnProperty` or `__proto__` slip through it
 * (docs/decisions/0085); its whitelist errors are not needed here.
 */
function violations(cls: RequestClass, instance: object, errors: readonly ValidationError[], prefix: string, root: boolean): ErrorDetail[] {
  const order = declaredFields(cls);
  const path = (name: string) => (prefix ? `${prefix}.${name}` : name);
  const detail = (param: string, code: string, message: string): ErrorDetail => ({ param: path(param), code, message: `${path(param)}: ${message}` });
  const nestedClasses = inherited(NESTED, cls);
  const out: ErrorDetail[] = [];
  const failed = new Set<string>();
  for (const property of order) {
    const error = errors.find((e) => e.property === property && !isUnknownField(e));
    const [code, message] = Object.entries(error?.constraints ?? {})[0] ?? [];
    if (code !== undefined) {
      failed.add(property);
      out.push(detail(property, code, message!));
      continue;
    }
    const value = (instance as Record<string, unknown>)[property];
    const nestedClass = nestedClasses?.get(property)?.();
    if (nestedClass && value instanceof nestedClass) {
      const nestedDetails = violations(nestedClass, value, error?.children ?? [], path(property), false);
      if (nestedDetails.length > 0) failed.add(property);
      out.push(...nestedDetails);
    }
  }
  for (const rule of root ? (inherited(RULES, cls) ?? []) : []) {
    for (const v of rule(instance as never, failed)) out.push(detail(v.param, v.code, v.message));
  }
  for (const key of Object.keys(instance)) {
    if (!order.includes(key)) out.push(detail(key, 'unknown_field', 'неизвестное поле'));
  }
  return out;
}

const isUnknownField = (e: ValidationError): boolean => e.constraints?.[ValidationTypes.WHITELIST] !== undefined;

// ---------------------------------------------------------------------------
// Parameter decorators: validation after the guards (authentication first)
// ---------------------------------------------------------------------------

type RequestWithRaw = FastifyRequest & { rawBody?: Buffer };

/**
 * The JSON body read as `cls` (a 400 listing every violation otherwise). Nest resolves
 * parameters after the guards, so a bad body from an unknown key is still a 401.
 */
export const RequestBody = createParamDecorator((data: { cls: RequestClass; options?: ReadOptions }, context: ExecutionContext) => {
  const request = context.switchToHttp().getRequest<RequestWithRaw>();
  return readRequest(data.cls, request.body, request.rawBody, data.options);
});

/** The query string read as `cls`. */
export const RequestQuery = createParamDecorator((cls: RequestClass, context: ExecutionContext) =>
  readRequest(cls, context.switchToHttp().getRequest<FastifyRequest>().query, undefined, { query: true }),
);

/** `@Body(CreateInvoiceRequest)`, the decorator form: `@ValidBody(CreateInvoiceRequest)`. */
export const ValidBody = (cls: RequestClass, options?: ReadOptions): ParameterDecorator => RequestBody({ cls, options });
export const ValidQuery = (cls: RequestClass): ParameterDecorator => RequestQuery(cls);
