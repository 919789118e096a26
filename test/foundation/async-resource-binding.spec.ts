/**
 * The gateway's AsyncResource.bind (decision 0098): the same binding as Node's (the
 * function runs in the resource's async context, with the caller's `this` or the given
 * one, its arguments, its result and its `length`), without the deprecated
 * `asyncResource` accessor whose two util.deprecate wrappers Node 20 made on every call
 * (Fastify binds once per request with a body, Nest twice per interceptor). The
 * prototype's own `bind` is restored after these tests: core modules are shared by the
 * test files of one Jest worker.
 */
import { AsyncLocalStorage, AsyncResource, executionAsyncId } from 'node:async_hooks';
import { useAsyncResourceBindingWithoutDeprecatedAccessor } from '../../apps/api/src/http/async-resource-binding';

const nodeBind = Object.getOwnPropertyDescriptor(AsyncResource.prototype, 'bind')!;
const nodeBindsWithAccessor = Object.prototype.hasOwnProperty.call(
  new AsyncResource('probe').bind(() => undefined),
  'asyncResource',
);

let installed: boolean;
beforeAll(() => {
  installed = useAsyncResourceBindingWithoutDeprecatedAccessor();
});
afterAll(() => {
  Object.defineProperty(AsyncResource.prototype, 'bind', nodeBind);
});

describe('AsyncResource.bind as the gateway installs it', () => {
  it('replaces Node’s bind exactly where Node’s defines the deprecated accessor', () => {
    expect(installed).toBe(nodeBindsWithAccessor);
  });

  it('binds without the deprecated asyncResource accessor', () => {
    const bound = new AsyncResource('test').bind(() => 1);
    expect(Object.prototype.hasOwnProperty.call(bound, 'asyncResource')).toBe(false);
    expect(AsyncResource.bind(() => 1)).not.toHaveProperty('asyncResource');
  });

  it('runs the function in the async context of the resource’s creation, with its arguments and result', async () => {
    const storage = new AsyncLocalStorage<{ requestId: string }>();
    let resourceId = 0;
    const bound = storage.run({ requestId: 'req-1' }, () => {
      const resource = new AsyncResource('test-resource');
      resourceId = resource.asyncId();
      return resource.bind((a: number, b: number) => ({ seen: storage.getStore()?.requestId, sum: a + b, executionId: executionAsyncId() }));
    });
    // Called later, from outside that context (as a parser's callback is).
    const result = await new Promise<{ seen?: string; sum: number; executionId: number }>((resolve) => setImmediate(() => resolve(bound(2, 3))));
    expect(result).toEqual({ seen: 'req-1', sum: 5, executionId: resourceId });
    expect(storage.getStore()).toBeUndefined();
  });

  it('keeps the caller’s this, or the one given, and the function’s length', () => {
    function whoAmI(this: { name?: string } | undefined, _a: unknown, _b: unknown) {
      return this?.name;
    }
    const resource = new AsyncResource('test');
    const callersThis = resource.bind(whoAmI);
    expect(callersThis.call({ name: 'caller' }, 1, 2)).toBe('caller');
    // Node's bind takes a thisArg too (its typings list only the function).
    const bindWithThis = resource.bind.bind(resource) as unknown as (fn: typeof whoAmI, thisArg: unknown) => typeof whoAmI;
    expect(bindWithThis(whoAmI, { name: 'given' }).call({ name: 'caller' }, 1, 2)).toBe('given');
    expect(callersThis.length).toBe(2);
  });

  it('refuses what is not a function, as Node does', () => {
    expect(() => new AsyncResource('test').bind(42 as unknown as () => void)).toThrow(/"fn" argument must be of type function/);
  });
});
