/**
 * An operator's `repair` of a node (`POST /v1/node/command {node, command: "repair", namespace?}`;
 * docs/cluster.md, "Repair and spawn"), from any gateway: each namespace named (else every
 * namespace with a deployment homed on the node, read from the registry) is repaired on that node
 * (AppRepair.ts), here when the node is this one, else through `/v1/internal/namespace/repair`.
 * A node that does not answer fails the whole command with a retryable 503: a repair is safe to
 * send again.
 */
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { NamespaceRepaired } from "../../api/groups/NodeGroup.js"
import type { NodeCode } from "../../domain/Errors.js"
import { NamespaceName } from "../../domain/Names.js"
import { Membership } from "../cluster/Membership.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { AppRepair } from "../deployments/AppRepair.js"
import { OperatorAudit } from "../operators/OperatorAudit.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** A namespace's repair on another node: apps start within their start timeout, two at a time. */
const REPAIR_TIMEOUT = Duration.minutes(2)

export type NamespaceRepairedView = typeof NamespaceRepaired.Type

export interface NodeRepairService {
  readonly repair: (
    node: string,
    namespace: string | undefined,
    actor: string
  ) => Effect.Effect<{ readonly draining: boolean; readonly repaired: ReadonlyArray<NamespaceRepairedView> }, Refused<NodeCode> | StoreError>
}

const decodeAnswer = Schema.decodeUnknown(Schema.parseJson(NamespaceRepaired))

export class NodeRepair extends Context.Tag("portico/NodeRepair")<NodeRepair, NodeRepairService>() {
  static readonly Live = Layer.effect(
    NodeRepair,
    Effect.gen(function* () {
      const membership = yield* Membership
      const store = yield* RegistryStore
      const apps = yield* AppRepair
      const audit = yield* OperatorAudit
      const client = internalClient(yield* Coordination)
      const self = membership.self.id

      const onNode = (node: string, namespace: string) =>
        Effect.gen(function* () {
          if (node === self) return { node, namespace, ...(yield* apps.repair(namespace)) }
          const unreachable = refuse("UNAVAILABLE", `node ${node} did not answer the repair of ${namespace}`, "retry once the node is active: a repair is safe to repeat", 5)
          const answer = yield* Effect.mapError(client.call(node, "namespaceRepair", { namespace: NamespaceName.make(namespace) }, REPAIR_TIMEOUT), () => unreachable)
          if (answer.status !== 200) return yield* Effect.fail(unreachable)
          const decoded = yield* Effect.mapError(decodeAnswer(answer.text), () => unreachable)
          // a node answers for the node it is: another id is a wrong address
          return decoded.node === node ? decoded : yield* Effect.fail(unreachable)
        })

      return NodeRepair.of({
        repair: (node, namespace, actor) =>
          Effect.gen(function* () {
            const known = (yield* membership.nodes).find((n) => n.id === node)
            if (known === undefined || known.status === "retired") {
              return yield* Effect.fail(refuse("NOT_FOUND", `no node ${node} in this cluster (or it is retired)`, "GET /v1/network/peers lists the cluster's nodes"))
            }
            const namespaces =
              namespace !== undefined
                ? [namespace]
                : (yield* store.query({ sql: "SELECT DISTINCT namespace FROM deployments WHERE home_node = ? ORDER BY namespace", params: [node] })).map((r) => String(r.namespace))
            const done = yield* Effect.forEach(namespaces, (ns) => onNode(node, ns))
            const started = done.reduce((n, d) => n + d.started.length, 0)
            const failed = done.reduce((n, d) => n + d.failed.length, 0)
            yield* audit.record({ actor, action: "node.repair", target: node, detail: { namespaces: done.length, started, failed } })
            return { draining: known.draining, repaired: done }
          })
      })
    })
  )

  /** Over its collaborators' test doubles. */
  static readonly Test = Layer.suspend(() =>
    NodeRepair.Live.pipe(Layer.provide(Layer.mergeAll(Membership.Test, SqliteRegistryStore.Test, AppRepair.Test, OperatorAudit.Test, Coordination.Test)))
  )
}
