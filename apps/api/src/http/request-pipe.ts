import 'reflect-metadata';
import { ArgumentMetadata, Type, ValidationPipe } from '@nestjs/common';
import { getMetadataStorage, ValidationArguments, ValidationError, ValidationTypes, ValidatorOptions } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';
import { ApiError, ErrorDetail } from './errors/api-error';
import { lazyLiterals, placeLiterals, RAW_BODIES } from './number-literals';
import { ANSWERS, PropertyRules } from './request-rules';

/**
 * Requests are DTO classes validated by NestJS's ValidationPipe with class-validator's
 * whitelist (unknown fields refused), and one exception factory that writes the spec's
 * 400 `validation`:
 * - `param` is the full path (`customer.email`, `methods.sbp.feePct`);
 * - `details` lists every violation, one per field (the first constraint it breaks in
 *   the order of request-rules.ts's table), in the DTO's declared field order; rules
 *   over several fields (`context: { acrossFields: true }`) follow the fields of their
 *   object; unknown fields come last, in the order they were sent;
 * - every message is `<path>: <Russian text>`.
 */

/** A rule over several fields of its object: listed after the violations of single fields. */
export const ACROSS_FIELDS = { acrossFields: true } as const;

interface Field {
  /** The field's constraints by name. */
  readonly rules: PropertyRules;
  /** The DTO class of a nested object (ValidateNested; its TypeScript type names the class). */
  readonly nested?: Type<object>;
}

/** The declared fields of a class in declaration order (class-validator's metadata, inherited ones after its own). */
function fieldsOf(cls: object): ReadonlyMap<string, Field> {
  let fields = FIELDS.get(cls);
  if (fields === undefined) {
    const found = new Map<string, { rules: Map<string, ValidationMetadata>; nested?: Type<object> }>();
    for (const m of getMetadataStorage().getTargetValidationMetadatas(cls as Type<object>, '', true, false)) {
      const field = found.get(m.propertyName) ?? { rules: new Map<string, ValidationMetadata>() };
      found.set(m.propertyName, field);
      if (m.name !== undefined) field.rules.set(m.name, m);
      if (m.type !== ValidationTypes.NESTED_VALIDATION) continue;
      const nested = Reflect.getMetadata('design:type', (cls as Type<object>).prototype, m.propertyName) as Type<object> | undefined;
      // `T | null` is reflected as Object: a nested DTO's field is typed with its class alone.
      if (nested === undefined || nested === Object)
        throw new Error(`${(cls as Type<object>).name}.${m.propertyName}: ValidateNested needs the class as the field's type`);
      field.nested = nested;
    }
    fields = found;
    FIELDS.set(cls, fields);
  }
  return fields;
}
/** Classes are declared once, at load: their fields are kept. */
const FIELDS = new WeakMap<object, ReadonlyMap<string, Field>>();

/**
 * class-validator finds the rules of the object it validates at every validation
 * (MetadataStorage.getTargetValidationMetadatas: a filter of the class's rules and a
 * walk over every class that has rules, for inherited ones). The API validates without
 * groups, and a class's rules are all added when its module loads: the answer is kept
 * per class and options, and forgotten whenever a rule is added.
 */
function keepRulesPerClass(): void {
  type Lookup = (target: Type<object>, schema: string, always: boolean, strictGroups: boolean, groups?: string[]) => ValidationMetadata[];
  const storage = getMetadataStorage() as unknown as { getTargetValidationMetadatas: Lookup; addValidationMetadata(metadata: ValidationMetadata): void };
  const lookUp = storage.getTargetValidationMetadatas.bind(storage);
  const add = storage.addValidationMetadata.bind(storage);
  let kept = new Map<Type<object>, Map<string, ValidationMetadata[]>>();
  storage.addValidationMetadata = (metadata) => {
    kept = new Map();
    add(metadata);
  };
  storage.getTargetValidationMetadatas = (target, schema, always, strictGroups, groups) => {
    if (groups !== undefined && groups.length > 0) return lookUp(target, schema, always, strictGroups, groups);
    const options = `${schema}\u0000${always}\u0000${strictGroups}`;
    let ofClass = kept.get(target);
    if (ofClass === undefined) kept.set(target, (ofClass = new Map()));
    let rules = ofClass.get(options);
    if (rules === undefined) ofClass.set(options, (rules = lookUp(target, schema, always, strictGroups, groups)));
    return rules;
  };
}
keepRulesPerClass();

