import type { Type } from '@nestjs/common';
import { getMetadataStorage, IS_OPTIONAL, ValidationTypes } from 'class-validator';
import { targetConstructorToSchema } from 'class-validator-jsonschema';
import type { IOptions } from 'class-validator-jsonschema/build/options';
import { CONVERTERS } from '../http/request-rules';
import type { ParameterObject, SchemaObject } from './openapi-document';

/**
 * The request schemas of the OpenAPI documents, generated from the request DTOs by
 * class-validator-jsonschema: the properties are the DTO's fields in their order, each
 * the merge of what its constraints say (class-validator's by the library's converters,
 * ours by request-rules.ts's) and its `@JSONSchema` (description, deprecated, examples);
 * `required` is every field without a condition (IsOptional, ValidateIf). Added here:
 * `null` where IsOptional lets it through, and `additionalProperties: false`, as the
 * validator refuses unknown fields.
 */
const OPTIONS: Partial<IOptions> = {
  refPointerPrefix: '#/components/schemas/',
  // A rule of ours without a converter states nothing (not the field's reflected type).
  additionalConverters: { [ValidationTypes.CUSTOM_VALIDATION]: {}, ...(CONVERTERS as IOptions['additionalConverters']) },
};

export function requestSchema(cls: Type<object>): SchemaObject {
  const { properties = {}, required, type: _, ...rest } = targetConstructorToSchema(cls, OPTIONS) as SchemaObject;
  const nullable = new Set(
    getMetadataStorage()
      .getTargetValidationMetadatas(cls, '', true, false)
      .filter((m) => m.name === IS_OPTIONAL)
      .map((m) => m.propertyName),
  );
  const documented = ({ type, ...schema }: SchemaObject): SchemaObject => (schema.$ref !== undefined ? schema : { ...(type !== undefined ? { type } : {}), ...schema });
  return {
    type: 'object',
    ...rest,
    ...(required && required.length > 0 ? { required } : {}),
    properties: Object.fromEntries(
      Object.entries(properties).map(([name, property]) => [name, nullable.has(name) ? withNull(documented(property)) : documented(property)]),
    ),
    additionalProperties: false,
  };
}

/** The schema with `null` allowed too. */
function withNull(schema: SchemaObject): SchemaObject {
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
  const type = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type as string];
  return { ...schema, type: [...type, 'null'] as SchemaObject['type'] };
}

/** The query parameters of a query DTO: one per field, its description beside its schema. */
export function queryParameters(cls: Type<object>): ParameterObject[] {
  const schema = requestSchema(cls);
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return { name, in: 'query', ...(description !== undefined ? { description } : {}), ...((schema.required ?? []).includes(name) ? { required: true } : {}), schema: rest };
  });
}
