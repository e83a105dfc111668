/**
 * The registry's deployment tables (spec §2.7, §3.4) behind named reads and writes, on either
 * registry engine: records, one row per version, events and custom domains.
 *
 * Every rule that two writers could race on is one statement or one atomic batch whose predicate
 * decides, since rqlite has no interactive transactions: a taken name, domain or port leaves the
 * create's INSERT … SELECT … WHERE with no row (and the unique indexes stand behind it); a version
 * or environment write names the value it replaces, so a row that moved meanwhile is a 409, never
 * a lost write. Changes of one deployment also take turns under DeploymentLocks on the home node.
 *
 * The environment is sealed under the Sealer's `deployment-env` key bound to `<namespace>/<id>`,
 * so a sealed value copied to another deployment or namespace does not open.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type RegistryStoreService, type Statement, StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { Sealer, type SealerService } from "../secrets/Sealer.js"
import { refuse } from "../Refused.js"
import { type CustomDomainsService, makeCustomDomains } from "./CustomDomains.js"
import { DEFAULT_DEPLOYMENTS_PER_NAMESPACE } from "../config/DeploymentSettings.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type DeploymentEventsService, eventStatements, makeDeploymentEvents, nowSeconds } from "./DeploymentEvents.js"
import type { DeploymentRefused } from "./DeploymentRefused.js"
import {
  checkDeploymentGrants,
  defaultDeploymentGrants,
  defaultHealthPath,
  defaultLimits,
  type DeploymentRecord,
  type DeploymentStatus,
  type DeploymentType,
  type EventDetail,
  isDynamic,
  type Limits,
  newDeploymentId,
  nextStamp,
  stampText,
  type VersionRecord
} from "./DeploymentRecord.js"
import {
  decodeDeployments,
  decodeVersions,
  DEPLOYMENT_COLUMNS,
  FREE_PORT_SQL,
  owedTeardowns,
  toDeployment,
  toVersion
} from "./DeploymentRows.js"

export type { DeploymentRefused }

/** What a create needs; the rest takes the defaults of DeploymentRecord.ts. */
export interface NewDeployment {
  /** The record's id when the caller chose it (`newDeploymentId`: a first upload locks it before the record exists); else a new one. */
  readonly id?: string | undefined
  readonly namespace: string
  readonly name: string
  readonly type: DeploymentType
  /** `<name>-<random>.<base-domain>` or the `--subdomain` override (the deployment rules make it). */
  readonly domain: string
  readonly homeNode: string
  readonly artifact: string
  readonly limits?: Limits | undefined
  readonly healthPath?: string | undefined
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly grants?: ReadonlyArray<string> | undefined
  /** Default `deploying`: the first version is set up after the record holds the name. */
  readonly status?: DeploymentStatus | undefined
}

/** The opened environment with what a compare-and-swap must name. */
export interface StoredEnvironment {
  readonly env: Readonly<Record<string, string>>
  /** The sealed value as stored: the compare-and-swap's expected value. */
  readonly sealed: string
  readonly version: bigint
}

