/**
 * RelayPublisher's live service (spec §4.6 delivery rules, docs/push.md "Relay delivery"):
 *
 * - a namespace with its own relay `base_url`: published to that server only, through the guarded
 *   egress client (refusals at dial time, no redirects), with the tenant's `auth_token`; an
 *   endpoint-URL token is posted verbatim once its scheme and host are that relay's;
 * - otherwise the platform relay: on a single node (no peers) published to this node's relay
 *   directly; with peers, published on this node and posted to every peer's
 *   `/v1/internal/push/ntfy/<topic>` at once, signed with the coordination MAC (RelayCall.ts),
 *   succeeding when at least one node's relay accepted it. No relay anywhere is a failed outcome;
 *   there is no fallback to any other host.
 *
 * The peers are the membership's live nodes (docs/cluster.md), read at most every 30 s (spec §4.6:
 * "cached 30 s"); a node with no internal URL or whose address is an IP outside
 * `PORTICO_OVERLAY_CIDRS` is skipped.
 */
import { Duration, Effect, Either, Layer, Option, Schema } from "effect"
import { isIP } from "node:net"
import { type AllowList, inRanges, parseCidrs } from "../../domain/AddressRanges.js"
import { Membership, type MembershipService } from "../cluster/Membership.js"
import { DEFAULT_OVERLAY_CIDRS } from "../config/MembershipSettings.js"
import { PorticoConfig, type PorticoSettings } from "../config/PorticoConfig.js"
import { Coordination, type CoordinationService } from "../coordination/Coordination.js"
import { GuardedFetch } from "../egress/GuardedFetch.js"
import { type DeliveryOutcome, delivered, failed, type FetchLike, Reasons, reasonOfThrown } from "./Delivery.js"
import { fetchThroughGuard } from "./GuardedFetchLike.js"
import { makeNtfyClient, type NtfyMessage, RELAY_TOPIC, relayPublishUrl } from "./NtfyClient.js"
import { PlatformRelay, type PlatformRelayService, RelayReasons } from "./PlatformRelay.js"
import { RELAY_MESSAGE_MAX_BYTES, relayBodyOf, relayCallPath, relayHeadersFor, relaySignedBody } from "./RelayCall.js"
import { RelayPublisher, type RelayPublisherService } from "./RelayPublisher.js"

/** A node the platform relay fans out to: its id (the MAC's audience) and its base URL. */
export interface RelayPeer {
  readonly nodeId: string
  readonly baseUrl: string
}

/** How long the fan-out keeps the membership's peers (spec §4.6: "cached 30 s"). */
export const RELAY_PEERS_CACHE = Duration.seconds(30)

/** The cluster's overlay (`PORTICO_OVERLAY_CIDRS`) as ranges. */
export const overlayOf = (cidrs: ReadonlyArray<string>): AllowList => Either.getOrThrow(parseCidrs(cidrs.join(",")))

const defaultOverlay = overlayOf(DEFAULT_OVERLAY_CIDRS)

/**
 * The peers a fan-out posts to, of `peers` (node id, URL): the membership's live nodes, or the
 * seeds. This node is left out (it publishes itself); so is a peer with no URL, or whose address
 * is an IP literal outside `overlay` (spec §4.6 skips nodes outside the overlay range). A peer
 * named by host name is kept: the name is the operator's own (a seed, or `PORTICO_INTERNAL_URL`),
 * and the other node-to-node calls reach it by that name.
 */
export const relayPeersOf = (
  peers: Iterable<readonly [string, string]>,
  selfId: string,
  overlay: AllowList = defaultOverlay
): { readonly eligible: ReadonlyArray<RelayPeer>; readonly skipped: ReadonlyArray<RelayPeer> } => {
  const eligible: Array<RelayPeer> = []
  const skipped: Array<RelayPeer> = []
  for (const [nodeId, baseUrl] of peers) {
    if (nodeId === selfId) continue
    let host: string
    try {
      host = new URL(baseUrl).hostname.replace(/^\[|\]$/g, "")
    } catch {
      skipped.push({ nodeId, baseUrl })
      continue
    }
    if (host === "" || (isIP(host) !== 0 && !inRanges(overlay, host))) skipped.push({ nodeId, baseUrl })
    else eligible.push({ nodeId, baseUrl: baseUrl.replace(/\/+$/, "") })
  }
  return { eligible, skipped }
}

/**
 * Whether this gateway can publish to a platform relay at all: its own `PORTICO_PUSH_RELAY_URL`,
 * or a live peer inside the overlay to fan out to (which may have one): the live seeds and the
 * nodes the membership counts active (docs/push.md, "Platform relay"). What "the gateway has a
 * platform relay" means for the configured rule (PUSH_NOT_CONFIGURED): a node without a relay of
 * its own still delivers through its peers' relays, found as the fan-out finds them.
 */
