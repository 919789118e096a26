import { AsyncResource } from 'node:async_hooks';

/**
 * `AsyncResource.prototype.bind` without the deprecated `asyncResource` accessor (decision
 * 0098). On Node 20 every call defines that accessor (DEP0172) with two fresh
 * `util.deprecate` wrappers, and Fastify binds once per request with a body (its body
 * parser's callback) and Nest twice per interceptor: in the CPU profile of the gateway
 * under `POST /v1/invoices` that was 4–7 % of the process's busy time, for a property no
 * code of the gateway or its libraries reads. The binding itself is Node's: the function
 * runs in the resource's async scope (`runInAsyncScope`, so AsyncLocalStorage and
 * async_hooks see the same context), with the caller's `this` unless `thisArg` is given,
 * and keeps the function's `length`. Where Node's own `bind` no longer defines the
 * accessor (later Node versions), it is left alone.
 */
export function useAsyncResourceBindingWithoutDeprecatedAccessor(): boolean {
  const probe = new AsyncResource('probe').bind(() => undefined);
  if (!Object.prototype.hasOwnProperty.call(probe, 'asyncResource')) return false;
  Object.defineProperty(AsyncResource.prototype, 'bind', {
    configurable: true,
    writable: true,
    enumerable: false,
    value: function bind(this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown): (...args: unknown[]) => unknown {
      if (typeof fn !== 'function') throw new TypeError(`The "fn" argument must be of type function. Received ${typeof fn}`);
      const runInScope = AsyncResource.prototype.runInAsyncScope.bind(this) as (
        fn: (...args: unknown[]) => unknown,
        self: unknown,
        ...args: unknown[]
      ) => unknown;
      const bound =
        thisArg === undefined
          ? function (this: unknown, ...args: unknown[]) {
              return runInScope(fn, this, ...args);
            }
          : (runInScope.bind(undefined, fn, thisArg) as (...args: unknown[]) => unknown);
      Object.defineProperty(bound, 'length', { configurable: true, enumerable: false, value: fn.length, writable: false });
      return bound;
    },
  });
  return true;
}