export const isJsonObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

// ---------------------------------------------------------------------------
// Instances: the JSON as sent (docs/decisions/0085)
// ---------------------------------------------------------------------------

/**
 * Values nested deeper than this are kept as empty containers of the same kind: no rule
 * looks that deep (customFields refuses nesting beyond 32 levels before it would), and
 * nothing recurses over the rest of a 12 000-level body.
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

/**
 * The instance class-validator checks, instead of class-transformer's (which drops keys
 * named like prototype members, recurses without a bound and converts values): each own
 * key of the JSON object copied as an own data property, nested DTOs instantiated,
 * nothing converted, and where the object sits in the raw body (for the money rules).
 */
function instantiate(
  cls: Type<object>,
  plain: Record<string, unknown>,
  segments: readonly string[],
  literals: ReturnType<typeof lazyLiterals>,
  depth: number,
): object {
  const instance = Object.create(cls.prototype) as object;
  const fields = fieldsOf(cls);
  for (const [key, value] of Object.entries(plain)) {
    if (key === 'constructor') {
      // class-validator finds a class's rules through `object.constructor`: a body key of
      // that name stays an (unknown, refused) own field that still leads to the class.
      Object.defineProperty(instance, key, { get: () => cls, enumerable: true, configurable: true });
      continue;
    }
    const nested = fields.get(key)?.nested;
    const copied = nested && isJsonObject(value) ? instantiate(nested, value, [...segments, key], literals, depth + 1) : copyJson(value, depth + 1);
    Object.defineProperty(instance, key, { value: copied, enumerable: true, writable: true, configurable: true });
  }
  placeLiterals(instance, segments, literals);
  return instance;
}

// ---------------------------------------------------------------------------
// The exception factory
// ---------------------------------------------------------------------------

/** The spec's details of one object: its fields' violations, its rules over several fields, its unknown fields. */
function detailsOf(instance: object, errors: readonly ValidationError[], prefix: string): ErrorDetail[] {
  const cls = instance.constructor;
  const fields = fieldsOf(cls);
  const path = (name: string) => (prefix ? `${prefix}.${name}` : name);
  const single: ErrorDetail[] = [];
  const across: ErrorDetail[] = [];
  for (const [property, field] of fields) {
    const error = errors.find((e) => e.property === property);
    const names = Object.keys(error?.constraints ?? {}).filter((name) => name !== ValidationTypes.NESTED_VALIDATION);
    const name = Object.keys(ANSWERS).find((n) => names.includes(n)) ?? names[0];
    if (name !== undefined) {
      const metadata = field.rules.get(name);
      const args: ValidationArguments = { value: error!.value, constraints: metadata?.constraints ?? [], targetName: cls.name, object: instance, property };
      const [code, message] = ANSWERS[name] ?? [];
      const context = metadata?.context as { code?: string; acrossFields?: boolean } | undefined;
      const answer = {
        code: context?.code ?? (typeof code === 'function' ? code(args) : code),
        message: metadata?.message !== undefined ? error!.constraints![name]! : message?.(args, field.rules),
      };
      if (answer.code === undefined || answer.message === undefined) throw new Error(`${cls.name}.${property}: no code or message for the constraint ${name}`);
      (context?.acrossFields ? across : single).push({ param: path(property), code: answer.code, message: `${path(property)}: ${answer.message}` });
      continue;
    }
    const value = (instance as Record<string, unknown>)[property];
    if (field.nested && value instanceof field.nested) single.push(...detailsOf(value, error?.children ?? [], path(property)));
  }
  const unknown = Object.keys(instance)
    .filter((key) => !fields.has(key))
    .map((key) => ({ param: path(key), code: 'unknown_field', message: `${path(key)}: неизвестное поле` }));
  return [...single, ...across, ...unknown];
}

/** Whether an instance, or a nested DTO in it, has a field its class does not declare (what detailsOf lists last). */
function hasUnknownFields(instance: object): boolean {
  const fields = fieldsOf(instance.constructor);
  for (const key of Object.keys(instance)) {
    const field = fields.get(key);
    if (field === undefined) return true;
    const value = (instance as Record<string, unknown>)[key];
    if (field.nested && value instanceof field.nested && hasUnknownFields(value)) return true;
  }
  return false;
}

