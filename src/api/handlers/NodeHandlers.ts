import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { Membership } from "../../layers/cluster/Membership.js"
import { NODE_INVITE_MAX_SECONDS, NodeInvites } from "../../layers/nodes/NodeInvites.js"
import { NodeAdmin } from "../../layers/nodes/NodeAdmin.js"
import { NodeRepair } from "../../layers/nodes/NodeRepair.js"
import { peerView } from "./NetworkHandlers.js"
import { PorticoApi } from "../Api.js"
import { toUnixSeconds } from "../Wire.js"
import { refusedOrDown } from "./Refusals.js"

/** Node administration for operators (docs/cluster.md). */
export const NodeHandlers = HttpApiBuilder.group(PorticoApi, "node", (handlers) =>
  Effect.gen(function* () {
    const invites = yield* NodeInvites
    const membership = yield* Membership
    const admin = yield* NodeAdmin
    const repair = yield* NodeRepair
    const actor = Effect.map(CurrentPrincipal, (p) => p.subject)
    /** Where a joiner reaches this node: its registered internal URL, else the address it was asked on. */
    const joinUrl = Effect.gen(function* () {
      const registered = yield* Effect.orElseSucceed(membership.urlOf(membership.self.id), () => undefined)
      if (registered !== undefined && registered !== "") return registered
      const request = yield* HttpServerRequest.HttpServerRequest
      return `http://${request.headers["host"] ?? "127.0.0.1"}`
    })
    return handlers
      .handle("enroll", ({ payload }) =>
      Effect.gen(function* () {
        const made = yield* invites.mint(yield* actor, {
          nodeId: payload.node_id,
          expirySeconds: payload.expiry_seconds ?? NODE_INVITE_MAX_SECONDS,
          joinUrl: yield* joinUrl
        })
        return { invite: made.invite, expires_at: toUnixSeconds(made.expiresAt), node_id: made.nodeId ?? null }
      }).pipe(Effect.mapError(refusedOrDown))
      )
      .handle("status", ({ urlParams }) =>
        Effect.map(Effect.mapError(admin.status(urlParams.node ?? membership.self.id), refusedOrDown), ({ node, snapshot, runsWorker }) => ({
          ...peerView(node),
          reachable: snapshot.reachable,
          runs_cluster_worker: runsWorker,
          error: snapshot.reachable ? null : snapshot.error,
          snapshot: snapshot.reachable ? snapshot : null
        }))
      )
      .handle("logs", ({ urlParams }) => {
        const node = urlParams.node ?? membership.self.id
        return Effect.map(Effect.mapError(admin.logs(node, urlParams.lines ?? 100), refusedOrDown), (lines) => ({ node, lines }))
      })
      .handle("leave", ({ payload }) =>
        Effect.flatMap(actor, (by) =>
          Effect.map(Effect.mapError(admin.leave(payload.node, payload.force === true, by), refusedOrDown), (left) => ({
            node: payload.node,
            retired: true as const,
            moved: left.moved.map((m) => ({ ...m, to: membership.self.id })),
            lost: { databases: left.lostDatabases, deployments: left.lostDeployments }
          }))
        )
      )
      .handle("command", ({ payload }) =>
        Effect.flatMap(actor, (by) =>
          payload.command === "repair"
            ? Effect.map(Effect.mapError(repair.repair(payload.node, payload.namespace, by), refusedOrDown), (done) => ({ ...payload, ...done }))
            : Effect.map(Effect.mapError(admin.command(payload.node, payload.command, by), refusedOrDown), (draining) => ({ ...payload, draining }))
        )
      )
  })
)
