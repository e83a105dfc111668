/**
 * The loopback node routes of spec §4.10 (docs/cluster.md, "The node routes"): a process on a
 * node's machine that holds the node's key speaks for the node through the gateway there.
 *
 * - `enrolKey`: binds a node id to a key, stamped by that key. An id derived from a key
 *   (src/domain/NodeStamp.ts) is bound to that key only; a named id to the first key enrolled.
 *   Enrolling a key already bound is a no-op. Enrolment claims no liveness: the row reads
 *   `inactive` until the node's first heartbeat.
 * - `register`: the node's internal URL, version and public URL, and a heartbeat.
 * - `heartbeat`: `last_seen` now, by the registry's clock, as the gateway's own loop writes it.
 *
 * Every call is refused unless it comes from this machine (a loopback source), carries a fresh
 * stamp that holds for the key bound to the node id (for `enrolKey`, the key enrolled), and spends
 * its nonce here for the first time. A retired node's key is refused.
 */
import { Context, Effect, Layer } from "effect"
import { type NodeCode } from "../../domain/errors/Families.js"
import { keyMayHold, readStamp, type Stamp, STAMP_SKEW_SECONDS, type StampedRequest, stampHolds } from "../../domain/NodeStamp.js"
import { nonceLedger } from "../coordination/NonceLedger.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { REGISTRY_NOW } from "../cluster/Membership.js"

export type NodeEnrolmentRefused = Refused<NodeCode>

/** What a stamped call carries besides its body's fields. */
export interface StampedCall {
  readonly request: StampedRequest
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly remote: string | undefined
}

export interface NodeEnrolled {
  readonly node: string
  readonly publicKey: string
  /** Whether this call bound the key; false when it was bound before. */
  readonly enrolled: boolean
}

export interface NodeBeat {
  readonly node: string
  readonly draining: boolean
}

export interface NodeEnrolmentService {
  readonly enrolKey: (call: StampedCall, publicKey: string) => Effect.Effect<NodeEnrolled, NodeEnrolmentRefused | StoreError>
  readonly register: (
    call: StampedCall,
    internalUrl: string,
    version: string,
    publicUrl: string | undefined
  ) => Effect.Effect<NodeBeat, NodeEnrolmentRefused | StoreError>
  readonly heartbeat: (call: StampedCall) => Effect.Effect<NodeBeat, NodeEnrolmentRefused | StoreError>
}

/** A loopback source: 127.0.0.0/8, ::1, or either mapped into IPv6. */
export const isLoopbackSource = (address: string | undefined): boolean => {
  if (address === undefined) return false
  const ip = address.startsWith("::ffff:") ? address.slice(7) : address
  return ip === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(ip)
}

const refused = (reason: string) => refuse("COORDINATION_REFUSED", reason, "stamp the request with the node key (X-Portico-Node-Id, -Stamp, -Time, -Nonce) from the node's own machine")
const taken = () => refuse("CONFLICT", "this node id is registered with another node's key", "enrol the key the node id was bound to, or give the node another id")
const retired = () => refuse("CONFLICT", "this node left the cluster and its key is retired", "start a new node on an empty data directory with `portico serve --join <invite>`")

