/**
 * The checksums of the USDT payout addresses, so that a mistyped address is refused
 * before money is sent to it. Hand-written: node:crypto has SHA-256 but not Keccak-256,
 * and these few lines spare the gateway a dependency for one check.
 */
import { createHash } from 'node:crypto';

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const TRON_PREFIX = 0x41;

/** TRON's Base58Check: 25 bytes, the prefix 0x41, a 20-byte account, the first 4 bytes of its double SHA-256. */
const tronChecksum = (payload: Buffer): Buffer => {
  const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();
  return sha256(sha256(payload)).subarray(0, 4);
};

/** T and 33 base58 characters whose checksum holds. */
export function isTronAddress(text: string): boolean {
  if (!/^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(text)) return false;
  let value = 0n;
  for (const c of text) value = value * 58n + BigInt(BASE58.indexOf(c));
  const hex = value.toString(16).padStart(50, '0');
  if (hex.length !== 50) return false;
  const bytes = Buffer.from(hex, 'hex');
  return bytes[0] === TRON_PREFIX && tronChecksum(bytes.subarray(0, 21)).equals(bytes.subarray(21));
}

/** The TRON address of a 20-byte account (what the seed and the tests make addresses with). */
export function tronAddressOf(account: Uint8Array): string {
  if (account.length !== 20) throw new RangeError(`a TRON account is 20 bytes, got ${account.length}`);
  const payload = Buffer.concat([Buffer.from([TRON_PREFIX]), account]);
  let value = BigInt(`0x${Buffer.concat([payload, tronChecksum(payload)]).toString('hex')}`);
  let text = '';
  for (; value > 0n; value /= 58n) text = BASE58[Number(value % 58n)] + text;
  return text;
}

/**
 * 0x and 40 hex digits (BNB Smart Chain, as Ethereum). In one case throughout it carries
 * no checksum; in mixed case each letter's case is its EIP-55 checksum bit.
 */
export function isBscAddress(text: string): boolean {
  if (!/^0x[0-9a-fA-F]{40}$/.test(text)) return false;
  const hex = text.slice(2);
  return hex === hex.toLowerCase() || hex === hex.toUpperCase() || hex === eip55(hex.toLowerCase());
}

/** The EIP-55 spelling of 40 lower-case hex digits: a letter is upper case where the Keccak-256 of the digits has a nibble ≥ 8. */
export function eip55(hex: string): string {
  const hash = keccak256(Buffer.from(hex, 'ascii')).toString('hex');
  return [...hex].map((c, i) => (parseInt(hash[i]!, 16) >= 8 ? c.toUpperCase() : c)).join('');
}

const MASK = (1n << 64n) - 1n;
const ROUND_CONSTANTS = [
  0x0000000000000001n,
  0x0000000000008082n,
  0x800000000000808an,
  0x8000000080008000n,
  0x000000000000808bn,
  0x0000000080000001n,
  0x8000000080008081n,
  0x8000000000008009n,
  0x000000000000008an,
  0x0000000000000088n,
  0x0000000080008009n,
  0x000000008000000an,
  0x000000008000808bn,
  0x800000000000008bn,
  0x8000000000008089n,
  0x8000000000008003n,
  0x8000000000008002n,
  0x8000000000000080n,
  0x000000000000800an,
  0x800000008000000an,
  0x8000000080008081n,
  0x8000000000008080n,
  0x0000000080000001n,
  0x8000000080008008n,
];
/** The rotation of lane (x, y), as ROTATIONS[x][y]. */
const ROTATIONS = [
  [0, 36, 3, 41, 18],
  [1, 44, 10, 45, 2],
  [62, 6, 43, 15, 61],
  [28, 55, 25, 21, 56],
  [27, 20, 39, 8, 14],
];
const rotate = (v: bigint, n: number): bigint => (n === 0 ? v : ((v << BigInt(n)) | (v >> BigInt(64 - n))) & MASK);

/** Keccak-f[1600] on 25 lanes, lane (x, y) at x + 5y. */
function keccakF(a: bigint[]): void {
  for (const rc of ROUND_CONSTANTS) {
    const c = [0, 1, 2, 3, 4].map((x) => a[x]! ^ a[x + 5]! ^ a[x + 10]! ^ a[x + 15]! ^ a[x + 20]!);
    for (let x = 0; x < 5; x++) {
      const d = c[(x + 4) % 5]! ^ rotate(c[(x + 1) % 5]!, 1);
      for (let y = 0; y < 5; y++) a[x + 5 * y]! ^= d;
    }
    const b = new Array<bigint>(25);
    for (let x = 0; x < 5; x++) for (let y = 0; y < 5; y++) b[y + 5 * ((2 * x + 3 * y) % 5)] = rotate(a[x + 5 * y]!, ROTATIONS[x]![y]!);
    for (let x = 0; x < 5; x++) for (let y = 0; y < 5; y++) a[x + 5 * y] = b[x + 5 * y]! ^ (~b[((x + 1) % 5) + 5 * y]! & MASK & b[((x + 2) % 5) + 5 * y]!);
    a[0] = a[0]! ^ rc;
  }
}

/** Keccak-256 as Ethereum uses it (the padding before SHA-3's: 0x01 … 0x80). */
export const keccak256 = (data: Buffer): Buffer => sponge256(data, 0x01);

/** The Keccak sponge at rate 136 bytes with a 32-byte output; with the padding byte 0x06 it is SHA3-256 (the tests compare it with node:crypto's). */
export function sponge256(data: Buffer, padding: 0x01 | 0x06): Buffer {
  const rate = 136;
  const padded = Buffer.alloc((Math.floor(data.length / rate) + 1) * rate);
  data.copy(padded);
  padded[data.length]! ^= padding;
  padded[padded.length - 1]! ^= 0x80;
  const state = new Array<bigint>(25).fill(0n);
  for (let block = 0; block < padded.length; block += rate) {
    for (let i = 0; i < rate / 8; i++) state[i] = state[i]! ^ padded.readBigUInt64LE(block + 8 * i);
    keccakF(state);
  }
  const out = Buffer.alloc(32);
  for (let i = 0; i < 4; i++) out.writeBigUInt64LE(state[i]!, 8 * i);
  return out;
}
