/**
 * The examples of the /docs page (apps/api/src/docs/operation-examples.ts): every
 * operation of GET /v1/openapi.json has one; its request and answer are valid against
 * the document's schemas (the answer closed: no field the schema does not name); the
 * SDK call shown, run through the SDK's client against a recording fetch, sends exactly
 * the request the curl line shows and returns the answer shown; and the page shows all
 * three for each operation.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { HTTP_METHODS, OPENAPI_DOCUMENT } from '../../apps/api/src/docs/openapi-document';
import type { OperationObject, SchemaObject } from '../../apps/api/src/docs/openapi-document';
import { renderDocsPage, WEBHOOK_VERIFICATION_SNIPPET } from '../../apps/api/src/docs/docs-page';
import { curlLine, EXAMPLE_ORIGIN, examplePath, OPERATION_EXAMPLES, sdkCall } from '../../apps/api/src/docs/operation-examples';
import { escapeHtml } from '../../apps/api/src/pay/payment-page.html';
import { PaymentGatewayClient } from '../../libs/sdk/src';

const doc = OPENAPI_DOCUMENT;
const base = doc.servers[0]!.url;
const operations: { method: string; path: string; op: OperationObject }[] = Object.entries(doc.paths).flatMap(([path, item]) =>
  HTTP_METHODS.filter((m) => item[m]).map((method) => ({ method, path, op: item[method]! })),
);

/** `#/components/schemas/X` → `#/$defs/X`; `close`: objects with properties get additionalProperties: false. */
function rewrite(value: unknown, close: boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => rewrite(v, close));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === '$ref') out[key] = (v as string).replace('#/components/schemas/', '#/$defs/');
    else if (key === 'examples' || key === 'default' || key === 'const' || key === 'enum') out[key] = v;
    else if (key === 'properties') out[key] = Object.fromEntries(Object.entries(v as object).map(([k, p]) => [k, rewrite(p, close)]));
    else out[key] = rewrite(v, close);
  }
  if (close && out.properties !== undefined && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}
const ajvs = {
  open: new Ajv2020({ strict: true, strictRequired: false, allowUnionTypes: true }),
  closed: new Ajv2020({ strict: true, strictRequired: false, allowUnionTypes: true }),
};
addFormats(ajvs.open);
addFormats(ajvs.closed);
function validator(schema: SchemaObject, close: boolean) {
  return ajvs[close ? 'closed' : 'open'].compile({ $defs: rewrite(doc.components.schemas, close), ...(rewrite(schema, close) as object) });
}

describe('the examples of every operation on /docs', () => {
  it('exist for every operation of the document, and only for those', () => {
    expect(Object.keys(OPERATION_EXAMPLES).sort()).toEqual(operations.map((o) => o.op.operationId).sort());
  });

  describe.each(operations.map((o) => [o.op.operationId, o] as const))('%s', (operationId, { method, path, op }) => {
    const example = OPERATION_EXAMPLES[operationId]!;

    it('the request is valid: its path parameters, query and body against the document', () => {
      for (const p of op.parameters ?? []) {
        const given = p.in === 'path' ? example.params?.[p.name] : p.in === 'query' ? example.query?.[p.name] : undefined;
        if (p.required && p.in !== 'header') expect(given).toBeDefined();
        if (given !== undefined) expect(validator(p.schema, false)(given)).toBe(true);
      }
      const named = new Set((op.parameters ?? []).map((p) => p.name));
      for (const name of [...Object.keys(example.params ?? {}), ...Object.keys(example.query ?? {})]) expect(named).toContain(name);
      if (example.body !== undefined) {
        const validate = validator(op.requestBody!.content['application/json'].schema, false);
        expect({ valid: validate(example.body), errors: validate.errors ?? null }).toEqual({ valid: true, errors: null });
      } else {
        expect(op.requestBody?.required ?? false).toBe(false);
      }
    });

    it('the answer is one the operation declares, valid against its schema, with no field the schema does not name', () => {
      const declared = op.responses[String(example.response.status)];
      expect(declared).toBeDefined();
      const validate = validator(declared!.content!['application/json'].schema, true);
      expect({ valid: validate(example.response.body), errors: validate.errors ?? null }).toEqual({ valid: true, errors: null });
    });

    it('the SDK call sends the request the curl line shows and returns the answer shown', async () => {
      const sent: { url: string; method: string; body: string | undefined; headers: Record<string, string> }[] = [];
      const client = new PaymentGatewayClient({
        baseUrl: `${EXAMPLE_ORIGIN}${base}`,
        auth: { secretKey: 'sk_test_example' },
        fetch: async (input, init) => {
          sent.push({ url: String(input), method: init!.method!, body: init!.body as string | undefined, headers: init!.headers as Record<string, string> });
          return new Response(JSON.stringify(example.response.body), { status: example.response.status, headers: { 'content-type': 'application/json' } });
        },
      });
      const call = (client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[example.sdk.method];
      expect(typeof call).toBe('function');
      const args: unknown[] = [...Object.values(example.params ?? {})];
      if (example.query !== undefined) args.push(example.query);
      if (example.body !== undefined) args.push(example.body);
      await expect(call!.apply(client, args)).resolves.toEqual(example.response.body);

      expect(sent).toHaveLength(1);
      expect(sent[0]!.method).toBe(method.toUpperCase());
      expect(sent[0]!.url).toBe(`${EXAMPLE_ORIGIN}${base}${examplePath(path, example)}`);
      expect(sent[0]!.body).toBe(example.body === undefined ? undefined : JSON.stringify(example.body));
      expect('idempotency-key' in sent[0]!.headers).toBe(example.idempotencyKey === true);
      // The curl line: the same address and the same body bytes.
      const curl = curlLine(method, base, path, example);
      expect(curl).toContain(`'${sent[0]!.url}'`);
      if (example.body !== undefined) expect(curl).toContain(`-d '${JSON.stringify(example.body).replace(/'/g, `'\\''`)}'`);
      expect(curl.includes('Idempotency-Key')).toBe(example.idempotencyKey === true);
      expect(sdkCall(example)).toContain(`.${example.sdk.method}(`);
    });
  });

  it('the page shows the curl line, the SDK call and the answer inside each operation', () => {
    const html = renderDocsPage(doc);
    for (const { method, path, op } of operations) {
      const example = OPERATION_EXAMPLES[op.operationId]!;
      const start = html.indexOf(`id="op-${op.operationId}"`);
      expect(start).toBeGreaterThan(0);
      const section = html.slice(start, html.indexOf('</section>', start));
      expect(section).toContain(escapeHtml(curlLine(method, base, path, example)));
      expect(section).toContain(escapeHtml(sdkCall(example)));
      expect(section).toContain(escapeHtml(JSON.stringify(example.response.body, null, 2)));
    }
    // The webhooks part shows how to verify a delivery, with both headers named.
    const webhooks = html.slice(html.indexOf('id="webhooks"'));
    expect(webhooks).toContain(escapeHtml(WEBHOOK_VERIFICATION_SNIPPET));
    expect(webhooks).toContain('X-Service-Signature-Timestamped');
  });
});