export const platformRelayReachable = (
  settings: Pick<PorticoSettings, "push" | "nodeId" | "membership">,
  membership: Pick<MembershipService, "peers">
): Effect.Effect<boolean> =>
  settings.push.relayUrl !== undefined
    ? Effect.succeed(true)
    : Effect.map(
        membership.peers,
        (live) => relayPeersOf(live.map((p) => [p.id, p.url] as const), settings.nodeId, overlayOf(settings.membership.overlayCidrs)).eligible.length > 0
      )

/** Why `token` cannot be published at `baseUrl`: another scheme or host, or not a topic at all. */
const refusedTokenReason = (baseUrl: string, token: string): string => {
  try {
    const endpoint = new URL(token)
    const base = new URL(baseUrl)
    if (endpoint.protocol !== base.protocol || endpoint.host !== base.host) return RelayReasons.hostMismatch
  } catch {
    // not a URL: neither a topic nor an endpoint
  }
  return RelayReasons.badToken
}

/** Where `token` is published under `baseUrl`, or the outcome that says why it is not. */
const publishUrl = (baseUrl: string, token: string): Either.Either<string, DeliveryOutcome> =>
  Either.mapLeft(relayPublishUrl(baseUrl, token), () => failed(0, refusedTokenReason(baseUrl, token)))

/**
 * The topic a fan-out relays: a bare topic as it is; an endpoint URL's last segment once its
 * scheme and host are this node's platform relay's (none configured here: nothing to match, so
 * an endpoint URL is refused).
 */
const fanOutTopic = (platformUrl: string | undefined, token: string): Either.Either<string, DeliveryOutcome> => {
  if (RELAY_TOPIC.test(token)) return Either.right(token)
  if (platformUrl === undefined) return Either.left(failed(0, RelayReasons.notConfigured))
  return Either.map(publishUrl(platformUrl, token), (url) => url.split("/").pop() ?? "")
}

/** A peer's answer: `{id}` from its relay, or our envelope (`PUSH_PROVIDER_REFUSED` carries the relay's reason). */
const PeerAnswer = Schema.parseJson(
  Schema.Struct({ id: Schema.optional(Schema.String), error: Schema.optional(Schema.String), code: Schema.optional(Schema.String) })
)
const decodePeerAnswer = Schema.decodeUnknownOption(PeerAnswer)

const peerFailureReason = (status: number, text: string): string => {
  const answer = Option.getOrUndefined(decodePeerAnswer(text))
  if (answer?.code === "PUSH_PROVIDER_REFUSED" && answer.error !== undefined) return answer.error
  if (answer?.code === "PUSH_NOT_CONFIGURED") return RelayReasons.notConfigured
  return answer?.code ?? "HTTP" + status
}

export interface RelayPublisherOptions {
  readonly platform: PlatformRelayService
  /** The fetch for tenant relays: the guarded egress client (fetchThroughGuard). */
  readonly guarded: FetchLike
  /** The peers to fan out to, read at each publish (the Live layer's is cached 30 s). */
  readonly peers: Effect.Effect<ReadonlyArray<RelayPeer>>
  readonly sign: CoordinationService["sign"]
  /** Per tenant publish and per peer call; default 10 s. */
  readonly timeoutMs?: number
}

