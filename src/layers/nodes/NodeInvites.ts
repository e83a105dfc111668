/**
 * Admitting nodes (docs/cluster.md, "Joining"): an operator mints a one-use invite that expires
 * (optionally bound to one node id); a joining node presents it to `POST /v1/internal/join` and is
 * handed the cluster's secrets sealed to a key it sent (src/domain/NodeJoin.ts).
 *
 * A join is checked whole before the invite is spent: the source, the claim's freshness, the
 * invite (known, unexpired, unspent), the joiner's HMAC with the invite's token, its node key's
 * signature, the invite's binding, and the node id (not registered under another key). Only then
 * is the invite spent, with a conditional UPDATE in one batch with the node's row and the audit
 * row, so two joiners racing on one invite admit one. A refused attempt spends nothing.
 */
import { keyMayHold } from "../../domain/NodeStamp.js"
import { Clock, Context, Effect, Layer, Redacted } from "effect"
import type { NodeCode } from "../../domain/Errors.js"
import {
  claimSignatureHolds,
  encodeInvite,
  inviteIdOf,
  type JoinClaim,
  JOIN_SKEW_SECONDS,
  newInviteToken,
  proofOf,
  type SealedAnswer,
  sealAnswer
} from "../../domain/NodeJoin.js"
import { isOverlaySource } from "../coordination/Coordination.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { OperatorAudit } from "../operators/OperatorAudit.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { loadRoot, safeEqual, Sealer } from "../secrets/Sealer.js"
import { VERSION } from "../health/Health.js"
import { REGISTRY_NOW } from "../cluster/Membership.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** A node invite's default and longest life (spec §4.9: "default and cap one hour"). */
export const NODE_INVITE_MAX_SECONDS = 3600

/** What a joined node is handed, sealed: what it needs to run as one of the cluster's nodes. */
export interface JoinedSettings {
  /** The root secret, base64. */
  readonly secret: string
  readonly registry: { readonly url: string; readonly user?: string | undefined; readonly password?: string | undefined }
  readonly redis_url?: string | undefined
}

export interface MintedNodeInvite {
  readonly invite: string
  readonly expiresAt: number
  readonly nodeId: string | undefined
}

export interface JoinRequest extends JoinClaim {
  readonly proof: string
  readonly signature: string
}

export type NodeJoinRefused = Refused<NodeCode>

export interface NodeInvitesService {
  /** A one-use invite to join through `joinUrl`, for `nodeId` only when given. */
  readonly mint: (
    actor: string,
    options: { readonly nodeId?: string | undefined; readonly expirySeconds: number; readonly joinUrl: string }
  ) => Effect.Effect<MintedNodeInvite, NodeJoinRefused | StoreError>
  /** Admits the node the request names, spending its invite, and seals the cluster's settings to it. */
  readonly join: (request: JoinRequest, remote: string | undefined) => Effect.Effect<SealedAnswer, NodeJoinRefused | StoreError>
}

const SEAL_PURPOSE = "node-invite" as const

const unauthorized = () => refuse("UNAUTHORIZED", "unknown, expired or spent invite, or a proof that does not hold", "ask an operator for a new invite (POST /v1/node/enroll)")

