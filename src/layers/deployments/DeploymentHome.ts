/**
 * A dynamic deployment runs on its home node (spec §4.8): its update, rollback and environment
 * change are forwarded there by any other gateway of the cluster, through the internal client
 * (src/layers/coordination/InternalClient.ts), and the home node's answer, success or refusal,
 * goes back as it came; a home node that is not configured, does not answer in time or answers
 * with anything but a deployments refusal is 503 HOME_NODE_UNREACHABLE with Retry-After.
 *
 * A delete is forwarded the same way, so the home node stops the app and removes its directory
 * under the deployment's lock. When the home node does not answer, the records are removed here
 * with a teardown owed to it in the same batch (DeploymentStore `remove`), which its gateway
 * carries out at start and then every `SWEEP_EVERY` (`sweep`). docs/deployments.md, "Several gateways".
 */
import { Duration, Effect, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import type { EnvChange } from "../../domain/DeploymentEnv.js"
import { type DeploymentRouteCode, DeploymentRouteRefusals } from "../../domain/Errors.js"
import type { NamespaceName } from "../../domain/Names.js"
import type { PeerAnswer, PeerUnreachable } from "../coordination/Coordination.js"
import type { InternalClient } from "../coordination/InternalClient.js"
import type { PorticoSettings } from "../config/PorticoConfig.js"
import { type Refused, refuse } from "../Refused.js"
import type { RegistryStoreService, StoreError } from "../registry/RegistryStore.js"
import type { DeploymentForm } from "./DeploymentForm.js"
import type { DeploymentLocksService } from "./DeploymentLocks.js"
import { type DeploymentRecord, isDynamic } from "./DeploymentRecord.js"
import type { DeploymentStoreService } from "./DeploymentStore.js"
import type { InstanceDirsService } from "./InstanceDirs.js"
import type { AppRuntimeService } from "./runtime/AppRuntime.js"

type Failure = Refused<DeploymentRouteCode> | StoreError

/** A stored deployment's namespace: a valid name when the deployment was made. */
const namespaceOf = (record: DeploymentRecord) => record.namespace as NamespaceName

/**
 * An update or rollback starts the app (a Node.js install alone may take 4 minutes), then the
 * replicas (ReplicaFanout's REPLICAS_TOTAL): the forwarding hop holds both.
 */
export const CHANGE_TIMEOUT = Duration.minutes(11)
/** A delete stops a process and removes a directory. */
const DELETE_TIMEOUT = Duration.seconds(60)
/** How often a gateway looks for teardowns owed to its node (and once at its start). */
export const SWEEP_EVERY = Duration.seconds(30)
const RETRY_AFTER_SECONDS = 30

const Envelope = Schema.parseJson(Schema.Struct({ error: Schema.String, code: Schema.String, hint: Schema.optional(Schema.String) }))
const decodeEnvelope = Schema.decodeUnknownOption(Envelope)
const passable: ReadonlySet<string> = new Set(DeploymentRouteRefusals)
const isRouteCode = (code: string): code is DeploymentRouteCode => passable.has(code)

const EnvSetAnswer = Schema.parseJson(Schema.Struct({ names: Schema.Array(Schema.String), env_version: Schema.BigInt, restarted: Schema.Boolean }))
const decodeEnvSet = Schema.decodeUnknownOption(EnvSetAnswer)

const TeardownRow = Schema.Struct({ deployment_id: Schema.String, namespace: Schema.String, name: Schema.String })
const decodeTeardowns = Schema.decodeUnknown(Schema.Array(TeardownRow))

export interface DeploymentHomeTools {
  readonly config: PorticoSettings
  readonly internal: InternalClient
  readonly registry: RegistryStoreService
  readonly store: DeploymentStoreService
  readonly locks: DeploymentLocksService
  readonly instances: InstanceDirsService
  readonly runtime: AppRuntimeService
}

export interface DeploymentHomeService {
  /** Whether `record`'s changes run on another node: a dynamic app homed elsewhere. */
  readonly elsewhere: (record: DeploymentRecord) => boolean
  /** The update on the home node: the form's fields and archive, streamed as they are read. */
  readonly update: (record: DeploymentRecord, form: DeploymentForm) => Effect.Effect<DeploymentRecord, Failure>
  readonly rollback: (record: DeploymentRecord, version: number) => Effect.Effect<DeploymentRecord, Failure>
  readonly setEnv: (
    record: DeploymentRecord,
    change: EnvChange
  ) => Effect.Effect<{ readonly names: ReadonlyArray<string>; readonly envVersion: bigint; readonly restarted: boolean }, Failure>
  /** The delete on the home node; when it does not answer, the records go here with a teardown owed to it. */
  readonly remove: (record: DeploymentRecord) => Effect.Effect<void, Failure>
  /** Carries out the teardowns owed to this node: each app stopped, its directory removed, its row removed. */
  readonly sweep: Effect.Effect<void>
}

/** The update form again, the checked fields first and the archive streamed last. */
async function* updateForm(boundary: string, form: DeploymentForm): AsyncGenerator<Uint8Array> {
  const text = (s: string) => new TextEncoder().encode(s)
  const fields: Array<readonly [string, string]> = [["name", form.fields.name]]
  if (form.fields.healthCheck !== undefined) fields.push(["health_check", form.fields.healthCheck])
  if (form.fields.skipInstall) fields.push(["skip_install", "true"])
  for (const [name, value] of fields) yield text(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
  yield text(`--${boundary}\r\nContent-Disposition: form-data; name="archive"; filename="archive.tar.gz"\r\nContent-Type: application/gzip\r\n\r\n`)
  yield* form.archive
  yield text(`\r\n--${boundary}--\r\n`)
}

export const makeDeploymentHome = (tools: DeploymentHomeTools): DeploymentHomeService => {
  const { config, internal, store } = tools

  const unreachable = (home: string) =>
    refuse("HOME_NODE_UNREACHABLE", `the deployment's home node (${home}) is not reachable from this gateway`, "retry shortly", RETRY_AFTER_SECONDS)

  /** The home node's answer: its body on success, its refusal as it came, anything else unreachable. */
  const answered = (home: string, answer: PeerAnswer): Effect.Effect<string, Failure> => {
    if (answer.status === 200 || answer.status === 201) return Effect.succeed(answer.text)
    const envelope = decodeEnvelope(answer.text)
    if (Option.isNone(envelope)) return Effect.fail(unreachable(home))
    const { code, error, hint } = envelope.value
    if (code === "COORDINATION_REFUSED") {
      // the home node refused this gateway, not the client: a cluster misconfiguration for the operator's log
      return Effect.zipRight(Effect.logWarning(`the home node ${home} refused this gateway's coordination call: ${error}`), Effect.fail(unreachable(home)))
    }
    if (!isRouteCode(code)) return Effect.fail(unreachable(home))
    const retry = Number(answer.retryAfter)
    return Effect.fail(refuse(code, error, hint, Number.isFinite(retry) && retry > 0 ? retry : undefined))
  }

  const forwarded = (home: string, call: Effect.Effect<PeerAnswer, PeerUnreachable>) =>
    Effect.flatMap(Effect.mapError(call, () => unreachable(home)), (answer) => answered(home, answer))

  /** The record as the home node left it, read from the registry every gateway shares. */
  const reread = (record: DeploymentRecord) =>
    Effect.flatMap(store.byId(record.namespace, record.id), (found) =>
      Option.match(found, {
        onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${record.name} in this namespace`)),
        onSome: Effect.succeed
      })
    )

  const teardown = (row: typeof TeardownRow.Type) =>
    tools.locks
      .withLock(
        row.deployment_id,
        Effect.gen(function* () {
          yield* tools.runtime.stop(row.deployment_id)
          yield* tools.instances.release({ id: row.deployment_id, namespace: row.namespace, name: row.name })
          yield* tools.registry.batch([
            { sql: "DELETE FROM deployment_teardowns WHERE deployment_id = ? AND home_node = ?", params: [row.deployment_id, config.nodeId] },
            // a replica's row goes with it (its record is gone)
            { sql: "DELETE FROM deployment_replicas WHERE deployment_id = ? AND node_id = ?", params: [row.deployment_id, config.nodeId] }
          ])
        })
      )
      .pipe(Effect.catchAll((e) => Effect.logWarning(`owed teardown of deployment ${row.deployment_id} not done yet: ${"detail" in e ? e.detail : e.reason}`)))

  return {
    elsewhere: (record) => isDynamic(record.type) && record.homeNode !== config.nodeId,
    update: (record, form) => {
      const boundary = `portico-forward-${randomBytes(12).toString("hex")}`
      const envelope = { namespace: namespaceOf(record), name: record.name, type: record.type }
      const sent = internal.update(record.homeNode, envelope, `multipart/form-data; boundary=${boundary}`, updateForm(boundary, form), CHANGE_TIMEOUT)
      return Effect.gen(function* () {
        const outcome = yield* Effect.either(forwarded(record.homeNode, sent))
        // the client's own body was cut or malformed: its 400, not the home node's
        const failure = form.formFailure()
        if (failure !== undefined) return yield* Effect.fail(refuse("BAD_REQUEST", failure.message, "send the fields first and the archive last, as one whole multipart body"))
        if (outcome._tag === "Left") return yield* Effect.fail(outcome.left)
        return yield* reread(record)
      })
    },
    rollback: (record, version) =>
      Effect.zipRight(
        forwarded(record.homeNode, internal.call(record.homeNode, "deploymentRollback", { namespace: namespaceOf(record), name: record.name, version }, CHANGE_TIMEOUT)),
        reread(record)
      ),
    setEnv: (record, change) =>
      Effect.flatMap(
        forwarded(
          record.homeNode,
          internal.call(
            record.homeNode,
            "deploymentEnvSet",
            // the route's request schema took `set` as an object of strings (EnvSetRequest)
            { namespace: namespaceOf(record), name: record.name, set: change.set as Readonly<Record<string, string>> | undefined, unset: change.unset?.map(String) },
            CHANGE_TIMEOUT
          )
        ),
        (text) =>
          Option.match(decodeEnvSet(text), {
            onNone: () => Effect.fail(unreachable(record.homeNode)),
            onSome: (env) => Effect.succeed({ names: env.names, envVersion: env.env_version, restarted: env.restarted })
          })
      ),
    remove: (record) =>
      Effect.gen(function* () {
        const call = internal.call(record.homeNode, "deploymentDelete", { namespace: namespaceOf(record), name: record.name }, DELETE_TIMEOUT)
        const outcome = yield* Effect.either(forwarded(record.homeNode, call))
        if (outcome._tag === "Right") return
        if (outcome.left._tag !== "Refused" || outcome.left.code !== "HOME_NODE_UNREACHABLE") return yield* Effect.fail(outcome.left)
        // the home node is gone for now: the records go, and it stops the app when it is back
        yield* Effect.logWarning(`deployment ${record.id} deleted while its home node ${record.homeNode} did not answer: a teardown is owed to it`)
        yield* store.remove(record.namespace, record.id, record.homeNode)
      }),
    sweep: Effect.gen(function* () {
      const rows = yield* tools.registry.query({
        sql: "SELECT deployment_id, namespace, name FROM deployment_teardowns WHERE home_node = ? ORDER BY deployment_id",
        params: [config.nodeId]
      })
      const owed = yield* Effect.orDie(decodeTeardowns(rows))
      yield* Effect.forEach(owed, teardown, { discard: true })
    }).pipe(Effect.catchAll((e) => Effect.logWarning(`owed deployment teardowns not read: ${e.detail}`)))
  }
}