export class NodeEnrolment extends Context.Tag("portico/NodeEnrolment")<NodeEnrolment, NodeEnrolmentService>() {
  static readonly Live = Layer.scoped(
    NodeEnrolment,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const ledger = nonceLedger(config.dataDir)
      yield* Effect.addFinalizer(() => Effect.sync(() => ledger.close()))

      const rowOf = (id: string) =>
        Effect.map(
          store.query({ sql: "SELECT public_key, retired_at, draining_at FROM cluster_nodes WHERE id = ?", params: [id] }),
          ([row]) => row as { public_key: string; retired_at: number | null; draining_at: number | null } | undefined
        )

      /** The source and the stamp's headers, before anything is read from the registry. */
      const fromHere = (call: StampedCall) =>
        Effect.gen(function* () {
          if (!isLoopbackSource(call.remote)) return yield* refused("node routes are served to the node's own machine only")
          const read = readStamp(call.headers, Date.now())
          if ("refused" in read) return yield* refused(read.refused)
          return read.stamp
        })

      /**
       * The stamp checked for `key` (the key bound to the id, else the one to be enrolled), its
       * nonce spent only once the signature holds: a forged call cannot use up a genuine one's.
       */
      const checked = (call: StampedCall, stamp: Stamp, key: string) =>
        Effect.gen(function* () {
          if (!stampHolds(key, call.request, stamp)) return yield* refused("node stamp invalid")
          const fresh = yield* Effect.try(() => ledger.spend(`stamp:${stamp.nonce}`, (Number(stamp.time) + STAMP_SKEW_SECONDS) * 1000)).pipe(
            Effect.orElseSucceed(() => undefined)
          )
          if (fresh === undefined) return yield* refuse("UNAVAILABLE", "this node could not record the stamp's nonce", "retry shortly", 5)
          if (!fresh) return yield* refused("node stamp replayed")
        })

      /** The enrolled row of a stamped call, the stamp checked against its bound key. */
      const enrolledCaller = (call: StampedCall) =>
        Effect.gen(function* () {
          const stamp = yield* fromHere(call)
          const id = stamp.nodeId
          const row = yield* rowOf(id)
          if (row === undefined) return yield* refuse("NOT_FOUND", `node ${id} has no enrolled key`, "enrol the node's key first: POST /v1/internal/node/enrol-key")
          yield* checked(call, stamp, row.public_key)
          if (row.retired_at !== null) return yield* retired()
          return { id, row }
        })

      const beat = (call: StampedCall, set: string, params: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const { id, row } = yield* enrolledCaller(call)
          const written = yield* store.exec({
            sql: `UPDATE cluster_nodes SET ${set}last_seen = ${REGISTRY_NOW}, left_at = NULL WHERE id = ? AND public_key = ? AND retired_at IS NULL`,
            params: [...params, id, row.public_key]
          })
          // the row changed between the read and the write: retired, or its key replaced
          if (written.rowsAffected !== 1) return yield* retired()
          return { node: id, draining: row.draining_at !== null }
        })

      return NodeEnrolment.of({
        enrolKey: (call, publicKey) =>
          Effect.gen(function* () {
            const stamp = yield* fromHere(call)
            const id = stamp.nodeId
            yield* checked(call, stamp, publicKey)
            if (!keyMayHold(id, publicKey)) return yield* refuse("CONFLICT", "this node id is derived from another key", "enrol the key the id derives from")
            const row = yield* rowOf(id)
            if (row !== undefined) {
              if (row.public_key !== publicKey) return yield* taken()
              if (row.retired_at !== null) return yield* retired()
              return { node: id, publicKey, enrolled: false }
            }
            // last_seen 0: enrolled, not yet alive
            const inserted = yield* store.exec({
              sql: `INSERT INTO cluster_nodes (id, public_key, internal_url, version, joined_at, last_seen) VALUES (?, ?, '', '', ${REGISTRY_NOW}, 0)
                    ON CONFLICT (id) DO NOTHING`,
              params: [id, publicKey]
            })
            if (inserted.rowsAffected === 1) return { node: id, publicKey, enrolled: true }
            // another enrolment won the race: the same key is a no-op, another is refused
            const now = yield* rowOf(id)
            if (now?.public_key !== publicKey) return yield* taken()
            return { node: id, publicKey, enrolled: false }
          }),
        register: (call, internalUrl, version, publicUrl) =>
          publicUrl === undefined
            ? beat(call, "internal_url = ?, version = ?, ", [internalUrl, version])
            : beat(call, "internal_url = ?, version = ?, public_url = ?, ", [internalUrl, version, publicUrl]),
        heartbeat: (call) => beat(call, "", [])
      })
    })
  )

  /** Over an embedded registry of its own. */
  static readonly Test = Layer.suspend(() => NodeEnrolment.Live.pipe(Layer.provide(Layer.mergeAll(SqliteRegistryStore.Test, PorticoConfig.Test))))
}
