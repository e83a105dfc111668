/**
 * The cluster membership's settings (docs/cluster.md, "Membership"), read from `PORTICO_NODE_*` and
 * `PORTICO_INTERNAL_URL`. A TTL shorter than two heartbeats would mark live nodes inactive between
 * beats, so it is refused at start.
 */
import { Config, ConfigError, Effect, Option } from "effect"
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
}

export const defaultMembershipSettings: MembershipSettings = { heartbeatMs: 10_000, nodeTtlMs: 30_000, internalUrl: undefined }

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
  const settings: MembershipSettings = { heartbeatMs, nodeTtlMs, internalUrl: Option.getOrUndefined(url) }
  return settings
})