export class NodeInvites extends Context.Tag("portico/NodeInvites")<NodeInvites, NodeInvitesService>() {
  static readonly Live = Layer.effect(
    NodeInvites,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const sealer = yield* Sealer
      const audit = yield* OperatorAudit

      /** What the joiner is handed; none while the registry is a file on this node's disk. */
      const settings = Effect.gen(function* () {
        const registry = config.registry
        if (registry.engine !== "rqlite") {
          return yield* refuse(
            "CONFLICT",
            "this cluster's registry is embedded in one node's data directory: no other node can share it",
            "run the gateways on a shared rqlite registry (PORTICO_RQLITE_URL) before adding nodes"
          )
        }
        const root = yield* Effect.orDie(loadRoot(config.secret, config.dataDir))
        const answer: JoinedSettings = {
          secret: Buffer.from(root).toString("base64"),
          registry: {
            url: registry.url,
            ...(registry.user === undefined ? {} : { user: registry.user }),
            ...(registry.password === undefined ? {} : { password: Redacted.value(registry.password) })
          },
          ...(config.cache.redisUrl === undefined ? {} : { redis_url: config.cache.redisUrl })
        }
        return answer
      })

      return NodeInvites.of({
        mint: (actor, options) =>
          Effect.gen(function* () {
            yield* settings
            const now = yield* Clock.currentTimeMillis
            const token = newInviteToken()
            const id = inviteIdOf(token)
            const expiresAt = now + options.expirySeconds * 1000
            const entry = yield* audit.statement({
              actor,
              action: "node.invite",
              ...(options.nodeId === undefined ? {} : { target: options.nodeId }),
              detail: { expires_at: Math.floor(expiresAt / 1000) }
            })
            yield* store.batch([
              // spent and expired invites older than a day go with each new one
              { sql: "DELETE FROM node_invites WHERE expires_at < ?", params: [now - 86_400_000] },
              {
                sql: "INSERT INTO node_invites (id, token_sealed, node_id, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                params: [id, sealer.seal(SEAL_PURPOSE, id, Buffer.from(token, "utf8")), options.nodeId ?? null, actor, now, expiresAt]
              },
              entry
            ])
            return { invite: encodeInvite({ url: options.joinUrl, token }), expiresAt, nodeId: options.nodeId }
          }),

        join: (request, remote) =>
          Effect.gen(function* () {
            if (!isOverlaySource(remote)) {
              return yield* refuse("COORDINATION_REFUSED", "a join comes from the cluster's private network", "call the join URL from the joining node's private address")
            }
            const now = yield* Clock.currentTimeMillis
            if (Math.abs(now / 1000 - request.iat) > JOIN_SKEW_SECONDS) return yield* unauthorized()
            const [invite] = yield* store.query({
              sql: "SELECT token_sealed, node_id FROM node_invites WHERE id = ? AND used_at IS NULL AND expires_at > ?",
              params: [request.invite_id, now]
            })
            if (invite === undefined) return yield* unauthorized()
            const token = yield* Effect.orElse(sealer.open(SEAL_PURPOSE, request.invite_id, String(invite.token_sealed)), () => unauthorized())
            const tokenText = Buffer.from(token).toString("utf8")
            if (!safeEqual(proofOf(tokenText, request), request.proof)) return yield* unauthorized()
            if (!claimSignatureHolds(request, request.signature)) return yield* unauthorized()
            if (invite.node_id !== null && invite.node_id !== request.node_id) {
              return yield* refuse("CONFLICT", "this invite admits another node", "join with the node id the invite was minted for, or ask for an invite for this node")
            }
            if (!keyMayHold(request.node_id, request.public_key)) {
              return yield* refuse("CONFLICT", "this node id is derived from another node's key", "join without PORTICO_NODE_ID: the node takes the id its own key derives")
            }
            const [existing] = yield* store.query({
              sql: "SELECT public_key, retired_at FROM cluster_nodes WHERE id = ?",
              params: [request.node_id]
            })
            if (existing !== undefined && existing.public_key !== request.public_key && existing.retired_at === null) {
              return yield* refuse("CONFLICT", "this node id is registered with another node's key", "give the joining node another PORTICO_NODE_ID")
            }
            const answer = yield* settings
            const entry = yield* audit.statement(
              { actor: `node:${request.node_id}`, action: "node.join", target: request.node_id },
              { sql: "EXISTS (SELECT 1 FROM node_invites WHERE id = ? AND used_at = ? AND used_by = ?)", params: [request.invite_id, now, request.node_id] }
            )
            const [spent, admitted] = yield* store.batch([
              {
                sql: "UPDATE node_invites SET used_at = ?, used_by = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?",
                params: [now, request.node_id, request.invite_id, now]
              },
              {
                // the node's row binds its id to its key now; its first heartbeat finds it its own
                sql: `INSERT INTO cluster_nodes (id, public_key, internal_url, version, joined_at, last_seen, left_at)
                      SELECT ?, ?, '', ?, ${REGISTRY_NOW}, ${REGISTRY_NOW}, ${REGISTRY_NOW}
                      WHERE EXISTS (SELECT 1 FROM node_invites WHERE id = ? AND used_at = ? AND used_by = ?)
                      ON CONFLICT (id) DO UPDATE SET public_key = excluded.public_key, joined_at = excluded.joined_at, retired_at = NULL
                      WHERE cluster_nodes.public_key = excluded.public_key OR cluster_nodes.retired_at IS NOT NULL`,
                params: [request.node_id, request.public_key, VERSION, request.invite_id, now, request.node_id]
              },
              entry
            ])
            if (spent === undefined || spent.rowsAffected === 0) return yield* unauthorized()
            if (admitted === undefined || admitted.rowsAffected === 0) {
              // taken between the check and the batch: the invite was not this node's to spend
              yield* store.exec({ sql: "UPDATE node_invites SET used_at = NULL, used_by = NULL WHERE id = ? AND used_by = ?", params: [request.invite_id, request.node_id] })
              return yield* refuse("CONFLICT", "this node id is registered with another node's key", "give the joining node another PORTICO_NODE_ID")
            }
            return sealAnswer(tokenText, request, Buffer.from(JSON.stringify(answer), "utf8"))
          })
      })
    })
  )

  /** Over the registry's, the configuration's, the sealer's and the audit trail's test doubles. */
  static readonly Test = Layer.suspend(() =>
    NodeInvites.Live.pipe(Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test, Sealer.Test, OperatorAudit.Test)))
  )
}
