import { createHash } from 'node:crypto';
import { eip55, isBscAddress, isTronAddress, keccak256, sponge256, tronAddressOf } from './wallet-addresses';

describe('Keccak-256 (Ethereum’s, not SHA3-256)', () => {
  it.each([
    ['', 'c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470'],
    ['abc', '4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45'],
    ['The quick brown fox jumps over the lazy dog', '4d741b6f1eb29cb2a9b9911c82f56fa8d73b04959d3d9d222895df6c0b28aa15'],
  ])('%j', (text, hash) => {
    expect(keccak256(Buffer.from(text)).toString('hex')).toBe(hash);
  });

  it('the same sponge with SHA-3’s padding is node:crypto’s SHA3-256, at every length from 0 to 300 bytes (the rate is 136)', () => {
    for (let n = 0; n <= 300; n++) {
      const data = Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + n) % 256));
      expect(sponge256(data, 0x06).toString('hex')).toBe(createHash('sha3-256').update(data).digest('hex'));
    }
  });
});

describe('BNB Smart Chain addresses: EIP-55', () => {
  // The examples of EIP-55 itself.
  const CHECKSUMMED = [
    '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
    '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
    '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
    '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
  ];

  it.each(CHECKSUMMED)('%s is its own EIP-55 spelling and valid', (address) => {
    expect(`0x${eip55(address.slice(2).toLowerCase())}`).toBe(address);
    expect(isBscAddress(address)).toBe(true);
  });

  it('in one case throughout, an address carries no checksum and is taken', () => {
    for (const address of CHECKSUMMED) {
      expect(isBscAddress(address.toLowerCase())).toBe(true);
      expect(isBscAddress(`0x${address.slice(2).toUpperCase()}`)).toBe(true);
    }
  });

  it('in mixed case, a changed digit or a letter in the other case is refused', () => {
    const [address] = CHECKSUMMED as [string];
    expect(isBscAddress(`${address.slice(0, -1)}c`)).toBe(false); // …BeAed → …BeAec
    expect(isBscAddress(`${address.slice(0, 3)}A${address.slice(4)}`)).toBe(false); // 0x5aA… → 0x5AA…
    expect(isBscAddress(`${address.slice(0, 10)}7${address.slice(11)}`)).toBe(false); // …6053… → …6073…
  });

  it('the form: 0x and 40 hex digits', () => {
    expect(isBscAddress('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe')).toBe(false);
    expect(isBscAddress('5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed')).toBe(false);
    expect(isBscAddress('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg')).toBe(false);
  });
});

describe('TRON addresses: Base58Check', () => {
  it('tronAddressOf writes the addresses isTronAddress takes: the zero account, and fifty others', () => {
    expect(tronAddressOf(new Uint8Array(20))).toBe('T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb');
    for (let i = 0; i < 50; i++) {
      const address = tronAddressOf(Uint8Array.from({ length: 20 }, (_, k) => (i * 37 + k * 101) % 256));
      expect(isTronAddress(address)).toBe(true);
      expect(isTronAddress(`${address.slice(0, 20)}${address[20] === '2' ? '3' : '2'}${address.slice(21)}`)).toBe(false);
    }
  });
});
