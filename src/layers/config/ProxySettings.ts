/**
 * The anonymity proxy's settings (docs/proxy.md "Settings"), read from `PORTICO_PROXY_*`. The
 * limits default to spec §8's values; tests set short ones.
 */
import { Config, ConfigError, Effect, Either, Option } from "effect"

export interface SocksUpstreamAddress {
  readonly host: string
  readonly port: number
}

export interface ProxySettings {
  /**
   * The SOCKS5 upstream (`PORTICO_PROXY_SOCKS_URL`, `socks5h://host:port`: Tor's SocksPort in
   * production). Undefined: every proxy route answers 503 RELAY_UNAVAILABLE, never a direct dial.
   */
  readonly socks: SocksUpstreamAddress | undefined
  /** An anon request's decoded body (`PORTICO_PROXY_ANON_MAX_REQUEST_BYTES`, default 1 MiB); 413 past it. */
  readonly anonMaxRequestBytes: number
  /** An anon answer's body (`PORTICO_PROXY_ANON_MAX_RESPONSE_BYTES`, default 4 MiB); past it the read stops and `error` says so. */
  readonly anonMaxResponseBytes: number
  /** An anon request from the SOCKS connect to the response's last byte (`PORTICO_PROXY_ANON_TIMEOUT_MS`, default 30 s). */
  readonly anonTimeoutMs: number
  /** Anon requests in flight per user (`PORTICO_PROXY_ANON_PER_USER`, default 8); 429 past it. */
  readonly anonPerUser: number
  /**
   * Anon requests in flight on this gateway (`PORTICO_PROXY_ANON_PER_NODE`, default 64); 429 past it.
   * Each may hold its response cap in memory, so this bounds the whole: 64 × 4 MiB by default.
   */
  readonly anonPerNode: number
  /** Opening a stream through the upstream (`PORTICO_PROXY_CONNECT_TIMEOUT_MS`, default 20 s). */
  readonly connectTimeoutMs: number
  /** Open tunnels per user (`PORTICO_PROXY_TUNNELS_PER_USER`, spec §8: 24). */
  readonly tunnelsPerUser: number
  /** Open tunnels on this gateway (`PORTICO_PROXY_TUNNELS_PER_NODE`, spec §8: 512). */
  readonly tunnelsPerNode: number
  /** Bytes each way in one tunnel (`PORTICO_PROXY_TUNNEL_MAX_BYTES`, spec §8: 256 MiB). */
  readonly tunnelMaxBytes: number
  /** A tunnel with no byte either way this long is closed (`PORTICO_PROXY_TUNNEL_IDLE_SECONDS`, spec §8: 120). */
  readonly tunnelIdleSeconds: number
  /** A tunnel is closed this long after it opened (`PORTICO_PROXY_TUNNEL_LIFETIME_SECONDS`, spec §8: 1800). */
  readonly tunnelLifetimeSeconds: number
  /** Open relay streams per client address (`PORTICO_PROXY_RELAY_PER_ADDRESS`, spec §8: 4). */
  readonly relayPerAddress: number
  /**
   * How often open sockets' sessions are checked for revocation (`PORTICO_PROXY_REVOCATION_CHECK_MS`,
   * default 3000, at most 9000 so a revoked session's sockets close within spec §8's 10 s).
   */
  readonly revocationCheckMs: number
}

export const defaultProxySettings: ProxySettings = {
  socks: undefined,
  anonMaxRequestBytes: 1024 * 1024,
  anonMaxResponseBytes: 4 * 1024 * 1024,
  anonTimeoutMs: 30_000,
  anonPerUser: 8,
  anonPerNode: 64,
  connectTimeoutMs: 20_000,
  tunnelsPerUser: 24,
  tunnelsPerNode: 512,
  tunnelMaxBytes: 256 * 1024 * 1024,
  tunnelIdleSeconds: 120,
  tunnelLifetimeSeconds: 1800,
  relayPerAddress: 4,
  revocationCheckMs: 3000
}

/**
 * `socks5h://host:port` only: `socks5://` conventionally means the client resolves names itself,
 * which the proxy never does, so it is refused at start rather than silently read as socks5h.
 */
export const parseSocksUrl = (text: string): Either.Either<SocksUpstreamAddress, string> => {
  const m = /^socks5h:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})\/?$/.exec(text.trim())
  if (m === null) return Either.left("expected socks5h://host:port (remote name resolution; socks5:// is refused)")
  const port = Number(m[2])
  if (port < 1 || port > 65535) return Either.left("port out of range")
  const host = (m[1] as string).replace(/^\[(.*)\]$/, "$1")
  return Either.right({ host, port })
}

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "expected a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

/** The settings from the environment, each defaulting to `defaultProxySettings`. */
export const proxyConfig = Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const socksText = yield* env(Config.option(Config.string("PROXY_SOCKS_URL")))
  let socks: SocksUpstreamAddress | undefined
  if (Option.isSome(socksText) && socksText.value.trim() !== "") {
    const parsed = parseSocksUrl(socksText.value)
    if (Either.isLeft(parsed)) return yield* Effect.fail(ConfigError.InvalidData(["PORTICO", "PROXY_SOCKS_URL"], parsed.left))
    socks = parsed.right
  }
  const d = defaultProxySettings
  const settings: ProxySettings = {
    socks,
    anonMaxRequestBytes: yield* env(positive("PROXY_ANON_MAX_REQUEST_BYTES", d.anonMaxRequestBytes)),
    anonMaxResponseBytes: yield* env(positive("PROXY_ANON_MAX_RESPONSE_BYTES", d.anonMaxResponseBytes)),
    anonTimeoutMs: yield* env(positive("PROXY_ANON_TIMEOUT_MS", d.anonTimeoutMs)),
    anonPerUser: yield* env(positive("PROXY_ANON_PER_USER", d.anonPerUser)),
    anonPerNode: yield* env(positive("PROXY_ANON_PER_NODE", d.anonPerNode)),
    connectTimeoutMs: yield* env(positive("PROXY_CONNECT_TIMEOUT_MS", d.connectTimeoutMs)),
    tunnelsPerUser: yield* env(positive("PROXY_TUNNELS_PER_USER", d.tunnelsPerUser)),
    tunnelsPerNode: yield* env(positive("PROXY_TUNNELS_PER_NODE", d.tunnelsPerNode)),
    tunnelMaxBytes: yield* env(positive("PROXY_TUNNEL_MAX_BYTES", d.tunnelMaxBytes)),
    tunnelIdleSeconds: yield* env(positive("PROXY_TUNNEL_IDLE_SECONDS", d.tunnelIdleSeconds)),
    tunnelLifetimeSeconds: yield* env(positive("PROXY_TUNNEL_LIFETIME_SECONDS", d.tunnelLifetimeSeconds)),
    relayPerAddress: yield* env(positive("PROXY_RELAY_PER_ADDRESS", d.relayPerAddress)),
    revocationCheckMs: yield* env(
      Config.integer("PROXY_REVOCATION_CHECK_MS").pipe(
        Config.validate({ message: "expected 100 to 9000 ms (spec: revoked sockets close within 10 s)", validation: (n) => n >= 100 && n <= 9000 }),
        Config.withDefault(d.revocationCheckMs)
      )
    )
  }
  return settings
})
