/**
 * The gateway's configuration: environment variables (`PORTICO_*`) read through Effect's Config,
 * overridable by command-line flags. Every default is the embedded one, so `npm start` needs none.
 */
import { Config, ConfigError, Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { parseCidrs } from "../../domain/AddressRanges.js"
import { derivedNodeId } from "../../domain/NodeStamp.js"
import { loadNodeKey } from "./NodeKey.js"
import { DEFAULT_PENDING_DOMAINS_PER_NAMESPACE } from "../../domain/CustomDomainRules.js"
import { testDirectory } from "../TestLayer.js"
import { defaultProxySettings, proxyConfig, type ProxySettings } from "./ProxySettings.js"
import { defaultPubSubSettings, pubSubConfig, type PubSubSettings } from "./PubSubSettings.js"
import { defaultFunctionSettings, functionConfig, type FunctionSettings } from "./FunctionSettings.js"
import { defaultVaultSettings, vaultConfig, type VaultSettings } from "./VaultSettings.js"
import { defaultWebRtcSettings, webRtcConfig, type WebRtcSettings } from "./WebRtcSettings.js"
import { defaultMembershipSettings, membershipConfig, type MembershipSettings } from "./MembershipSettings.js"
import { backupConfig, defaultBackupSettings, type BackupSettings } from "./BackupSettings.js"
import { defaultDeploymentSettings, deploymentConfig, type DeploymentSettings } from "./DeploymentSettings.js"
import { noTestPauses, testPausesConfig, type TestPauses } from "./TestPauses.js"
import { parseDnsServers, parseListenAddress, parseRedisMap, parseUrlMap } from "./AddressLists.js"
import { NO_TRUSTED_PROXIES, parseTrustedProxies, type TrustedProxies } from "./TrustedProxies.js"

export interface RateLimitSetting {
  /** Sustained requests per second. */
  readonly rps: number
  /** Bucket size: how many requests may arrive at once. */
  readonly burst: number
}

export interface PorticoSettings {
  readonly host: string
  readonly port: number
  readonly dataDir: string
  readonly baseDomain: string
  /** Where the platform registry lives: an embedded SQLite file, or an rqlite cluster. */
  readonly registry:
    | { readonly engine: "sqlite"; readonly file: string }
    | {
        readonly engine: "rqlite"
        readonly url: string
        readonly user: string | undefined
        readonly password: Redacted.Redacted | undefined
      }
  /** Root secret; when unset the gateway keeps one in `<dataDir>/secret.key`. */
  readonly secret: Redacted.Redacted | undefined
  /** Default body cap for routes that take a JSON body. */
  readonly maxBodyBytes: number
  /** How much request body may be in flight, and how slowly it may come (docs/api.md, "Request bodies and slow clients"). */
  readonly bodies: BodySettings
  readonly rateLimit: {
    readonly enabled: boolean
    readonly perClientNetwork: RateLimitSetting
    readonly perNamespace: RateLimitSetting
    /** Sign-in attempts (challenge, verify) per wallet. */
    readonly perWallet: RateLimitSetting
  }
  /** Wallets on the operator list. */
  readonly operators: ReadonlyArray<string>
  readonly logRequests: boolean
  /**
   * Whether the listener answers its hottest routes on the spot (src/api/FastLane.ts). On by
   * default; off serves every request through the HttpApi app, which answers the same.
   */
  readonly fastLane: boolean
  /** The cache: the embedded LRU (bounded per namespace) or a Redis/Valkey server. */
  readonly cache: {
    readonly maxBytesPerNamespace: number
    readonly redisUrl: string | undefined
    /** Namespaces with a Redis deployment of their own (their bound is its maxmemory). */
    readonly redisOverrides: ReadonlyMap<string, string>
  }
  /** This gateway's node id: the home node recorded for node-local databases. */
  readonly nodeId: string
  readonly sql: SqlSettings
  readonly storage: StorageSettings
  /**
   * The other gateways of the cluster, node id → base URL, reached on their private overlay with
   * a coordination MAC: node-local database requests are forwarded to the home node, and a
   * privacy delete asks every peer to evict.
   */
  readonly peers: ReadonlyMap<string, string>
  /**
   * Outbound calls to hosts a tenant chose (src/layers/egress/GuardedFetch.ts): ranges exempted
   * from its refusal of loopback, private and reserved addresses (`PORTICO_EGRESS_ALLOW_CIDRS`,
   * comma-separated CIDRs; none by default).
   */
  readonly egress: { readonly allowCidrs: ReadonlyArray<string> }
  /**
   * How long a push topic registration lives (`PORTICO_PUSH_TOPIC_LIFETIME_SECONDS`): spec §8's
   * 7 days by default, the expiry rounded up to a whole UTC day; a lifetime under a day (tests)
   * is not rounded (docs/push.md).
   */
  readonly pushTopicLifetimeSeconds: number
  /**
   * How many push device registrations one user (subject) may hold in a namespace
   * (`PORTICO_PUSH_MAX_DEVICES_PER_USER`, default 10,000): a registration past it is refused
   * with 400, re-registering a held device id always passes (docs/push.md).
   */
  readonly pushMaxDevicesPerUser: number
  /**
   * How long a gateway keeps a namespace's push credentials (`PORTICO_PUSH_CREDENTIAL_CACHE_SECONDS`,
   * 1-30, default 30): spec §8 says a replaced key takes effect within 30 s on every gateway, so
   * longer is refused at start; shorter trades registry reads for a faster change.
   */
  readonly pushCredentialCacheSeconds: number
  /**
   * Where push goes that the operator chose (trusted, not through the egress guard, docs/push.md):
   * `PORTICO_APNS_URL` replaces both of Apple's hosts (test setups), `PORTICO_EXPO_URL` Expo's
   * host, `PORTICO_PUSH_RELAY_URL` (with `PORTICO_PUSH_RELAY_TOKEN`) is the platform ntfy relay.
   * Each is undefined when not set: Apple's and Expo's public hosts, and no platform relay.
   */
  readonly push: PushSettings
  /** The anonymity proxy: its SOCKS5 upstream and limits (`PORTICO_PROXY_*`, docs/proxy.md). */
  readonly proxy: ProxySettings
  /** Publish/subscribe: its engine and limits (`PORTICO_PUBSUB_*`, docs/pubsub.md). */
  readonly pubsub: PubSubSettings
  /** Functions: the runner and their limits (`PORTICO_FUNCTIONS_*`, docs/functions.md). */
  readonly functions: FunctionSettings
  /** The vault: its limits and deadlines (`PORTICO_VAULT_*`, docs/vault.md). */
  readonly vault: VaultSettings
  /** Real-time media: the TURN servers and their shared secret (`PORTICO_TURN_*`, docs/webrtc.md). */
  readonly webrtc: WebRtcSettings
  /** The cluster's membership: heartbeats and this node's internal URL (`PORTICO_NODE_*`, docs/cluster.md). */
  readonly membership: MembershipSettings
  /** Namespace backup caps (`PORTICO_BACKUP_*`, docs/namespaces.md "Backup and restore"). */
  readonly backup: BackupSettings
  /** Ports, bounds, public URL and supervisor timings of deployments (config/DeploymentSettings.ts). */
  readonly deployments: DeploymentSettings
  /** Pauses for tests alone, 0 otherwise (config/TestPauses.ts). */
  readonly testPauses: TestPauses
  /**
   * The DNS servers custom domains are verified against (`PORTICO_DNS_SERVERS`, comma-separated
   * `ip`, `ip:port` or `[ipv6]:port`); empty, the default, asks the system's resolvers
   * (docs/deployments.md, "Custom domains").
   */
  readonly dnsServers: ReadonlyArray<string>
  /**
   * Where this node answers DNS for the edge's DNS-01 challenges (`PORTICO_ACME_DNS`, `ip:port` or
   * `[ipv6]:port`, UDP and TCP; docs/edge.md "The wildcard certificate"); unset, the default, it
   * does not.
   */
  readonly acmeDns: { readonly host: string; readonly port: number } | undefined
  /**
   * Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` name the client
   * (`PORTICO_TRUSTED_PROXIES`, comma-separated addresses or CIDR ranges; none by default): the
   * edge in front of the gateway (config/TrustedProxies.ts, docs/edge.md).
   */
  readonly trustedProxies: TrustedProxies
  /**
   * Unverified custom domain claims one namespace may hold at once
   * (`PORTICO_DOMAINS_PENDING_PER_NAMESPACE`, default 50): an add past it is refused with 400.
   */
  readonly domainsPendingPerNamespace: number
}

export interface PushSettings {
  readonly apnsUrl: string | undefined
  readonly expoUrl: string | undefined
  readonly relayUrl: string | undefined
  readonly relayToken: string | undefined
}

export interface BodySettings {
  /** Body bytes one client network (the rate limiter's) may have in flight at once; 429 past it. */
  readonly inFlightPerNetworkBytes: number
  /** Body bytes the whole process may have in flight at once; 503 past it. */
  readonly inFlightBytes: number
  /** A body slower than this over a whole window is cut (408). */
  readonly minBytesPerSecond: number
  /** The window the rate is judged over; the first one is the grace a body gets to start. */
  readonly rateWindowMs: number
  /** A JSON body (read whole, within its cap) must have arrived this long after its headers. */
  readonly jsonDeadlineMs: number
}

export interface StorageSettings {
  /** Largest single upload (the file's bytes); 413 past it. */
  readonly maxUploadBytes: number
  /** Bytes of distinct content one namespace may hold; 413 past it. */
  readonly quotaBytes: number
  /** How often blocks no pin reaches are reclaimed. */
  readonly sweepIntervalMs: number
  /**
   * The cluster engine: a Kubo node's RPC API and an IPFS Cluster REST API. Unset: the embedded
   * blockstore under `<dataDir>/blocks`.
   */
  readonly cluster:
    | { readonly kuboUrl: string; readonly clusterUrl: string }
    | undefined

}

export interface SqlSettings {
  /** Worker processes running tenant SQL on SQLite files. */
  readonly workers: number
  /** A statement running longer is stopped. */
  readonly timeoutMs: number
  /** Largest answer one query may build. */
  readonly maxResultBytes: number
  /** `/v1/rqlite/import` cap on a namespace gateway. */
  readonly importMaxBytes: number
  /** Budget of one import, export or backup holding the transfer slot. */
  readonly transferBudgetMs: number
  /** Namespaces whose cluster SQL store is an rqlite cluster (others use embedded files). */
  readonly rqlite: ReadonlyMap<string, string>
}

export class PorticoConfig extends Context.Tag("portico/PorticoConfig")<PorticoConfig, PorticoSettings>() {
  /** Settings from the environment, with `overrides` (flags) taking precedence. */
  static readonly fromEnv = (overrides: Partial<Pick<PorticoSettings, "host" | "port" | "dataDir">> = {}) =>
    Layer.effect(PorticoConfig, load(overrides))

  /** Settings given directly (tests). */
  static readonly layer = (settings: PorticoSettings) => Layer.succeed(PorticoConfig, settings)

  /** `testSettings` on a data directory of its own, removed with the layer. */
  static readonly Test = Layer.scoped(
    PorticoConfig,
    Effect.map(testDirectory("data"), (dir) => testSettings(dir))
  )
}

/**
 * A count, size or duration: zero or less would not mean "off" but break the thing it sizes (a
 * zero-byte cache drops every entry, zero workers run nothing), so it is refused at start.
 */
const positiveInteger = (name: string) =>
  Config.integer(name).pipe(Config.validate({ message: "expected a positive integer", validation: (n) => n > 0 }))

const load = (overrides: Partial<Pick<PorticoSettings, "host" | "port" | "dataDir">>) =>
  Effect.gen(function* () {
    const env = Config.nested("PORTICO")
    const host = overrides.host ?? (yield* env(Config.string("HOST")).pipe(Config.withDefault("127.0.0.1")))
    const port = overrides.port ?? (yield* env(Config.port("PORT")).pipe(Config.withDefault(6001)))
    const dataDir = path.resolve(overrides.dataDir ?? (yield* env(Config.string("DATA_DIR")).pipe(Config.withDefault("./data"))))
    const baseDomain = yield* env(Config.string("BASE_DOMAIN")).pipe(Config.withDefault("portico.localhost"))
    // what a join handed this node (`portico serve --join`); the environment's settings win
    const joined = readJoinedSettings(dataDir)
    const rqliteUrl = Option.orElse(yield* env(Config.option(Config.url("RQLITE_URL"))), () => Option.fromNullable(joined?.registry.url).pipe(Option.map((u) => new URL(u))))
    const rqliteUser = Option.orElse(yield* env(Config.option(Config.string("RQLITE_USER"))), () => Option.fromNullable(joined?.registry.user))
    const rqlitePassword = Option.orElse(yield* env(Config.option(Config.redacted("RQLITE_PASSWORD"))), () =>
      Option.fromNullable(joined?.registry.password).pipe(Option.map(Redacted.make))
    )
    const secret = yield* env(Config.option(Config.redacted("SECRET")))
    const maxBodyBytes = yield* env(positiveInteger("MAX_BODY_BYTES")).pipe(Config.withDefault(4 * 1024 * 1024))
    const inFlightPerNetwork = yield* env(positiveInteger("BODY_INFLIGHT_NETWORK_BYTES")).pipe(Config.withDefault(64 * 1024 * 1024))
    const inFlight = yield* env(positiveInteger("BODY_INFLIGHT_BYTES")).pipe(Config.withDefault(256 * 1024 * 1024))
    const minBodyRate = yield* env(positiveInteger("BODY_MIN_BYTES_PER_SECOND")).pipe(Config.withDefault(1024))
    const bodyWindowMs = yield* env(positiveInteger("BODY_RATE_WINDOW_MS")).pipe(Config.withDefault(5_000))
    const jsonDeadlineMs = yield* env(positiveInteger("BODY_DEADLINE_MS")).pipe(Config.withDefault(30_000))
    const rateLimitEnabled = yield* env(Config.boolean("RATE_LIMIT")).pipe(Config.withDefault(true))
    const clientRps = yield* env(positiveInteger("RATE_LIMIT_CLIENT_RPS")).pipe(Config.withDefault(100))
    const clientBurst = yield* env(positiveInteger("RATE_LIMIT_CLIENT_BURST")).pipe(Config.withDefault(200))
    const nsRps = yield* env(positiveInteger("RATE_LIMIT_NAMESPACE_RPS")).pipe(Config.withDefault(1000))
    const nsBurst = yield* env(positiveInteger("RATE_LIMIT_NAMESPACE_BURST")).pipe(Config.withDefault(2000))
    const walletRps = yield* env(positiveInteger("RATE_LIMIT_WALLET_RPS")).pipe(Config.withDefault(1))
    const walletBurst = yield* env(positiveInteger("RATE_LIMIT_WALLET_BURST")).pipe(Config.withDefault(20))
    const operators = yield* env(Config.array(Config.string(), "OPERATORS")).pipe(Config.withDefault([]))
    const logRequests = yield* env(Config.boolean("LOG_REQUESTS")).pipe(Config.withDefault(true))
    const fastLane = yield* env(Config.boolean("FAST_LANE")).pipe(Config.withDefault(true))
    const cacheMaxBytes = yield* env(positiveInteger("CACHE_MAX_BYTES")).pipe(Config.withDefault(256 * 1024 * 1024))
    const redisUrl = Option.orElse(yield* env(Config.option(Config.string("REDIS_URL"))), () => Option.fromNullable(joined?.redis_url))
    const redisUrls = yield* env(Config.array(Config.string(), "REDIS_URLS")).pipe(Config.withDefault([]))
    const nodeId = yield* env(Config.option(Config.string("NODE_ID")))
    const sqlWorkers = yield* env(positiveInteger("SQL_WORKERS")).pipe(Config.withDefault(2))
    const sqlTimeoutMs = yield* env(positiveInteger("SQL_TIMEOUT_MS")).pipe(Config.withDefault(10_000))
    const sqlMaxResult = yield* env(positiveInteger("SQL_MAX_RESULT_BYTES")).pipe(Config.withDefault(64 * 1024 * 1024))
    const importMax = yield* env(positiveInteger("SQL_IMPORT_MAX_BYTES")).pipe(Config.withDefault(256 * 1024 * 1024))
    const sqlRqlite = yield* env(Config.array(Config.string(), "SQL_RQLITE_URLS")).pipe(Config.withDefault([]))
    const maxUpload = yield* env(positiveInteger("STORAGE_MAX_UPLOAD_BYTES")).pipe(Config.withDefault(1024 * 1024 * 1024))
    const quota = yield* env(positiveInteger("STORAGE_QUOTA_BYTES")).pipe(Config.withDefault(10 * 1024 * 1024 * 1024))
    const sweepSeconds = yield* env(positiveInteger("STORAGE_SWEEP_SECONDS")).pipe(Config.withDefault(6 * 3600))
    const kuboUrl = yield* env(Config.option(Config.url("STORAGE_KUBO_URL")))
    const clusterUrl = yield* env(Config.option(Config.url("STORAGE_CLUSTER_URL")))
    const peers = yield* env(Config.array(Config.string(), "PEERS")).pipe(Config.withDefault([]))
    const egressAllow = yield* env(Config.string("EGRESS_ALLOW_CIDRS")).pipe(Config.withDefault(""))
    const allowCidrs = parseCidrs(egressAllow)
    if (Either.isLeft(allowCidrs)) {
      return yield* Effect.fail(
        ConfigError.InvalidData(["PORTICO", "EGRESS_ALLOW_CIDRS"], `expected comma-separated CIDRs, got "${allowCidrs.left}"`)
      )
    }
    const topicLifetime = yield* env(positiveInteger("PUSH_TOPIC_LIFETIME_SECONDS")).pipe(Config.withDefault(7 * 86_400))
    const maxDevicesPerUser = yield* env(positiveInteger("PUSH_MAX_DEVICES_PER_USER")).pipe(Config.withDefault(10_000))
    const credentialCacheSeconds = yield* env(
      Config.integer("PUSH_CREDENTIAL_CACHE_SECONDS").pipe(
        Config.validate({ message: "expected 1 to 30 seconds (spec: a replaced push key takes effect within 30 s)", validation: (n) => n >= 1 && n <= 30 })
      )
    ).pipe(Config.withDefault(30))
    const apnsUrl = yield* env(Config.option(Config.url("APNS_URL")))
    const expoUrl = yield* env(Config.option(Config.url("EXPO_URL")))
    const relayUrl = yield* env(Config.option(Config.url("PUSH_RELAY_URL")))
    const relayToken = yield* env(Config.option(Config.string("PUSH_RELAY_TOKEN")))
    const dnsServers = yield* env(Config.string("DNS_SERVERS")).pipe(Config.withDefault(""))
    const acmeDns = yield* env(Config.option(Config.string("ACME_DNS")))
    const trustedText = yield* env(Config.string("TRUSTED_PROXIES")).pipe(Config.withDefault(""))
    const trustedProxies = parseTrustedProxies(trustedText.split(","))
    if (typeof trustedProxies === "string") {
      return yield* Effect.fail(ConfigError.InvalidData(["PORTICO", "TRUSTED_PROXIES"], `expected comma-separated addresses or CIDR ranges: ${trustedProxies}`))
    }
    const domainsPending = yield* env(positiveInteger("DOMAINS_PENDING_PER_NAMESPACE")).pipe(
      Config.withDefault(DEFAULT_PENDING_DOMAINS_PER_NAMESPACE)
    )
    if (Option.isSome(kuboUrl) !== Option.isSome(clusterUrl)) {
      return yield* Effect.fail(
        ConfigError.MissingData(["PORTICO", "STORAGE_CLUSTER_URL"], "the storage cluster engine needs both PORTICO_STORAGE_KUBO_URL and PORTICO_STORAGE_CLUSTER_URL")
      )
    }
    const trim = (u: URL) => u.toString().replace(/\/$/, "")
    const settings: PorticoSettings = {
      host,
      port,
      dataDir,
      baseDomain,
      registry: Option.match(rqliteUrl, {
        onNone: () => ({ engine: "sqlite" as const, file: path.join(dataDir, "registry.db") }),
        onSome: (url) => ({
          engine: "rqlite" as const,
          url: url.toString().replace(/\/$/, ""),
          user: Option.getOrUndefined(rqliteUser),
          password: Option.getOrUndefined(rqlitePassword)
        })
      }),
      secret: Option.getOrUndefined(secret),
      maxBodyBytes,
      bodies: {
        inFlightPerNetworkBytes: inFlightPerNetwork,
        inFlightBytes: inFlight,
        minBytesPerSecond: minBodyRate,
        rateWindowMs: bodyWindowMs,
        jsonDeadlineMs
      },
      rateLimit: {
        enabled: rateLimitEnabled,
        perClientNetwork: { rps: clientRps, burst: clientBurst },
        perNamespace: { rps: nsRps, burst: nsBurst },
        perWallet: { rps: walletRps, burst: walletBurst }
      },
      operators: operators.map((w) => w.toLowerCase()).filter((w) => w.length > 0),
      logRequests,
      fastLane,
      cache: {
        maxBytesPerNamespace: cacheMaxBytes,
        redisUrl: Option.getOrUndefined(redisUrl),
        redisOverrides: yield* parseRedisMap(redisUrls, Option.isSome(redisUrl))
      },
      nodeId: Option.getOrElse(nodeId, () => localNodeId(dataDir)),
      sql: {
        workers: sqlWorkers,
        timeoutMs: sqlTimeoutMs,
        maxResultBytes: sqlMaxResult,
        importMaxBytes: importMax,
        transferBudgetMs: 5 * 60_000,
        rqlite: yield* parseUrlMap("SQL_RQLITE_URLS", sqlRqlite)
      },
      storage: {
        maxUploadBytes: maxUpload,
        quotaBytes: quota,
        sweepIntervalMs: sweepSeconds * 1000,
        cluster:
          Option.isSome(kuboUrl) && Option.isSome(clusterUrl)
            ? { kuboUrl: trim(kuboUrl.value), clusterUrl: trim(clusterUrl.value) }
            : undefined
      },
      peers: yield* parseUrlMap("PEERS", peers),
      egress: { allowCidrs: allowCidrs.right.cidrs },
      pushTopicLifetimeSeconds: topicLifetime,
      pushMaxDevicesPerUser: maxDevicesPerUser,
      pushCredentialCacheSeconds: credentialCacheSeconds,
      push: {
        apnsUrl: Option.getOrUndefined(Option.map(apnsUrl, trim)),
        expoUrl: Option.getOrUndefined(Option.map(expoUrl, trim)),
        relayUrl: Option.getOrUndefined(Option.map(relayUrl, trim)),
        relayToken: Option.getOrUndefined(relayToken)
      },
      proxy: yield* proxyConfig,
      pubsub: yield* pubSubConfig(joined?.redis_url),
      functions: yield* functionConfig,
      vault: yield* vaultConfig,
      webrtc: yield* webRtcConfig,
      membership: yield* membershipConfig,
      backup: yield* backupConfig,
      deployments: yield* deploymentConfig,
      testPauses: yield* testPausesConfig,
      dnsServers: yield* parseDnsServers(dnsServers),
      acmeDns: Option.isNone(acmeDns) ? undefined : yield* parseListenAddress(["PORTICO", "ACME_DNS"], acmeDns.value),
      trustedProxies,
      domainsPendingPerNamespace: domainsPending
    }
    return settings
  })

/** Where a joined node keeps the cluster's settings its invite handed it (src/cli/join.ts). */
export const JOINED_FILE = "cluster.json"

interface JoinedFile {
  readonly registry: { readonly url: string; readonly user?: string; readonly password?: string }
  readonly redis_url?: string
}

/** The settings a join wrote into the data directory; none when this node did not join. */
const readJoinedSettings = (dataDir: string): JoinedFile | undefined => {
  let text: string
  try {
    text = readFileSync(path.join(dataDir, JOINED_FILE), "utf8")
  } catch {
    return undefined
  }
  const parsed = JSON.parse(text) as JoinedFile
  if (typeof parsed?.registry?.url !== "string") throw new Error(`${JOINED_FILE} in the data directory is damaged: it names no registry`)
  return parsed
}

/**
 * A node id kept in the data directory, so a restart keeps the databases homed here. A new node's
 * is derived from its key (src/domain/NodeStamp.ts); a data directory of an older release keeps
 * the id it has.
 */
export const localNodeId = (dataDir: string): string => {
  const file = path.join(dataDir, "node-id")
  try {
    return readFileSync(file, "utf8").trim()
  } catch {
    mkdirSync(dataDir, { recursive: true })
    const id = derivedNodeId(loadNodeKey(dataDir).publicKey)
    try {
      writeFileSync(file, id + "\n", { flag: "wx" })
    } catch {
      // another process on this data directory wrote one first: theirs stands
    }
    return readFileSync(file, "utf8").trim()
  }
}

export const defaultBodySettings: BodySettings = {
  inFlightPerNetworkBytes: 64 * 1024 * 1024,
  inFlightBytes: 256 * 1024 * 1024,
  minBytesPerSecond: 1024,
  rateWindowMs: 5_000,
  jsonDeadlineMs: 30_000
}

/** Settings for a test gateway rooted at `dataDir`, with limits that do not get in the way. */
export const testSettings = (dataDir: string, patch: Partial<PorticoSettings> = {}): PorticoSettings => ({
  host: "127.0.0.1",
  port: 0,
  dataDir,
  baseDomain: "portico.test",
  registry: { engine: "sqlite", file: path.join(dataDir, "registry.db") },
  secret: undefined,
  maxBodyBytes: 4 * 1024 * 1024,
  bodies: defaultBodySettings,
  rateLimit: {
    enabled: false,
    perClientNetwork: { rps: 100, burst: 200 },
    perNamespace: { rps: 1000, burst: 2000 },
    perWallet: { rps: 1, burst: 20 }
  },
  operators: [],
  logRequests: false,
  fastLane: true,
  cache: { maxBytesPerNamespace: 256 * 1024 * 1024, redisUrl: undefined, redisOverrides: new Map() },
  nodeId: "test-node",
  sql: {
    workers: 2,
    timeoutMs: 10_000,
    maxResultBytes: 64 * 1024 * 1024,
    importMaxBytes: 256 * 1024 * 1024,
    transferBudgetMs: 5 * 60_000,
    rqlite: new Map()
  },
  storage: {
    maxUploadBytes: 1024 * 1024 * 1024,
    quotaBytes: 10 * 1024 * 1024 * 1024,
    sweepIntervalMs: 6 * 3600_000,
    cluster: undefined
  },
  peers: new Map(),
  egress: { allowCidrs: [] },
  pushTopicLifetimeSeconds: 7 * 86_400,
  pushMaxDevicesPerUser: 10_000,
  pushCredentialCacheSeconds: 30,
  push: { apnsUrl: undefined, expoUrl: undefined, relayUrl: undefined, relayToken: undefined },
  proxy: defaultProxySettings,
  pubsub: defaultPubSubSettings,
  functions: defaultFunctionSettings,
  vault: defaultVaultSettings,
  webrtc: defaultWebRtcSettings,
  membership: defaultMembershipSettings,
  backup: defaultBackupSettings,
  deployments: defaultDeploymentSettings,
  testPauses: noTestPauses,
  dnsServers: [],
  acmeDns: undefined,
  trustedProxies: NO_TRUSTED_PROXIES,
  domainsPendingPerNamespace: DEFAULT_PENDING_DOMAINS_PER_NAMESPACE,
  ...patch
})
