import { REFUND_ID } from '#domain';
import type { KeyedRequest } from '../idempotency/keyed-request';
import { newRefundId, refundIdFor } from './refund-flow';

describe('refund ids', () => {
  const request: KeyedRequest = {
    keyId: '6f1c1f7e-8c1a-4c7a-9d0e-0b6d3c1e2a11',
    projectId: '0c5e8d2a-3b1f-4e6a-8d7c-9f0a1b2c3d4e',
    mode: 'test',
    key: 'order-42-refund',
    fingerprint: 'f'.repeat(64),
  };

  it('a fresh id is rf_ and 24 lower-case letters and digits, different each time', () => {
    const ids = new Set(Array.from({ length: 1000 }, newRefundId));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(REFUND_ID);
  });

  it('a keyed request always names the same refund, in the same form', () => {
    expect(refundIdFor(request)).toBe(refundIdFor({ ...request }));
    expect(refundIdFor(request)).toMatch(REFUND_ID);
  });

  it('the key pair names it, not the project: a request keyed before the scope was the project keeps its id', () => {
    expect(refundIdFor({ ...request, projectId: '0c5e8d2a-3b1f-4e6a-8d7c-9f0a1b2c3d4f' })).toBe(refundIdFor(request));
  });

  it('another key pair, mode, key or request names another refund', () => {
    const id = refundIdFor(request);
    for (const other of [
      { ...request, keyId: '6f1c1f7e-8c1a-4c7a-9d0e-0b6d3c1e2a12' },
      { ...request, mode: 'live' as const },
      { ...request, key: 'order-42-refund ' },
      { ...request, fingerprint: 'e'.repeat(64) },
    ]) {
      expect(refundIdFor(other)).not.toBe(id);
    }
  });
});
