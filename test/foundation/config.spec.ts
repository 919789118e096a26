import { readFileSync } from 'node:fs';
import { ConfigError, GATEWAY_VARIABLES, loadConfig, misspelledVariables } from '#payments/composition';
import { ManualClock } from '#platform/clock';
import { startProcess } from '../support/gateway-process';

describe('configuration from the environment', () => {
  it('has working defaults for a fresh machine', () => {
    expect(loadConfig({})).toEqual({
      host: '127.0.0.1',
      port: 3000,
      databaseUrl: null,
      dataDir: './data',
      eventStore: 'postgres',
      eventStoreConnectionString: null,
      adminToken: null,
      clock: 'system',
      publicUrl: null,
      rateLimitPerSecond: 60,
      pollIntervalSeconds: 3,
      refundProcessingSeconds: 10,
      usdtRubRate: 9500,
      payoutTerms: {
        sbp: { feePct: 10_000, min: 10_000 },
        usdt_trc20: { feePct: 20_000, min: 10_000 },
        usdt_bep20: { feePct: 15_000, min: 10_000 },
      },
      webhookAllowPrivateNetworks: false,
      metricsPort: null,
      secretsKeys: null,
      auditSigningKey: null,
      authFailureLimitPerAddress: 20,
      authFailureLimitOverall: 300,
      trustedProxies: [],
      webhookRetentionDays: 30,
      logLevel: null,
    });
  });

  it('reads the security settings', () => {
    const hex = 'ab'.repeat(32);
    const base64 = Buffer.alloc(32, 7).toString('base64');
    const config = loadConfig({
      ADMIN_TOKEN: 'o'.repeat(32),
      SECRETS_KEY: `${hex}, ${base64}`,
      AUTH_FAILURE_LIMIT_PER_ADDRESS: '5',
      AUTH_FAILURE_LIMIT_OVERALL: '50',
      TRUSTED_PROXIES: '10.0.0.0/8, 172.18.0.2,fd00::/8, ::ffff:10.0.0.0/104',
      WEBHOOK_RETENTION_DAYS: '7',
    });
    expect(config).toMatchObject({
      adminToken: 'o'.repeat(32),
      secretsKeys: [Buffer.from(hex, 'hex'), Buffer.alloc(32, 7)],
      authFailureLimitPerAddress: 5,
      authFailureLimitOverall: 50,
      trustedProxies: ['10.0.0.0/8', '172.18.0.2', 'fd00::/8', '::ffff:10.0.0.0/104'],
      webhookRetentionDays: 7,
    });
  });

  it.each([
    'postgres://u:p@db:5432/gw',
    'postgresql://db/gw',
    'postgres://u:p@[::1]:65535/gw',
    'postgres://u:p%40ss@127.0.0.1/gw?sslmode=require',
    // An empty host: pg takes the socket directory from ?host=.
    'postgres://u:p@/gw?host=/var/run/postgresql',
  ])('takes DATABASE_URL %s', (url) => {
    expect(loadConfig({ DATABASE_URL: url }).databaseUrl).toBe(url);
  });

  it.each([
    ['https://pay.example.com', 'https://pay.example.com'],
    ['https://pay.example.com:8443/gateway/', 'https://pay.example.com:8443/gateway'],
    ['http://[::1]:65535', 'http://[::1]:65535'],
    ['http://127.0.0.1:3000/', 'http://127.0.0.1:3000'],
    ['https://pay.example.com/a//b///', 'https://pay.example.com/a//b'],
  ])('takes PUBLIC_URL %s', (url, publicUrl) => {
    expect(loadConfig({ PUBLIC_URL: url }).publicUrl).toBe(publicUrl);
  });

  it('does not repeat a refused DATABASE_URL (it holds a password)', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u:s3cret-pa55@[::1/gw' })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u:s3cret-pa55@[::1/gw' })).not.toThrow('s3cret-pa55');
  });

  it('takes WEBHOOK_RETENTION_DAYS up to 36500 (100 years)', () => {
    expect(loadConfig({ WEBHOOK_RETENTION_DAYS: '36500' }).webhookRetentionDays).toBe(36_500);
  });

  it('takes an ADMIN_TOKEN of any visible ASCII characters, trimmed of surrounding whitespace', () => {
    const token = `${'Aa0'.repeat(10)}-._~+/=!#$%&'*^|:;<>?@[]{}()"\\,\``;
    expect(loadConfig({ ADMIN_TOKEN: ` \t${token}\n` }).adminToken).toBe(token);
  });

  it('reads the money-out and webhook settings', () => {
    const config = loadConfig({
      REFUND_PROCESSING_SECONDS: '0',
      USDT_RUB_RATE: '92.45',
      PAYOUT_TERMS: '{"sbp": {"feePct": "0.50", "min": "500.00"}, "usdt_bep20": {"min": "250.00"}}',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'TRUE',
    });
    expect(config).toMatchObject({
      refundProcessingSeconds: 0,
      usdtRubRate: 9245,
      payoutTerms: {
        sbp: { feePct: 5_000, min: 50_000 },
        usdt_trc20: { feePct: 20_000, min: 10_000 },
        usdt_bep20: { feePct: 15_000, min: 25_000 },
      },
      webhookAllowPrivateNetworks: true,
    });
  });

  it('reads every variable', () => {
    const config = loadConfig({
      HOST: '0.0.0.0',
      PORT: '8080',
      DATABASE_URL: 'postgres://u:p@db:5432/gw',
      DATA_DIR: '/var/lib/gw',
      EVENT_STORE: 'eventstoredb',
      EVENTSTORE_CONNECTION_STRING: 'esdb://localhost:2113?tls=false',
      ADMIN_TOKEN: 'a-very-long-operator-token-of-32-chars',
      CLOCK: 'manual',
      LOG_LEVEL: 'debug',
    });
    expect(config).toMatchObject({ host: '0.0.0.0', port: 8080, eventStore: 'eventstoredb', clock: 'manual', dataDir: '/var/lib/gw', logLevel: 'debug' });
    expect(loadConfig({ LOG_LEVEL: ' ' }).logLevel).toBeNull();
  });

  it.each([
    [{ PORT: 'abc' }, 'PORT must be an integer from 0 to 65535'],
    [{ HOST: 'every interface' }, 'HOST must be an IP address or a host name to listen on'],
    [{ HOST: 'http://0.0.0.0' }, 'HOST must be an IP address or a host name to listen on'],
    // Mistyped addresses: failed at listen (ENOTFOUND, exit 1) after the database was opened.
    [{ HOST: '999.1.1.1' }, 'HOST must be an IP address or a host name to listen on'],
    [{ HOST: '10.0.0' }, 'HOST must be an IP address or a host name to listen on'],
    [{ PORT: '70000' }, 'PORT must be an integer from 0 to 65535'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL must be a PostgreSQL connection URL'],
    // Accepted before, then "Invalid URL" from pg, exit 1, after DATA_DIR and secrets.key were made.
    [{ DATABASE_URL: 'postgres://u:p@127.0.0.1:abc/gw' }, 'DATABASE_URL must be a PostgreSQL connection URL'],
    [{ DATABASE_URL: 'postgres://u:p@[::1/gw' }, 'DATABASE_URL must be a PostgreSQL connection URL'],
    [{ DATABASE_URL: 'postgresql://u:p@db:65536/gw' }, 'DATABASE_URL must be a PostgreSQL connection URL'],
    [{ DATABASE_URL: 'postgres://u:p@db:0/gw' }, 'DATABASE_URL must be a PostgreSQL connection URL'],
    [{ EVENT_STORE: 'kafka' }, 'EVENT_STORE must be "postgres" or "eventstoredb", got "kafka"'],
    [{ EVENT_STORE: 'eventstoredb' }, 'EVENT_STORE=eventstoredb needs EVENTSTORE_CONNECTION_STRING'],
    [
      { EVENT_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: 'http://x' },
      'EVENTSTORE_CONNECTION_STRING must be a connection string the EventStoreDB client accepts',
    ],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN must be at least 32 characters'],
    [{ ADMIN_TOKEN: 'o'.repeat(31) }, 'ADMIN_TOKEN must be at least 32 characters'],
    // Accepted at start before, then no request could present it (Bearer \S+, a header of bytes): 401 for ever.
    [{ ADMIN_TOKEN: 'abcdefghij abcdefghij abcdefghij xyz' }, 'ADMIN_TOKEN must be printable ASCII without spaces'],
    [{ ADMIN_TOKEN: 'abcdefghij\tabcdefghij\tabcdefghij' }, 'ADMIN_TOKEN must be printable ASCII without spaces'],
    [{ ADMIN_TOKEN: 'пароль-оператора-шлюза-достаточно-длинный' }, 'ADMIN_TOKEN must be printable ASCII without spaces'],
    [{ SECRETS_KEY: 'too-short' }, 'SECRETS_KEY must be 32 random bytes'],
    [{ SECRETS_KEY: `${'ab'.repeat(32)},${'ab'.repeat(31)}` }, 'SECRETS_KEY must be 32 random bytes'],
    [{ AUTH_FAILURE_LIMIT_PER_ADDRESS: '0' }, 'AUTH_FAILURE_LIMIT_PER_ADDRESS must be a positive integer'],
    [{ AUTH_FAILURE_LIMIT_OVERALL: 'many' }, 'AUTH_FAILURE_LIMIT_OVERALL must be a positive integer'],
    [{ TRUSTED_PROXIES: 'nginx' }, 'TRUSTED_PROXIES must be IP addresses or CIDR ranges'],
    [{ TRUSTED_PROXIES: '10.0.0.0/33' }, 'TRUSTED_PROXIES must be IP addresses or CIDR ranges'],
    // Accepted before, then Fastify refused it once the database was up: exit 1, the variable unnamed.
    [{ TRUSTED_PROXIES: '0.0.0.0/0' }, `TRUSTED_PROXIES must list the proxies' addresses or ranges, not a /0 range ("0.0.0.0/0")`],
    [{ TRUSTED_PROXIES: '10.0.0.1, ::/00' }, `TRUSTED_PROXIES must list the proxies' addresses or ranges, not a /0 range ("::/00")`],
    // proxy-addr compares an IPv4 peer with an IPv4-mapped range as ::ffff:a.b.c.d: these trusted every IPv4 client (review 65).
    ...['::ffff:0.0.0.0/96', '::ffff:0:0/96', '::FFFF:0:0/096'].map((range): [Record<string, string>, string] => [
      { TRUSTED_PROXIES: `10.0.0.1,${range}` },
      `TRUSTED_PROXIES must list the proxies' addresses or ranges, not one that holds every IPv4 address ("${range}")`,
    ]),
    [{ WEBHOOK_RETENTION_DAYS: '0' }, 'WEBHOOK_RETENTION_DAYS must be a positive integer'],
    // Accepted before, then every retention sweep failed: now minus the period is no timestamp PostgreSQL or JavaScript takes.
    [{ WEBHOOK_RETENTION_DAYS: '999999999' }, 'WEBHOOK_RETENTION_DAYS must be a positive integer of at most 36500'],
    [{ WEBHOOK_RETENTION_DAYS: '2500000' }, 'WEBHOOK_RETENTION_DAYS must be a positive integer of at most 36500'],
    [{ WEBHOOK_RETENTION_DAYS: '36501' }, 'WEBHOOK_RETENTION_DAYS must be a positive integer of at most 36500'],
    [{ CLOCK: 'fast' }, 'CLOCK must be "system" or "manual", got "fast"'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    [{ LOG_LEVEL: 'INFO' }, 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "INFO"'],
    [{ PUBLIC_URL: 'ftp://x' }, 'PUBLIC_URL must be an http(s) URL'],
    // Accepted before: every invoice then carried a url no browser opens.
    [{ PUBLIC_URL: 'https://pay.example.com:99999' }, 'PUBLIC_URL must be an http(s) URL'],
    [{ PUBLIC_URL: 'https://[::1' }, 'PUBLIC_URL must be an http(s) URL'],
    [{ PUBLIC_URL: 'http://pay.example.com:0' }, 'PUBLIC_URL must be an http(s) URL'],
    [{ PUBLIC_URL: 'https://999.1.1.1' }, 'PUBLIC_URL must be an http(s) URL'],
    [{ RATE_LIMIT_PER_SECOND: '0' }, 'RATE_LIMIT_PER_SECOND must be a positive integer'],
    [{ POLL_INTERVAL_SECONDS: '-1' }, 'POLL_INTERVAL_SECONDS must be a whole number of seconds'],
    [{ REFUND_PROCESSING_SECONDS: 'soon' }, 'REFUND_PROCESSING_SECONDS must be a whole number of seconds'],
    [{ USDT_RUB_RATE: '0' }, 'USDT_RUB_RATE must be rubles per 1 USDT'],
    [{ USDT_RUB_RATE: '95.123' }, 'USDT_RUB_RATE must be rubles per 1 USDT'],
    // Each message names what is wrong where, after the form the value takes.
    [
      { PAYOUT_TERMS: '{"card": {"min": "1.00"}}' },
      'PAYOUT_TERMS must be JSON like {"sbp": {"feePct": "1.00", "min": "100.00"}}: unknown method "card" (methods: sbp, usdt_trc20, usdt_bep20)',
    ],
    [{ PAYOUT_TERMS: '{"sbp": {"feePct": "abc"}}' }, 'sbp.feePct must be a percentage below 100 such as "1.00", got "abc"'],
    [{ PAYOUT_TERMS: '{"sbp": {"feePct": "100.00"}}' }, 'sbp.feePct must be a percentage below 100 such as "1.00", got "100.00"'],
    [{ PAYOUT_TERMS: '{"usdt_trc20": {"min": "0.00"}}' }, 'usdt_trc20.min must be an amount above zero such as "100.00", got "0.00"'],
    [{ PAYOUT_TERMS: '{"sbp": {"min": "-5.00"}}' }, 'sbp.min must be an amount above zero such as "100.00", got "-5.00"'],
    [{ PAYOUT_TERMS: 'not json' }, 'PAYOUT_TERMS must be JSON like {"sbp": {"feePct": "1.00", "min": "100.00"}}: it is not JSON'],
    [{ PAYOUT_TERMS: '[]' }, 'PAYOUT_TERMS must be JSON like {"sbp": {"feePct": "1.00", "min": "100.00"}}: it is not an object'],
    // A misspelt field would leave the default fee in force unseen.
    [{ PAYOUT_TERMS: '{"sbp": {"fee_pct": "0.50"}}' }, 'sbp has "fee_pct"; its fields are feePct and min'],
    [{ PAYOUT_TERMS: '{"sbp": {"feePct": "0.50", "max": "1.00"}}' }, 'sbp has "max"; its fields are feePct and min'],
    [{ PAYOUT_TERMS: '{"sbp": []}' }, 'sbp is not an object'],
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'yes' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS must be "true" or "false"'],
  ])('refuses %j with a message naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  describe('EVENTSTORE_CONNECTION_STRING: exactly what @eventstore/db-client accepts', () => {
    const withString = (value: string) => ({ EVENT_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: value });

    it.each([
      'esdb://localhost:2113?tls=false',
      'esdb://localhost',
      'esdb://localhost:2113/',
      'esdb://admin:changeit@localhost:2113?tls=false&defaultDeadline=5000',
      'esdb://admin:changeit@node1:2113,node2:2113,node3:2113?nodePreference=leader',
      'esdb+discover://admin:changeit@cluster.example.com:2113?tls=true',
      'esdb://localhost:2113?TLS=false&keepAliveInterval=10000',
    ])('accepts %s', (value) => {
      expect(loadConfig(withString(value)).eventStoreConnectionString).toBe(value);
    });

    it.each([
      ['kurrentdb://localhost:2113?tls=false', 'at character 1: expected esdb:// or esdb+discover://'],
      ['kdb://localhost:2113', 'at character 1: expected esdb:// or esdb+discover://'],
      ['kurrentdb+discover://cluster.example.com:2113', 'at character 1: expected esdb:// or esdb+discover://'],
      ['esdb:/localhost:2113', 'expected esdb:// or esdb+discover://'],
      ['esdb://localhost:twenty', 'expected port number'],
      ['esdb://localhost:2113?tls=maybe', 'expected true or false'],
      ['esdb://localhost:2113?nodePreference=nearest', 'expected leader or follower or read_only_replica or random'],
      ['esdb://localhost:2113?tls=false&defaultDeadline=0', 'Invalid defaultDeadline "0"'],
      ['esdb://localhost:2113?tlsCAFile=/no/such/ca.crt', 'Failed to load certificate file'],
    ])('refuses %s with the client’s reason', (value, reason) => {
      expect(() => loadConfig(withString(value))).toThrow(ConfigError);
      expect(() => loadConfig(withString(value))).toThrow('EVENTSTORE_CONNECTION_STRING must be a connection string the EventStoreDB client accepts');
      expect(() => loadConfig(withString(value))).toThrow(reason);
    });

    it('does not repeat the text of a refused connection string (it may hold a password)', () => {
      const problem = (() => {
        try {
          loadConfig(withString('kurrentdb://admin:s3cret-pa55@localhost:2113'));
        } catch (error) {
          return (error as ConfigError).problems.join('\n');
        }
        return '';
      })();
      expect(problem).toContain('EVENTSTORE_CONNECTION_STRING');
      expect(problem).not.toContain('s3cret-pa55');
    });

    it('a gateway started with one stops at once with the message and exit code 2', async () => {
      const proc = startProcess('gateway', {
        EVENT_STORE: 'eventstoredb',
        EVENTSTORE_CONNECTION_STRING: 'kurrentdb://localhost:2113?tls=false',
        // Never reached: the configuration is refused before any connection.
        DATABASE_URL: 'postgres://nobody:nothing@127.0.0.1:9/none',
      });
      expect(await proc.exited).toBe(2);
      expect(proc.output()).toContain('EVENTSTORE_CONNECTION_STRING must be a connection string the EventStoreDB client accepts');
    });
  });

  // The driver's own text ("connect ECONNREFUSED 127.0.0.1:9") named no variable to change.
  it('a gateway whose DATABASE_URL is not reached exits 1 naming DATABASE_URL and the database, not its password', async () => {
    const proc = startProcess('gateway', { DATABASE_URL: 'postgres://nobody:s3cret-pa55@127.0.0.1:9/none' });
    expect(await proc.exited).toBe(1);
    expect(proc.output()).toContain('(DATABASE_URL: the database 127.0.0.1:9/none was not reached)\n');
    expect(proc.output()).not.toContain('s3cret-pa55');
  });

  // CLOK=manual ran the gateway on the system clock without a word (and PROT=8080 on port 3000).
  describe('a variable that looks misspelt', () => {
    it('is named with the one meant: a letter added, dropped, changed or swapped, or another case; others are not', () => {
      const env = {
        CLOK: 'manual',
        PROT: '8080',
        DATA_DIRR: '/d',
        WEBHOOK_ALLOW_PRIVATE_NETWORK: 'true',
        port: '1',
        LOGLEVEL: 'info',
        HOME: '/root',
        PATH: '/bin',
        PWD: '/',
        TZ: 'UTC',
        PORT: '3000',
        // Set by Marathon and Mesos for every task (review 65: each was named as a misspelt PORT or HOST).
        PORT0: '31000',
        PORT1: '31001',
        PORTS: '31000,31001',
        HOST0: '10.0.0.5',
      };
      expect(misspelledVariables(env)).toEqual([
        ['CLOK', 'CLOCK'],
        ['PROT', 'PORT'],
        ['DATA_DIRR', 'DATA_DIR'],
        ['WEBHOOK_ALLOW_PRIVATE_NETWORK', 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
        ['port', 'PORT'],
        ['LOGLEVEL', 'LOG_LEVEL'],
      ]);
    });

    it('is looked for among exactly the variables the gateway reads, which configuration.md lists', () => {
      const read = new Set<string>();
      loadConfig(
        new Proxy({ EVENT_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: 'esdb://localhost:2113?tls=false' } as Record<string, string | undefined>, {
          get: (target, name: string) => (read.add(name), target[name]),
        }),
      );
      expect([...read].sort()).toEqual([...GATEWAY_VARIABLES, 'AUDIT_CHECKPOINT_KEY'].sort());
      const documented = [...readFileSync('docs/configuration.md', 'utf8').matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
      expect(documented.sort()).toEqual([...GATEWAY_VARIABLES].sort());
    });

    it('a gateway started with one says so on stderr', async () => {
      const proc = startProcess('gateway', { CLOK: 'manual', DATABASE_URL: 'postgres://nobody:nothing@127.0.0.1:9/none' });
      expect(await proc.exited).toBe(1);
      expect(proc.output()).toContain('gateway: CLOK is not read (did you mean CLOCK?)\n');
    });

    // Review 65: the hint came only with a configuration that loaded; here the misspelling is why it does not.
    it('a gateway refused for a variable it lacks names the misspelt one given', async () => {
      const proc = startProcess('gateway', { EVENT_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRNG: 'esdb://localhost:2113?tls=false' });
      expect(await proc.exited).toBe(2);
      expect(proc.output()).toContain('gateway: EVENTSTORE_CONNECTION_STRNG is not read (did you mean EVENTSTORE_CONNECTION_STRING?)\n');
    });
  });

  it('a gateway with TRUSTED_PROXIES=0.0.0.0/0 stops before the database with the message and exit code 2', async () => {
    // Never reached: the configuration is refused before any connection.
    const proc = startProcess('gateway', { TRUSTED_PROXIES: '0.0.0.0/0', DATABASE_URL: 'postgres://nobody:nothing@127.0.0.1:9/none' });
    expect(await proc.exited).toBe(2);
    expect(proc.output()).toContain('it would believe the X-Forwarded-For of every peer');
  });

  // pino refused the level with a stack trace before the configuration was read.
  it.each(['gateway', 'ledger-verify'] as const)('%s with LOG_LEVEL=loud stops with the message and exit code 2', async (entry) => {
    const proc = startProcess(entry, { LOG_LEVEL: 'loud', DATABASE_URL: 'postgres://nobody:nothing@127.0.0.1:9/none' });
    expect(await proc.exited).toBe(2);
    expect(proc.output()).toBe(
      `${entry === 'gateway' ? 'gateway' : 'ledger:verify'}: Invalid configuration:\n  - LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"\n`,
    );
  });

  it('lists every problem at once', () => {
    try {
      loadConfig({ PORT: 'x', CLOCK: 'y' });
      throw new Error('expected a ConfigError');
    } catch (error) {
      expect((error as ConfigError).problems).toHaveLength(2);
    }
  });
});

describe('manual clock', () => {
  it('is real time plus an offset that only moves forward', () => {
    let real = 1_000_000;
    const clock = new ManualClock(() => real);
    expect(clock.now().getTime()).toBe(1_000_000);
    clock.setOffset(60_000);
    real += 5;
    expect(clock.now().getTime()).toBe(1_060_005);
    clock.setOffset(10_000);
    expect(clock.offsetMilliseconds).toBe(60_000);
  });
});
