/**
 * Where a webhook may go when private networks are not allowed (pure rules of
 * libs/payments/src/webhooks/webhook-address.ts): only globally routable unicast addresses
 * that are not the gateway host's own.
 */
import { addressRange, webhookAddressRefusal, webhookUrlRefusal } from '#payments/webhooks';

const NO_HOST_ADDRESSES: readonly string[] = [];

describe('webhook addresses: only globally routable unicast', () => {
  // Every range the issue found let through, and the ones refused before.
  const refused: [string, string][] = [
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.169.254', 'linkLocal'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.2', 'reserved'],
    ['192.0.2.255', 'reserved'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', 'reserved'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['250.1.2.3', 'reserved'],
    ['255.255.255.254', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fc00::1', 'uniqueLocal'],
    ['fd00::2', 'uniqueLocal'],
    ['fe80::1', 'linkLocal'],
    ['fe80::fc:ff:fe00:1%eth0', 'linkLocal'],
    ['fec0::1', 'deprecatedSiteLocal'],
    ['feff::1', 'deprecatedSiteLocal'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    // IPv4-compatible ::/96 (deprecated): outside 2000::/3.
    ['::7f00:1', 'reserved'],
    ['::127.0.0.1', 'reserved'],
    ['::8.8.8.8', 'reserved'],
    // NAT64, well-known and local-use prefixes, whatever they embed.
    ['64:ff9b::7f00:1', 'rfc6052'],
    ['64:ff9b::127.0.0.1', 'rfc6052'],
    ['64:ff9b::808:808', 'rfc6052'],
    ['64:ff9b:1::a00:1', 'rfc6052'],
    // 6to4, whatever it embeds.
    ['2002:7f00:1::', '6to4'],
    ['2002:c0a8:101::1', '6to4'],
    ['2002:808:808::1', '6to4'],
    // Teredo.
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'],
    // IPv4-mapped IPv6: judged as the IPv4 address.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:192.0.2.2', 'reserved'],
    ['::ffff:169.254.169.254', 'linkLocal'],
    // SIIT (::ffff:0:a.b.c.d).
    ['::ffff:0:7f00:1', 'rfc6145'],
  ];

  it.each(refused)('%s is refused (%s)', (address, range) => {
    expect(addressRange(address)).toBe(range);
    expect(webhookAddressRefusal(address, NO_HOST_ADDRESSES)).toMatch(/not a globally routable address/);
  });

  const allowed = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '77.88.8.8', '::ffff:8.8.8.8', '2a00:1450:4010:c05::64', '2606:4700:4700::1111'];

  it.each(allowed)('%s is allowed', (address) => {
    expect(addressRange(address)).toBe('unicast');
    expect(webhookAddressRefusal(address, NO_HOST_ADDRESSES)).toBeNull();
  });

  it('refuses every address of the gateway host itself, however it is written, even a public one', () => {
    const host = ['127.0.0.1', '::1', '93.184.216.34', '2a00:1450:4010:c05::64'];
    expect(webhookAddressRefusal('93.184.216.34', host)).toMatch(/gateway host itself/);
    expect(webhookAddressRefusal('::ffff:93.184.216.34', host)).toMatch(/gateway host itself/);
    expect(webhookAddressRefusal('2A00:1450:4010:0C05:0:0:0:64', host)).toMatch(/gateway host itself/);
    expect(webhookAddressRefusal('93.184.216.35', host)).toBeNull();
  });

  it('is not an IP address: refused', () => {
    expect(addressRange('example.com')).toBe('invalid');
    expect(webhookAddressRefusal('example.com', NO_HOST_ADDRESSES)).toMatch(/not an IP address/);
  });
});

describe('webhook URLs: a literal private or reserved address is refused when the URL is set', () => {
  it.each([
    'http://127.0.0.1:8080/hooks',
    'http://2130706433/hooks', // 127.0.0.1 written as one number
    'http://0x7f.1/hooks',
    'http://[::1]/hooks',
    'https://[::ffff:127.0.0.1]/hooks',
    'http://[64:ff9b::7f00:1]/hooks',
    'http://[2002:7f00:1::]/hooks',
    'http://[::7f00:1]/',
    'http://[fec0::1]/',
    'http://192.0.2.2:3000/admin/v1/accounts',
    'http://198.51.100.1/',
    'http://203.0.113.1/',
    'http://240.0.0.1/',
    'http://255.255.255.255/',
    'http://169.254.169.254/latest/meta-data/',
    'http://10.0.0.5/',
  ])('%s', (url) => {
    expect(webhookUrlRefusal(url, NO_HOST_ADDRESSES)).not.toBeNull();
  });

  it('a public literal or a host name passes (a name is checked when a delivery is made)', () => {
    expect(webhookUrlRefusal('https://8.8.8.8/hooks', NO_HOST_ADDRESSES)).toBeNull();
    expect(webhookUrlRefusal('https://[2606:4700:4700::1111]/hooks', NO_HOST_ADDRESSES)).toBeNull();
    expect(webhookUrlRefusal('https://shop.example/hooks', NO_HOST_ADDRESSES)).toBeNull();
    expect(webhookUrlRefusal('http://localhost:8080/hooks', NO_HOST_ADDRESSES)).toBeNull();
  });

  it("the gateway host's own public address is refused too", () => {
    expect(webhookUrlRefusal('https://93.184.216.34/hooks', ['93.184.216.34'])).toMatch(/gateway host itself/);
  });
});
