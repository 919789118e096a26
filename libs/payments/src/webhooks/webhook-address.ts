import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Where a webhook may go when private networks are not allowed: only globally
 * routable unicast addresses that are not the gateway host's own. Pure: the host's
 * addresses are passed in (read with os.networkInterfaces() at delivery time).
 *
 * The ranges are ipaddr.js's (IANA's special-purpose registries): for IPv4 only its
 * `unicast` class passes (not loopback, private, carrier-grade NAT, link-local,
 * documentation, benchmarking, 240.0.0.0/4, broadcast, multicast, unspecified,
 * AS112, AMT); for IPv6 only `unicast` inside the global unicast block 2000::/3, so
 * the IPv4-compatible ::/96, site-local fec0::/10, unique-local, link-local,
 * multicast and the translation prefixes NAT64 (64:ff9b::/96, 64:ff9b:1::/48),
 * 6to4 (2002::/16) and Teredo (2001::/32) are refused whatever IPv4 address they
 * embed: a translator can lead to its own private side. An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) is judged as the IPv4 address it is.
 */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/** The address as ipaddr.js parses it, IPv4-mapped IPv6 as IPv4, zone index dropped; null when it is not an IP address. */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const bare = address.replace(/^\[|\]$/g, '').split('%', 1)[0]!;
  const family = isIP(bare);
  if (family === 0) return null;
  // IPv6 first in the WHATWG URL parser's form (hex groups only): ipaddr.js reads a
  // dotted tail such as ::127.0.0.1 as IPv4-mapped, which it is not (it is ::7f00:1).
  const parsed = ipaddr.parse(family === 6 ? new URL(`http://[${bare}]/`).hostname.slice(1, -1) : bare);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed;
}

/** The address's special-purpose range, or `unicast` for a globally routable one; `invalid` when it is not an IP address. */
export function addressRange(address: string): string {
  const parsed = parseAddress(address);
  if (!parsed) return 'invalid';
  const range = parsed.range() as string;
  if (parsed.kind() === 'ipv4' || range !== 'unicast') return range;
  return parsed.match(GLOBAL_UNICAST_V6) ? 'unicast' : 'reserved';
}

/** The same address however it is written (::ffff:7f00:1 and 127.0.0.1, 2001:DB8::1 and 2001:db8:0::1). */
export function canonicalAddress(address: string): string | null {
  return parseAddress(address)?.toNormalizedString() ?? null;
}

/**
 * Why a webhook may not go to `address` (null: it may): not globally routable unicast, or one of the host's own.
 * Said of the address, without naming it (`is not a globally routable address (loopback)`), so that a caller puts it
 * in its own sentence: `127.0.0.1 is not …`, `localhost resolves to 127.0.0.1, which is not …`.
 */
export function webhookAddressRefusal(address: string, hostAddresses: readonly string[]): string | null {
  const range = addressRange(address);
  if (range === 'invalid') return 'is not an IP address';
  if (range !== 'unicast') return `is not a globally routable address (${range})`;
  const canonical = canonicalAddress(address);
  if (hostAddresses.some((own) => canonicalAddress(own) === canonical)) return 'is an address of the gateway host itself';
  return null;
}

/**
 * Why a webhook URL may not be set (null: it may), judged on its text alone: an IP
 * literal that is not globally routable or is the host's own. A host name is
 * resolved only when a delivery is made, and its addresses are checked then.
 */
export function webhookUrlRefusal(url: string, hostAddresses: readonly string[]): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'not a URL';
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) === 0) return null;
  const refused = webhookAddressRefusal(host, hostAddresses);
  return refused === null ? null : `${host} ${refused}`;
}
