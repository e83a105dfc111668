/**
 * Node-to-node calls (spec §4.10): a request from another gateway of the cluster carries a
 * coordination MAC over what it asks, addressed to the receiving node's id, and must come from a
 * private overlay source. The MAC key is derived from the root secret the cluster's gateways
 * share; the timestamp bounds replay to a minute (the internal routes built so far are idempotent).
 */
import { Clock, Context, Data, Duration, Effect, Layer } from "effect"
import { stringifyExactJson } from "../../domain/ExactJson.js"
import { createHash } from "node:crypto"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { safeEqual, Sealer } from "../secrets/Sealer.js"

export const MAC_HEADER = "x-portico-coordination-mac"
export const TIME_HEADER = "x-portico-coordination-time"
const SKEW_SECONDS = 60

/** JSON with object keys sorted and undefined members left out: what both ends MAC. */
const sortedKeys = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(sortedKeys)
    : v !== null && typeof v === "object"
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>)
            .filter(([, x]) => x !== undefined)
            .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
            .map(([k, x]) => [k, sortedKeys(x)])
        )
      : v

/** Keys sorted at every depth, undefined members dropped; bigints (wide SQL arguments) as digits. */
export const canonicalJson = (value: unknown): string => stringifyExactJson(sortedKeys(value))

/** The peer is not configured, did not answer in time, or the connection failed. */
export class PeerUnreachable extends Data.TaggedError("PeerUnreachable")<{ readonly nodeId: string; readonly detail: string }> {}

export interface PeerAnswer {
  readonly status: number
  readonly text: string
  readonly retryAfter: string | undefined
}

export interface CoordinationService {
  /**
   * POSTs `payload` (as canonical JSON) to an internal route of peer `nodeId` (from
   * `PORTICO_PEERS`), signed for that node; any HTTP answer is returned as it came.
   */
  readonly post: (nodeId: string, path: string, payload: unknown, timeout: Duration.DurationInput) => Effect.Effect<PeerAnswer, PeerUnreachable>
  /** Headers that let node `audience` accept `method path` with `body`. */
  readonly sign: (audience: string, method: string, path: string, body: string) => Effect.Effect<Record<string, string>>
  /** Why the request is refused, or undefined when it is a genuine call to this node. */
  readonly verify: (
    method: string,
    path: string,
    body: string,
    headers: Readonly<Record<string, string | undefined>>,
    remoteAddress: string | undefined
  ) => Effect.Effect<string | undefined>
}

const digest = (body: string) => createHash("sha256").update(body, "utf8").digest("hex")

/** Loopback, RFC 1918, CGNAT (the overlay's range) and IPv6 unique-local sources. */
export const isOverlaySource = (address: string | undefined): boolean => {
  if (address === undefined) return false
  const ip = address.startsWith("::ffff:") ? address.slice(7) : address
  if (ip === "::1") return true
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(ip)
  if (v4 !== null) {
    const a = Number(v4[1])
    const b = Number(v4[2])
    return a === 127 || a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127)
  }
  return /^f[cd][0-9a-f]{2}:/i.test(ip)
}

export class Coordination extends Context.Tag("portico/Coordination")<Coordination, CoordinationService>() {
  static readonly Live = Layer.effect(
    Coordination,
    Effect.gen(function* () {
      const sealer = yield* Sealer
      const config = yield* PorticoConfig
      const mac = (audience: string, method: string, path: string, body: string, time: string) =>
        "v1=" + sealer.hash("coordination-mac", [method.toUpperCase(), path, audience, time, digest(body)].join("\n"))
      const sign = (audience: string, method: string, path: string, body: string) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const time = String(Math.floor(now / 1000))
          return { [MAC_HEADER]: mac(audience, method, path, body, time), [TIME_HEADER]: time }
        })
      return {
        post: (nodeId, path, payload, timeout) =>
          Effect.gen(function* () {
            const base = config.peers.get(nodeId)
            if (base === undefined) return yield* Effect.fail(new PeerUnreachable({ nodeId, detail: "not in PORTICO_PEERS" }))
            const body = canonicalJson(payload)
            const headers = yield* sign(nodeId, "POST", path, body)
            return yield* Effect.tryPromise({
              try: async (signal) => {
                const response = await fetch(base + path, {
                  method: "POST",
                  headers: { ...headers, "content-type": "application/json" },
                  body,
                  redirect: "manual",
                  signal
                })
                return { status: response.status, text: await response.text(), retryAfter: response.headers.get("retry-after") ?? undefined }
              },
              catch: (e) => new PeerUnreachable({ nodeId, detail: e instanceof Error ? e.message : String(e) })
            }).pipe(
              Effect.timeoutFail({ duration: timeout, onTimeout: () => new PeerUnreachable({ nodeId, detail: "no answer in time" }) })
            )
          }),
        sign: (audience, method, path, body) =>
          Effect.map(Clock.currentTimeMillis, (now) => {
            const time = String(Math.floor(now / 1000))
            return { [MAC_HEADER]: mac(audience, method, path, body, time), [TIME_HEADER]: time }
          }),
        verify: (method, path, body, headers, remoteAddress) =>
          Effect.map(Clock.currentTimeMillis, (now) => {
            if (!isOverlaySource(remoteAddress)) return "not from the cluster's private network"
            const given = headers[MAC_HEADER]
            const time = headers[TIME_HEADER]
            if (given === undefined || time === undefined || !/^\d{1,12}$/.test(time)) return "coordination MAC missing"
            if (Math.abs(Number(time) - now / 1000) > SKEW_SECONDS) return "coordination MAC expired"
            return safeEqual(given, mac(config.nodeId, method, path, body, time)) ? undefined : "coordination MAC invalid"
          })
      }
    })
  )
}
