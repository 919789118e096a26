import { targetConstructorToSchema } from 'class-validator-jsonschema';
import { declaredFields, RequestClass } from '../http/request-validation';
import type { ParameterObject, SchemaObject } from './openapi-document';

/**
 * The request schemas of the OpenAPI documents, generated from the request DTOs by
 * class-validator-jsonschema (`targetConstructorToSchema`): the properties are the
 * DTO's declared fields, each with the schema fragment its decorator states beside
 * its rules; `required` is every field without a presence condition; unknown fields
 * are refused (`additionalProperties: false`), as the validator refuses them.
 */
export function requestSchema(cls: RequestClass): SchemaObject {
  const generated = targetConstructorToSchema(cls, { refPointerPrefix: '#/components/schemas/' }) as SchemaObject & { properties?: Record<string, SchemaObject> };
  const properties = generated.properties ?? {};
  // The document lists properties in the order the validator reads them.
  const ordered = Object.fromEntries(declaredFields(cls).filter((name) => name in properties).map((name) => [name, properties[name]!]));
  const { properties: _, type: __, required, ...rest } = generated;
  return {
    type: 'object',
    ...rest,
    ...(required && required.length > 0 ? { required } : {}),
    properties: ordered,
    additionalProperties: false,
  };
}

/** The query parameters of a query DTO: one per field, its description beside its schema. */
export function queryParameters(cls: RequestClass): ParameterObject[] {
  const schema = requestSchema(cls);
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return { name, in: 'query', ...(description !== undefined ? { description } : {}), ...((schema.required ?? []).includes(name) ? { required: true } : {}), schema: rest };
  });
}
