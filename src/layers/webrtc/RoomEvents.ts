/**
 * Participants joining and leaving rooms (spec §6.4; docs/webrtc.md, "Events"): a media server
 * reports each one to its own node's gateway (on the gateway's channel to it, MediaChannel.ts, or
 * by POST), which checks the report and publishes it on the room's platform topic
 * `_portico/webrtc/<room>` of the namespace.
 *
 * A report is taken when its MAC (hex HMAC-SHA256 of the raw body, under the event key made from
 * the namespace's relay secret) holds, its `at` is within 60 s of now, it names this node, and its
 * nonce was not seen in that window: anything else is 401, and nothing is published. Naming the
 * node keeps a report captured on one gateway from being published again through another.
 */
import { createSecretKey, type KeyObject } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import type { ParticipantEvent } from "../../api/groups/WebRtcWire.js"
import type { WebRtcEventCode } from "../../domain/Errors.js"
import { eventKeyOf, eventMacHolds } from "../../domain/SfuTicket.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { PubSub } from "../pubsub/PubSub.js"
import { type Refused, refuse } from "../Refused.js"
import { WebRtc } from "./WebRtc.js"

export const EVENT_WINDOW_MS = 60_000

export interface RoomEventsService {
  /** Checks the report (`raw` is its body as sent, `mac` its header) and publishes it. */
  readonly report: (event: typeof ParticipantEvent.Type, raw: string, mac: string | undefined) => Effect.Effect<void, Refused<WebRtcEventCode>>
}

const unauthorized = (why: string) => refuse("UNAUTHORIZED", `participant event refused: ${why}`, "only a node's media server reports participants")
const macRefused = unauthorized("the MAC does not hold")
const staleRefused = unauthorized("it is stale")
const otherNodeRefused = unauthorized("it names another node")
const replayRefused = unauthorized("it was seen before")

export class RoomEvents extends Context.Tag("portico/RoomEvents")<RoomEvents, RoomEventsService>() {
  static readonly Live = Layer.effect(
    RoomEvents,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const webrtc = yield* WebRtc
      const pubsub = yield* PubSub
      /** Nonces seen in the window, with when they stop mattering. */
      const seen = new Map<string, number>()
      const spend = (nonce: string, now: number): boolean => {
        if (seen.size > 100_000 || seen.size % 1024 === 0) for (const [n, until] of seen) if (until < now) seen.delete(n)
        if (seen.has(nonce)) return false
        seen.set(nonce, now + 2 * EVENT_WINDOW_MS)
        return true
      }

      /** Event keys by relay secret: WebRtc keeps each opened secret, so one HMAC per namespace. */
      const keys = new WeakMap<Uint8Array, KeyObject>()
      const keyOf = (secret: Uint8Array) => {
        let key = keys.get(secret)
        if (key === undefined) keys.set(secret, (key = createSecretKey(eventKeyOf(secret))))
        return key
      }
      const unreadable = refuse("UNAVAILABLE", "the registry did not answer", "the media server tries again", 1)

      /** Why the report is not taken, or undefined: its checks, in the order the docs give them. */
      const refusal = (event: typeof ParticipantEvent.Type, raw: string, mac: string | undefined, secret: Uint8Array | undefined, now: number) => {
        // a namespace without media on has no key: no report for it can hold
        if (secret === undefined || !eventMacHolds(keyOf(secret), raw, mac)) return macRefused
        if (Math.abs(now - event.at) > EVENT_WINDOW_MS) return staleRefused
        if (event.node !== config.nodeId) return otherNodeRefused
        if (!spend(event.nonce, now)) return replayRefused
        return undefined
      }

      const publish = (event: typeof ParticipantEvent.Type) =>
        pubsub
          .publishPlatform(
            event.namespace,
            `_portico/webrtc/${event.room}`,
            `webrtc.${event.event}`,
            JSON.stringify({ room: event.room, peer_id: event.peer_id, user: event.user, device: event.device, node: event.node, at: event.at, reason: event.reason })
          )
          .pipe(
            Effect.asVoid,
            // not published: the media server's retry of the same report is taken
            Effect.tapError(() => Effect.sync(() => seen.delete(event.nonce))),
            Effect.mapError((e) => refuse("UNAVAILABLE", `the event was not published: ${e.reason}`, "the media server tries again", e.retryAfterSeconds ?? 1))
          )

      // every media server reports each join and leave: no generator and no refusal made per report
      const judged = (event: typeof ParticipantEvent.Type, raw: string, mac: string | undefined, secret: Uint8Array | undefined, now: number): Effect.Effect<void, Refused<WebRtcEventCode>> => {
        const no = refusal(event, raw, mac, secret, now)
        return no === undefined ? publish(event) : Effect.fail(no)
      }
      const report: RoomEventsService["report"] = (event, raw, mac) => {
        const now = Date.now()
        // the namespace's relay secret as kept for its joins, else read
        const kept = webrtc.keptNow(event.namespace, now)
        if (kept !== undefined) return judged(event, raw, mac, kept.secret, now)
        return Effect.flatMap(Effect.mapError(webrtc.relaySecret(event.namespace), () => unreadable), (secret) => judged(event, raw, mac, secret, Date.now()))
      }

      return { report }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => RoomEvents.Live.pipe(Layer.provide(Layer.mergeAll(PorticoConfig.Test, WebRtc.Test, PubSub.Test))))
}
