/**
 * The cluster membership's settings (docs/cluster.md, "Membership"), read from `PORTICO_NODE_*`,
 * `PORTICO_INTERNAL_URL` and `PORTICO_OVERLAY_CIDRS`. A TTL shorter than two heartbeats would mark live nodes inactive between
 * beats, so it is refused at start.
 */
import { Config, ConfigError, Effect, Either, Option } from "effect"
import { parseCidrs } from "../../domain/AddressRanges.js"
import { between } from "./IntegerSetting.js"

export interface MembershipSettings {
  /** How often this gateway writes its row (`PORTICO_NODE_HEARTBEAT_MS`, default 10,000). */
  readonly heartbeatMs: number
  /** A node is active while its row is younger than this (`PORTICO_NODE_TTL_MS`, default 30,000). */
  readonly nodeTtlMs: number
  /**
   * Where other nodes reach this one (`PORTICO_INTERNAL_URL`, e.g. `http://10.0.0.3:8080` on the
   * private network); unset: `http://<PORTICO_HOST>:<port>` when the gateway listens on one address.
   */
  readonly internalUrl: string | undefined
  /**
   * The cluster's private network (`PORTICO_OVERLAY_CIDRS`): the platform relay's fan-out skips a
   * node whose internal address is an IP outside it, and `/v1/network/connect` dials nothing
   * outside it. Default: the private ranges the internal routes accept a caller from (loopback,
   * RFC 1918, carrier-grade NAT, IPv6 unique-local); the spec's overlay is 10.0.0.0/24.
   */
  readonly overlayCidrs: ReadonlyArray<string>
}

/** What `PORTICO_OVERLAY_CIDRS` is unless set: the sources PeerGate accepts (isOverlaySource). */
export const DEFAULT_OVERLAY_CIDRS = ["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "::1/128", "fc00::/7"]

export const defaultMembershipSettings: MembershipSettings = {
  heartbeatMs: 10_000,
  nodeTtlMs: 30_000,
  internalUrl: undefined,
  overlayCidrs: DEFAULT_OVERLAY_CIDRS
}

export const membershipConfig = Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const d = defaultMembershipSettings
  const heartbeatMs = yield* env(between("NODE_HEARTBEAT_MS", d.heartbeatMs, 100, 600_000))
  const nodeTtlMs = yield* env(between("NODE_TTL_MS", d.nodeTtlMs, 300, 3_600_000))
  if (nodeTtlMs < 2 * heartbeatMs) {
    return yield* Effect.fail(
      ConfigError.InvalidData(["PORTICO", "NODE_TTL_MS"], `PORTICO_NODE_TTL_MS (${nodeTtlMs}) must be at least twice PORTICO_NODE_HEARTBEAT_MS (${heartbeatMs})`)
    )
  }
  const url = yield* env(Config.option(Config.string("INTERNAL_URL")))
  if (Option.isSome(url) && !/^https?:\/\/[^/\s]+$/.test(url.value)) {
    return yield* Effect.fail(ConfigError.InvalidData(["PORTICO", "INTERNAL_URL"], "PORTICO_INTERNAL_URL is http(s)://host:port, with no path"))
  }
  const overlay = parseCidrs(yield* env(Config.string("OVERLAY_CIDRS")).pipe(Config.withDefault(d.overlayCidrs.join(","))))
  if (Either.isLeft(overlay) || overlay.right.cidrs.length === 0) {
    const given = Either.isLeft(overlay) ? `"${overlay.left}"` : "nothing"
    return yield* Effect.fail(ConfigError.InvalidData(["PORTICO", "OVERLAY_CIDRS"], `expected comma-separated CIDRs, got ${given}`))
  }
  const settings: MembershipSettings = { heartbeatMs, nodeTtlMs, internalUrl: Option.getOrUndefined(url), overlayCidrs: overlay.right.cidrs }
  return settings
})
