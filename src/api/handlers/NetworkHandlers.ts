import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { refusal } from "../../domain/Errors.js"
import { type ClusterNode, Membership } from "../../layers/cluster/Membership.js"
import { Network } from "../../layers/network/Network.js"
import { PorticoApi } from "../Api.js"
import { toUnixSeconds } from "../Wire.js"

const orNull = <A, B>(value: A | undefined, f: (a: A) => B): B | null => (value === undefined ? null : f(value))

/** A node of the membership on the wire. */
export const peerView = (n: ClusterNode) => ({
  node: n.id,
  status: n.status,
  internal_url: n.internalUrl,
  public_url: n.publicUrl,
  version: n.version ?? null,
  joined_at: orNull(n.joinedAt, toUnixSeconds),
  last_seen: orNull(n.lastSeen, toUnixSeconds),
  age_ms: orNull(n.ageMs, Math.round),
  self: n.self,
  seed: n.seed,
  connected: n.connected,
  draining: n.draining
})

/** The cluster's topology for operators (docs/cluster.md). */
export const NetworkHandlers = HttpApiBuilder.group(PorticoApi, "network", (handlers) =>
  Effect.gen(function* () {
    const membership = yield* Membership
    const network = yield* Network
    return handlers
      .handle("peers", () =>
        membership.nodes.pipe(
          Effect.map((nodes) => ({
            node: membership.self.id,
            peers: nodes.map(peerView)
          })),
          Effect.mapError(() => refusal("UNAVAILABLE", "the registry did not answer", "retry shortly", 5))
        )
      )
      .handle("status", () => network.status)
      .handle("connect", ({ payload }) => network.connect(payload.multiaddr))
      .handle("disconnect", ({ payload }) => Effect.map(network.disconnect(payload.peer_id), (disconnected) => ({ peer_id: payload.peer_id, disconnected })))
  })
)