export const makeRelayPublisher = (options: RelayPublisherOptions): RelayPublisherService => {
  const timeoutMs = options.timeoutMs ?? 10_000
  const tenantClient = makeNtfyClient({ fetch: options.guarded, timeoutMs })
  const platform = options.platform

  const postToPeer = (peer: RelayPeer, topic: string, message: NtfyMessage): Effect.Effect<DeliveryOutcome> =>
    Effect.gen(function* () {
      const body = relayBodyOf(message)
      // over the relay route's body cap: the peer would answer 413 without reading it
      if (Buffer.byteLength(body, "utf8") > RELAY_MESSAGE_MAX_BYTES) return failed(413, Reasons.payloadTooLarge)
      const path = relayCallPath(topic)
      const relayed = relayHeadersFor(message)
      const signed = yield* options.sign(peer.nodeId, "POST", path, relaySignedBody(body, relayed))
      const headers: Record<string, string> = { ...signed, "content-type": "text/plain; charset=utf-8" }
      if (relayed.title !== undefined) headers["Title"] = relayed.title
      if (relayed.priority !== undefined) headers["Priority"] = relayed.priority
      if (relayed.tags !== undefined) headers["Tags"] = relayed.tags
      return yield* Effect.promise(async (): Promise<DeliveryOutcome> => {
        const signal = AbortSignal.timeout(timeoutMs)
        try {
          const response = await fetch(peer.baseUrl + path, { method: "POST", headers, body, redirect: "manual", signal })
          const text = await response.text()
          if (response.status === 200) return delivered(200, Option.getOrUndefined(decodePeerAnswer(text))?.id)
          return failed(response.status, peerFailureReason(response.status, text))
        } catch (error) {
          return failed(0, reasonOfThrown(error, signal))
        }
      })
    })

  const fanOut = (namespace: string, peers: ReadonlyArray<RelayPeer>, token: string, message: NtfyMessage): Effect.Effect<DeliveryOutcome> =>
    Either.match(fanOutTopic(platform.url, token), {
      onLeft: Effect.succeed,
      onRight: (topic) =>
        Effect.gen(function* () {
          const nodes: Array<readonly [string, Effect.Effect<DeliveryOutcome>]> = [
            ...(platform.url === undefined ? [] : [["this node", platform.publishTopic(topic, message)] as const]),
            ...peers.map((peer) => [peer.nodeId, postToPeer(peer, topic, message)] as const)
          ]
          const outcomes = yield* Effect.forEach(nodes, ([, publish]) => publish, { concurrency: "unbounded" })
          const accepted = outcomes.find((o) => o.outcome === "ok")
          const refused = nodes.flatMap(([node], i) => {
            const o = outcomes[i]
            return o === undefined || o.outcome === "ok" ? [] : [`${node}: ${o.status} ${o.reason ?? ""}`.trim()]
          })
          if (refused.length > 0) {
            yield* Effect.logWarning("platform relay: nodes did not accept a publish").pipe(
              Effect.annotateLogs({ namespace, accepted: accepted !== undefined, refused: refused.join("; ") })
            )
          }
          // the first node's answer is this node's relay's when it has one: the most telling failure
          return accepted ?? outcomes[0] ?? failed(0, RelayReasons.notConfigured)
        })
    })

  return {
    publish: (namespace, tenant, token, message) => {
      if (tenant !== undefined && tenant.baseUrl !== undefined) {
        // the tenant's own server only, through the guard, never fanned out
        const authToken = tenant.authToken
        return Either.match(publishUrl(tenant.baseUrl, token), {
          onLeft: Effect.succeed,
          onRight: (url) => tenantClient.publish(url, message, authToken)
        })
      }
      return Effect.flatMap(options.peers, (peers) => {
        if (peers.length > 0) return fanOut(namespace, peers, token, message)
        if (platform.url === undefined) return Effect.succeed(failed(0, RelayReasons.notConfigured))
        return Either.match(publishUrl(platform.url, token), {
          onLeft: Effect.succeed,
          onRight: (url) => platform.publishTopic(url.split("/").pop() ?? "", message)
        })
      })
    }
  }
}

/** Over the configured platform relay, the egress guard, the membership's live peers and the coordination MAC. */
export const RelayPublisherLive = Layer.effect(
  RelayPublisher,
  Effect.gen(function* () {
    const config = yield* PorticoConfig
    const guard = yield* GuardedFetch
    const coordination = yield* Coordination
    const platform = yield* PlatformRelay
    const membership = yield* Membership
    const overlay = overlayOf(config.membership.overlayCidrs)
    const peers = yield* Effect.cachedWithTTL(
      Effect.gen(function* () {
        const live = yield* membership.peers
        const { eligible, skipped } = relayPeersOf(
          live.map((p) => [p.id, p.url] as const),
          config.nodeId,
          overlay
        )
        if (skipped.length > 0) {
          yield* Effect.logWarning("platform relay: nodes outside the overlay (PORTICO_OVERLAY_CIDRS) are not fanned out to").pipe(
            Effect.annotateLogs({ skipped: skipped.map((p) => p.nodeId).join(",") })
          )
        }
        return eligible
      }),
      RELAY_PEERS_CACHE
    )
    return makeRelayPublisher({ platform, guarded: fetchThroughGuard(guard), peers, sign: coordination.sign })
  })
)

/**
 * The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"):
 * no peers, no platform relay configured. Here, not on the Tag, as the Live layer is: the Tag's
 * module is the contract alone.
 */
export const RelayPublisherTest = Layer.suspend(() =>
  RelayPublisherLive.pipe(Layer.provide(Layer.mergeAll(Coordination.Test, GuardedFetch.Test, Membership.Test, PlatformRelay.Test, PorticoConfig.Test)))
)