export interface DeploymentStoreService extends DeploymentEventsService, CustomDomainsService {
  /**
   * Writes a new record at version 1 with its first version row and a `created` event. A taken
   * name in the namespace is DEPLOYMENT_EXISTS, a taken domain (another deployment's, or a
   * verified custom domain; a pending claim takes nothing) CONFLICT, no free port on the home
   * node UNAVAILABLE; nothing is written then.
   */
  readonly create: (input: NewDeployment) => Effect.Effect<DeploymentRecord, StoreError | DeploymentRefused>
  readonly get: (namespace: string, name: string) => Effect.Effect<Option.Option<DeploymentRecord>, StoreError>
  readonly byId: (namespace: string, id: string) => Effect.Effect<Option.Option<DeploymentRecord>, StoreError>
  /** The deployment a request's `Host` names: its own domain or a verified custom domain. */
  readonly byHost: (host: string) => Effect.Effect<Option.Option<DeploymentRecord>, StoreError>
  /** The namespace's deployments in name order, in keyset pages. */
  readonly list: (namespace: string, page: PageRequest) => Effect.Effect<Page<DeploymentRecord>, StoreError>
  /** Every deployment `node` runs (for the supervisor at start and the instance-directory rule). */
  readonly onNode: (node: string) => Effect.Effect<ReadonlyArray<DeploymentRecord>, StoreError>
  /**
   * Update: version + 1 pointing at `artifact`, only while the record is at `expectedVersion`
   * (else CONFLICT: rerun). An `updated` event in the same batch. With `healthPath`, the
   * deployment's health path becomes it in the same write (an update that changes it).
   */
  readonly addVersion: (
    namespace: string,
    id: string,
    expectedVersion: number,
    artifact: string,
    healthPath?: string
  ) => Effect.Effect<DeploymentRecord, StoreError | DeploymentRefused>
  /**
   * Rollback: a new version (current + 1) pointing at `toVersion`'s artifact; NOT_FOUND when that
   * version is unknown, CONFLICT when the record is no longer at `expectedVersion`.
   */
  readonly rollback: (
    namespace: string,
    id: string,
    expectedVersion: number,
    toVersion: number
  ) => Effect.Effect<DeploymentRecord, StoreError | DeploymentRefused>
  readonly versions: (namespace: string, id: string) => Effect.Effect<ReadonlyArray<VersionRecord>, StoreError>
  readonly setStatus: (
    namespace: string,
    id: string,
    status: DeploymentStatus,
    detail?: EventDetail
  ) => Effect.Effect<boolean, StoreError>
  /** The opened environment; NOT_FOUND when there is no such deployment. */
  readonly environment: (namespace: string, id: string) => Effect.Effect<StoredEnvironment, StoreError | DeploymentRefused>
  /**
   * Replaces the environment only while the stored sealed value is still `expected.sealed`
   * (else ENV_CHANGED, 409: rerun). The new version stamp is strictly after the row's last one
   * and is also its `updated_at`. `names` of the event: what the change set or unset, never values.
   */
  readonly writeEnvironment: (
    namespace: string,
    id: string,
    expected: StoredEnvironment,
    env: Readonly<Record<string, string>>,
    names: ReadonlyArray<string>
  ) => Effect.Effect<bigint, StoreError | DeploymentRefused>
  /** Replaces the grants: data plane only (VALIDATION_FAILED naming the grant otherwise). */
  readonly setGrants: (
    namespace: string,
    id: string,
    grants: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>, StoreError | DeploymentRefused>
  /**
   * Removes the record and every row of it (versions, events, domains); false when there was none.
   * `teardownOwedBy`: the home node that did not answer, owed the app's teardown (DeploymentHome.ts),
   * written in the same batch.
   */
  readonly remove: (namespace: string, id: string, teardownOwedBy?: string) => Effect.Effect<boolean, StoreError>
}

export interface DeploymentStoreOptions {
  /** The app port range, inclusive (spec §8: 10200-19999; tests narrow it). */
  readonly ports?: { readonly first: number; readonly last: number } | undefined
  /** Events kept per deployment, newest first (default 1000). */
  readonly eventsKept?: number | undefined
  /** Deployments one namespace may hold (default 100). */
  readonly perNamespace?: number | undefined
}

const envOwner = (namespace: string, id: string) => `${namespace}/${id}`

export const makeDeploymentStore = (store: RegistryStoreService, sealer: SealerService, options: DeploymentStoreOptions = {}): DeploymentStoreService => {
  const firstPort = options.ports?.first ?? 10200
  const lastPort = options.ports?.last ?? 19999
  const eventsKept = options.eventsKept ?? 1000
  const perNamespace = options.perNamespace ?? DEFAULT_DEPLOYMENTS_PER_NAMESPACE
  const events = makeDeploymentEvents(store, eventsKept)

  const sealEnv = (namespace: string, id: string, env: Readonly<Record<string, string>>) =>
    sealer.seal("deployment-env", envOwner(namespace, id), Buffer.from(JSON.stringify(env), "utf8"))

  const selectOne = (where: string, params: ReadonlyArray<string | number>) =>
    Effect.map(
      Effect.flatMap(store.query({ sql: `SELECT ${DEPLOYMENT_COLUMNS} FROM deployments WHERE ${where}`, params }), decodeDeployments),
      (rows) => Option.map(Option.fromNullable(rows[0]), toDeployment)
    )

  const get: DeploymentStoreService["get"] = (namespace, name) => selectOne("namespace = ? AND name = ?", [namespace, name])
  const byId: DeploymentStoreService["byId"] = (namespace, id) => selectOne("namespace = ? AND id = ?", [namespace, id])
  const rowById = (id: string) => selectOne("id = ?", [id])

  const required = (namespace: string, id: string) =>
    Effect.flatMap(byId(namespace, id), (found) =>
      Option.match(found, {
        onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${id} in namespace ${namespace}`) as DeploymentRefused),
        onSome: Effect.succeed
      })
    )

  // The lowest free port of the node's range, NULL when the range is full (ports are unique per node).
  const freePortSql = FREE_PORT_SQL

  /** Why a create wrote nothing: the first rule its predicate found broken. */
  const createRefusal = (input: NewDeployment) =>
    Effect.gen(function* () {
      const taken = yield* store.query({ sql: "SELECT 1 FROM deployments WHERE namespace = ? AND name = ?", params: [input.namespace, input.name] })
      if (taken.length > 0) {
        return refuse("DEPLOYMENT_EXISTS", `deployment ${input.name} exists in namespace ${input.namespace}`, "deploy with --update to replace it")
      }
      const held = yield* store.query({ sql: "SELECT COUNT(*) AS n FROM deployments WHERE namespace = ?", params: [input.namespace] })
      if (Number(held[0]?.["n"] ?? 0) >= perNamespace) {
        return refuse("VALIDATION_FAILED", `namespace ${input.namespace} holds ${perNamespace} deployments, the most one namespace may`, "delete one first; the operator sets the bound (PORTICO_DEPLOYMENTS_PER_NAMESPACE)")
      }
      const domain = yield* store.query({
        sql: "SELECT 1 FROM deployments WHERE domain = ? UNION ALL SELECT 1 FROM deployment_domains WHERE domain = ? AND verified_at IS NOT NULL",
        params: [input.domain, input.domain]
      })
      if (domain.length > 0) return refuse("CONFLICT", `domain ${input.domain} is taken`, "choose another subdomain")
      return refuse("UNAVAILABLE", `no free app port on node ${input.homeNode}`, "delete a deployment on this node or deploy on another")
    })

  const create: DeploymentStoreService["create"] = (input) =>
    Effect.gen(function* () {
      const id = input.id ?? newDeploymentId()
      const stamp = yield* nextStamp(undefined)
      const now = yield* nowSeconds
      const dynamic = isDynamic(input.type)
      const limits = input.limits ?? defaultLimits
      const grants = checkDeploymentGrants(input.grants ?? defaultDeploymentGrants)
      if (!grants.ok) return yield* refuse("VALIDATION_FAILED", `grants: ${grants.refused} is not a data-plane grant`)
      const node = input.homeNode
      const portParams = [node, firstPort, firstPort, node, firstPort, lastPort]
      const insert: Statement = {
        sql: `INSERT INTO deployments (id, namespace, name, type, status, version, domain, home_node, port, artifact, memory_bytes,
                cpu_millis, pids, restart_policy, health_path, grants, env_sealed, env_version, created_at, updated_at)
              SELECT ?, ?, ?, ?, ?, 1, ?, ?, p.port, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
              FROM (SELECT ${dynamic ? freePortSql : "NULL"} AS port) p
              WHERE (? = 0 OR p.port IS NOT NULL)
                AND NOT EXISTS (SELECT 1 FROM deployments WHERE namespace = ? AND name = ?)
                AND (SELECT COUNT(*) FROM deployments WHERE namespace = ?) < ?
                AND NOT EXISTS (SELECT 1 FROM deployments WHERE domain = ?)
                AND NOT EXISTS (SELECT 1 FROM deployment_domains WHERE domain = ? AND verified_at IS NOT NULL)`,
        params: [
          id, input.namespace, input.name, input.type, input.status ?? "deploying", input.domain, node,
          input.artifact, limits.memoryBytes, limits.cpuMillis, limits.pids, limits.restartPolicy,
          dynamic ? (input.healthPath ?? defaultHealthPath) : null,
          JSON.stringify(grants.grants), sealEnv(input.namespace, id, input.env ?? {}), stampText(stamp), now, stampText(stamp),
          // positional, in the text's order: the select list, the port's subquery, the WHERE
          ...(dynamic ? portParams : []),
          dynamic ? 1 : 0, input.namespace, input.name, input.namespace, perNamespace, input.domain, input.domain
        ]
      }
      const written = yield* store
        .batch([
          insert,
          {
            sql: `INSERT INTO deployment_versions (deployment_id, version, artifact, source, rollback_from, created_at)
                  SELECT id, 1, artifact, 'upload', NULL, ? FROM deployments WHERE id = ?`,
            params: [now, id]
          },
          ...eventStatements(eventsKept, id, "created", now, {}, stamp)
        ])
        .pipe(Effect.catchIf((e) => e.reason === "constraint", () => Effect.succeed([{ rowsAffected: 0, lastInsertId: 0 }])))
      if ((written[0]?.rowsAffected ?? 0) === 0) return yield* Effect.flatMap(createRefusal(input), Effect.fail)
      const record = yield* rowById(id)
      return yield* Option.match(record, {
        onNone: () => Effect.fail(new StoreError({ reason: "statement", detail: `deployment ${id} just written is missing` })),
        onSome: Effect.succeed
      })
    })

  const byHost: DeploymentStoreService["byHost"] = (host) =>
    Effect.gen(function* () {
      const own = yield* selectOne("domain = ?", [host])
      if (Option.isSome(own)) return own
      return yield* Effect.map(
        Effect.flatMap(
          store.query({
            sql: `SELECT ${DEPLOYMENT_COLUMNS} FROM deployments WHERE id = (
                    SELECT deployment_id FROM deployment_domains WHERE domain = ? AND verified_at IS NOT NULL)`,
            params: [host]
          }),
          decodeDeployments
        ),
        (rows) => Option.map(Option.fromNullable(rows[0]), toDeployment)
      )
    })

  const list: DeploymentStoreService["list"] = (namespace, page) =>
    Effect.flatMap(
      readPage(
        store,
        { select: `SELECT ${DEPLOYMENT_COLUMNS} FROM deployments`, where: ["namespace = ?"], params: [namespace], order: ["name"], direction: "asc" },
        page,
        (row) => row
      ),
      (read) => Effect.map(decodeDeployments(read.items), (rows) => ({ items: rows.map(toDeployment), next: read.next }))
    )

  const onNode: DeploymentStoreService["onNode"] = (node) =>
    Effect.map(
      Effect.flatMap(store.query({ sql: `SELECT ${DEPLOYMENT_COLUMNS} FROM deployments WHERE home_node = ? ORDER BY id`, params: [node] }), decodeDeployments),
      (rows) => rows.map(toDeployment)
    )

  /** Moves the record from `expectedVersion` to the next, pointing at `artifact`, with its version row and event. */
  const nextVersion = (
    namespace: string,
    id: string,
    expectedVersion: number,
    artifact: string,
    source: "update" | "rollback",
    rollbackFrom: number | null,
    healthPath?: string
  ) =>
    Effect.gen(function* () {
      const current = yield* required(namespace, id)
      if (current.version !== expectedVersion) {
        return yield* refuse("CONFLICT", `deployment ${current.name} is at version ${current.version}, not ${expectedVersion}`, "rerun")
      }
      const stamp = yield* nextStamp(current.updatedAt)
      const now = yield* nowSeconds
      const written = yield* store.batch([
        {
          sql: "UPDATE deployments SET version = version + 1, artifact = ?, health_path = COALESCE(?, health_path), updated_at = ? WHERE namespace = ? AND id = ? AND version = ?",
          params: [artifact, healthPath ?? null, stampText(stamp), namespace, id, expectedVersion]
        },
        // only beside the update above: the row at the next version carrying this write's stamp
        {
          sql: `INSERT INTO deployment_versions (deployment_id, version, artifact, source, rollback_from, created_at)
                SELECT id, version, artifact, ?, ?, ? FROM deployments WHERE id = ? AND version = ? AND updated_at = ?`,
          params: [source, rollbackFrom, now, id, expectedVersion + 1, stampText(stamp)]
        },
        ...eventStatements(eventsKept, id, source === "update" ? "updated" : "rolled_back", now, rollbackFrom === null ? {} : { from_version: rollbackFrom }, stamp)
      ])
      if ((written[0]?.rowsAffected ?? 0) === 0) {
        return yield* refuse("CONFLICT", `deployment ${current.name} moved while it was being changed`, "rerun")
      }
      return yield* required(namespace, id)
    })

  const addVersion: DeploymentStoreService["addVersion"] = (namespace, id, expectedVersion, artifact, healthPath) =>
    nextVersion(namespace, id, expectedVersion, artifact, "update", null, healthPath)

  const rollback: DeploymentStoreService["rollback"] = (namespace, id, expectedVersion, toVersion) =>
    Effect.gen(function* () {
      yield* required(namespace, id)
      const rows = yield* Effect.flatMap(
        store.query({
          sql: "SELECT version, artifact, source, rollback_from, created_at FROM deployment_versions WHERE deployment_id = ? AND version = ?",
          params: [id, toVersion]
        }),
        decodeVersions
      )
      const target = rows[0]
      if (target === undefined) return yield* refuse("NOT_FOUND", `deployment ${id} has no version ${toVersion}`)
      return yield* nextVersion(namespace, id, expectedVersion, target.artifact, "rollback", toVersion)
    })

  const versions: DeploymentStoreService["versions"] = (namespace, id) =>
    Effect.map(
      Effect.flatMap(
        store.query({
          sql: `SELECT v.version, v.artifact, v.source, v.rollback_from, v.created_at FROM deployment_versions v
                JOIN deployments d ON d.id = v.deployment_id WHERE d.namespace = ? AND d.id = ? ORDER BY v.version`,
          params: [namespace, id]
        }),
        decodeVersions
      ),
      (rows) => rows.map(toVersion)
    )

  const setStatus: DeploymentStoreService["setStatus"] = (namespace, id, status, detail = {}) =>
    Effect.gen(function* () {
      const found = yield* byId(namespace, id)
      if (Option.isNone(found)) return false
      const stamp = yield* nextStamp(found.value.updatedAt)
      const now = yield* nowSeconds
      const written = yield* store.batch([
        {
          sql: "UPDATE deployments SET status = ?, updated_at = ? WHERE namespace = ? AND id = ? AND updated_at < ?",
          params: [status, stampText(stamp), namespace, id, stampText(stamp)]
        },
        ...eventStatements(eventsKept, id, "status_changed", now, { ...detail, status }, stamp)
      ])
      return (written[0]?.rowsAffected ?? 0) > 0
    })

  const environment: DeploymentStoreService["environment"] = (namespace, id) =>
    Effect.gen(function* () {
      const rows = yield* store.query({ sql: "SELECT env_sealed, env_version FROM deployments WHERE namespace = ? AND id = ?", params: [namespace, id] })
      const row = rows[0]
      if (row === undefined) return yield* refuse("NOT_FOUND", `no deployment ${id} in namespace ${namespace}`)
      const sealed = String(row["env_sealed"])
      const bytes = yield* Effect.mapError(
        sealer.open("deployment-env", envOwner(namespace, id), sealed),
        (e) => new StoreError({ reason: "statement", detail: `the environment of ${namespace}/${id} does not open: ${e.detail}` })
      )
      const env = yield* Effect.try({
        try: () => JSON.parse(Buffer.from(bytes).toString("utf8")) as Record<string, string>,
        catch: () => new StoreError({ reason: "statement", detail: `the environment of ${namespace}/${id} is not JSON` })
      })
      return { env, sealed, version: BigInt(String(row["env_version"])) }
    })

  const writeEnvironment: DeploymentStoreService["writeEnvironment"] = (namespace, id, expected, env, names) =>
    Effect.gen(function* () {
      const current = yield* required(namespace, id)
      // strictly after both the last environment version and the row's last write
      const previous = current.updatedAt > expected.version ? current.updatedAt : expected.version
      const stamp = yield* nextStamp(previous)
      const now = yield* nowSeconds
      const written = yield* store.batch([
        {
          sql: "UPDATE deployments SET env_sealed = ?, env_version = ?, updated_at = ? WHERE namespace = ? AND id = ? AND env_sealed = ? AND updated_at < ?",
          params: [sealEnv(namespace, id, env), stampText(stamp), stampText(stamp), namespace, id, expected.sealed, stampText(stamp)]
        },
        ...eventStatements(eventsKept, id, "env_changed", now, { names: [...names].sort().join(",") }, stamp)
      ])
      if ((written[0]?.rowsAffected ?? 0) === 0) {
        return yield* refuse("ENV_CHANGED", `the environment of ${current.name} changed meanwhile`, "read it again and rerun the change")
      }
      return stamp
    })

  const setGrants: DeploymentStoreService["setGrants"] = (namespace, id, grants) =>
    Effect.gen(function* () {
      const checked = checkDeploymentGrants(grants)
      if (!checked.ok) {
        return yield* refuse("VALIDATION_FAILED", `grants: ${checked.refused} is not a data-plane grant`, "a deployment is never granted the control plane")
      }
      const current = yield* required(namespace, id)
      const stamp = yield* nextStamp(current.updatedAt)
      const now = yield* nowSeconds
      const written = yield* store.batch([
        {
          sql: "UPDATE deployments SET grants = ?, updated_at = ? WHERE namespace = ? AND id = ? AND updated_at < ?",
          params: [JSON.stringify(checked.grants), stampText(stamp), namespace, id, stampText(stamp)]
        },
        ...eventStatements(eventsKept, id, "grants_changed", now, { grants: checked.grants.join(",") }, stamp)
      ])
      if ((written[0]?.rowsAffected ?? 0) === 0) return yield* refuse("CONFLICT", `deployment ${current.name} moved meanwhile`, "rerun")
      return checked.grants
    })

  const remove: DeploymentStoreService["remove"] = (namespace, id, teardownOwedBy) =>
    Effect.gen(function* () {
      const found = yield* byId(namespace, id)
      if (Option.isNone(found)) return false
      // written only if this batch removes the record (their predicate)
      const owed = owedTeardowns(namespace, id, yield* Clock.currentTimeMillis, teardownOwedBy)
      const written = yield* store.batch([
        ...owed,
        { sql: "DELETE FROM deployment_replicas WHERE deployment_id = ?", params: [id] },
        { sql: "DELETE FROM deployment_domains WHERE deployment_id = ?", params: [id] },
        { sql: "DELETE FROM deployment_events WHERE deployment_id = ?", params: [id] },
        { sql: "DELETE FROM deployment_versions WHERE deployment_id = ?", params: [id] },
        { sql: "DELETE FROM deployments WHERE namespace = ? AND id = ?", params: [namespace, id] }
      ])
      return (written.at(-1)?.rowsAffected ?? 0) > 0
    })

  return {
    create,
    get,
    byId,
    byHost,
    list,
    onNode,
    addVersion,
    rollback,
    versions,
    setStatus,
    environment,
    writeEnvironment,
    setGrants,
    ...events,
    ...makeCustomDomains(store, events),
    remove
  }
}

export class DeploymentStore extends Context.Tag("portico/DeploymentStore")<DeploymentStore, DeploymentStoreService>() {
  static readonly Live = Layer.effect(
    DeploymentStore,
    Effect.gen(function* () {
      const { appPorts, perNamespace } = (yield* PorticoConfig).deployments
      return makeDeploymentStore(yield* RegistryStore, yield* Sealer, { ports: appPorts, perNamespace })
    })
  )
  /** The store over the registry's and the sealer's test doubles. */
  static readonly Test = Layer.suspend(() =>
    DeploymentStore.Live.pipe(Layer.provide(Layer.mergeAll(SqliteRegistryStore.Test, Sealer.Test, PorticoConfig.Test)))
  )
}