/** The 400 of a request class-validator refused: its target is the request's root object. */
function validationError(errors: ValidationError[]): ApiError {
  const details = detailsOf(errors[0]!.target!, errors, '');
  if (details.length === 0) throw new Error(`class-validator refused a request the API has no answer for: ${JSON.stringify(errors.map((e) => e.constraints))}`);
  return ApiError.validation(details);
}

// ---------------------------------------------------------------------------
// The pipe
// ---------------------------------------------------------------------------

export interface RequestPipeOptions {
  /** No body at all reads as `{}` (optional bodies: a full refund, a transition without fields). */
  readonly absentBodyIsEmpty?: boolean;
}

/**
 * NestJS's ValidationPipe with the API's reading of a request: the body must be a JSON
 * object (a query string always is one), instances are built by `instantiate`, and the
 * exception factory writes the spec's details.
 */
export class RequestValidationPipe extends ValidationPipe {
  constructor(private readonly options: RequestPipeOptions = {}) {
    super({
      transform: true,
      whitelist: true,
      forbidNonWhitelisted: true,
      forbidUnknownValues: false,
      validationError: { target: true, value: true },
      transformerPackage: {
        plainToInstance: <T>(cls: Type<T>, plain: unknown) =>
          instantiate(cls as Type<object>, plain as Record<string, unknown>, [], lazyLiterals(RAW_BODIES.get(plain as object)), 0) as T,
        classToPlain: (instance: object) => instance,
      },
      exceptionFactory: validationError,
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    let source = value;
    if (metadata.type === 'query') {
      const query = isJsonObject(source) ? source : {};
      // A parameter named twice reads as an array, which no route takes: said as what it is (as for bodies), not as a bad value.
      const repeated = Object.keys(query).filter((name) => Array.isArray(query[name]));
      if (repeated.length > 0) {
        throw ApiError.validation(repeated.map((param) => ({ param, code: 'duplicate_field', message: `${param}: параметр указан в адресе запроса дважды` })));
      }
      // Nothing declared and nothing sent (the read routes' case): nothing to check.
      if (metadata.metatype === NoParameters && !sentParameters(query)) return new NoParameters();
      source = query;
    } else if (source === undefined && this.options.absentBodyIsEmpty) source = {};
    if (!isJsonObject(source)) throw ApiError.validation([{ param: 'body', code: 'invalid_type', message: 'Тело запроса должно быть JSON-объектом' }]);
    return super.transform(source, metadata);
  }

  /** Nothing is deleted: `instantiate` copies own keys as data properties, and a key named `__proto__` or `constructor` is an unknown field. */
  protected override stripProtoKeys(): void {}

  /**
   * class-validator's whitelist looks names up in a plain object, so those of
   * Object.prototype's members (`constructor`, `hasOwnProperty`, `__proto__`) pass it
   * (docs/decisions/0085): the factory finds every unknown field itself, and is called
   * when they are all there is.
   */
  protected override async validate(object: object, options?: ValidatorOptions): Promise<ValidationError[]> {
    const errors = await super.validate(object, options);
    if (errors.length > 0 || !hasUnknownFields(object)) return errors;
    return [Object.assign(new ValidationError(), { target: object, property: '', children: [], constraints: {} })];
  }
}

/**
 * The query string of a route that takes no parameter: any one sent is an unknown field
 * (400), as on the routes that take some. Silently ignored, `GET /v1/balance?mode=live`
 * with a test key would answer the test balance to a merchant who asked for the live one.
 */
export class NoParameters {}

/** The body of a route that takes none: nothing, or an empty object (any field is unknown, 400). */
export class NoFieldsRequest {}

/** Whether the parsed query string names any parameter (`?` or `?&` alone names none). */
export const sentParameters = (query: unknown): boolean => isJsonObject(query) && Object.keys(query).length > 0;

/** A request body or query string read as its DTO class. */
export const validRequest = new RequestValidationPipe();
/** A body that may be left out: none reads as `{}`. */
export const validOptionalBody = new RequestValidationPipe({ absentBodyIsEmpty: true });

/** The body read as `cls` where a handler decides when (after a check that answers first). */
export const readBody = <T extends object>(cls: Type<T>, body: unknown, pipe: RequestValidationPipe = validRequest): Promise<T> =>
  pipe.transform(body, { type: 'body', metatype: cls }) as Promise<T>;
/** A query string read in the handler (where something else is checked first), as `@Query(validRequest)` would. */
export const readQuery = <T extends object>(cls: Type<T>, query: unknown): Promise<T> =>
  validRequest.transform(query, { type: 'query', metatype: cls }) as Promise<T>;
