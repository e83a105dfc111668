/**
 * This node's platform relay: the operator's ntfy server (`PORTICO_PUSH_RELAY_URL`, with
 * `PORTICO_PUSH_RELAY_TOKEN` as Bearer). It is the operator's own address, so it is trusted and
 * published to with global fetch, not through the egress guard (docs/push.md). The relay publisher
 * publishes here for a namespace without a relay of its own, and the internal relay route
 * (`/v1/internal/push/ntfy/<topic>`) does for the other nodes' fan-out.
 */
import { Context, Effect, Layer } from "effect"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type DeliveryOutcome, failed, type FetchLike } from "./Delivery.js"
import { makeNtfyClient, type NtfyMessage, RELAY_TOPIC } from "./NtfyClient.js"

/** Reasons of the relay path, beside the ntfy client's and the guard's (Delivery.ts, GuardedFetchLike.ts). */
export const RelayReasons = {
  /** No relay to publish to: the namespace names none and this node (and every peer asked) has no platform relay. */
  notConfigured: "RelayNotConfigured",
  /** An endpoint-URL token whose scheme or host is not the relay's: nothing is sent. */
  hostMismatch: "RelayHostMismatch",
  /** A token that is neither a topic nor an endpoint URL ending in one. */
  badToken: "BadRelayToken"
} as const

export interface PlatformRelayService {
  /** The relay's base URL, without a trailing slash; undefined when this node has none. */
  readonly url: string | undefined
  /** Publishes `message` to `<url>/<topic>`; a failed `RelayNotConfigured` when this node has no relay. */
  readonly publishTopic: (topic: string, message: NtfyMessage) => Effect.Effect<DeliveryOutcome>
}

export interface PlatformRelayOptions {
  readonly url: string | undefined
  readonly token: string | undefined
  /** Default global fetch (the operator's address is trusted). */
  readonly fetch?: FetchLike
  readonly timeoutMs?: number
}

export const makePlatformRelay = (options: PlatformRelayOptions): PlatformRelayService => {
  const url = options.url?.replace(/\/+$/, "")
  const client = makeNtfyClient({
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
  })
  return {
    url,
    publishTopic: (topic, message) =>
      url === undefined
        ? Effect.succeed(failed(0, RelayReasons.notConfigured))
        : !RELAY_TOPIC.test(topic)
        ? Effect.succeed(failed(0, RelayReasons.badToken))
        : client.publish(url + "/" + topic, message, options.token)
  }
}

export class PlatformRelay extends Context.Tag("portico/PlatformRelay")<PlatformRelay, PlatformRelayService>() {
  static readonly Live = Layer.effect(
    PlatformRelay,
    Effect.map(PorticoConfig, (config) => makePlatformRelay({ url: config.push.relayUrl, token: config.push.relayToken }))
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => PlatformRelay.Live.pipe(Layer.provide(PorticoConfig.Test)))
}
