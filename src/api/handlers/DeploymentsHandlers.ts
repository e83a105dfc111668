/**
 * The deployments routes (docs/deployments.md, "Routes"): each hands the caller's namespace and
 * the request to the Deployments service and answers its record in the wire's shape.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import { CurrentPrincipal } from "../../domain/Principal.js"
import type { DeploymentEvent, DeploymentRecord, DeploymentType } from "../../layers/deployments/DeploymentRecord.js"
import { Deployments } from "../../layers/deployments/Deployments.js"
import { PorticoApi } from "../Api.js"
import { bodyOf } from "../NodeAdapter.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { refusedOrDown } from "./Refusals.js"

const seconds = (nanos: bigint): number => Number(nanos / 1_000_000_000n)

/** A record as the wire's `Deployment`. */
export const deploymentView = (d: DeploymentRecord) => ({
  id: d.id,
  name: d.name,
  namespace: d.namespace,
  type: d.type,
  status: d.status,
  version: d.version,
  domain: d.domain,
  port: d.port ?? null,
  health_check: d.healthPath ?? null,
  content_cid: d.contentCid ?? null,
  limits: { memory_bytes: d.limits.memoryBytes, cpu_millis: d.limits.cpuMillis, pids: d.limits.pids, restart_policy: d.limits.restartPolicy },
  created_at: d.createdAt,
  updated_at: seconds(d.updatedAt)
})

const eventView = (e: DeploymentEvent) => ({ seq: e.seq, type: e.type, version: e.version, at: e.at, detail: e.detail })

export const DeploymentsHandlers = HttpApiBuilder.group(PorticoApi, "deployments", (handlers) =>
  Effect.gen(function* () {
    const deployments = yield* Deployments
    /** The caller's namespace, and the service's refusals as the catalogue's errors. */
    const inNamespace = <A, E extends Parameters<typeof refusedOrDown>[0]>(work: (namespace: string) => Effect.Effect<A, E>) =>
      Effect.flatMap(CurrentPrincipal, (caller) => Effect.mapError(work(caller.namespace), refusedOrDown))
    const streamed = (write: typeof deployments.upload, type: DeploymentType) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.map(inNamespace((ns) => write(ns, type, request.headers["content-type"] ?? "", bodyOf(request))), deploymentView)
      )
    return handlers
      .handle("upload", ({ path }) => streamed(deployments.upload, path.type))
      .handle("update", ({ path }) => streamed(deployments.update, path.type))
      .handle("list", ({ urlParams }) =>
        Effect.map(inNamespace((ns) => deployments.list(ns, pageRequest(urlParams))), (page) => ({
          deployments: page.items.map(deploymentView),
          next_cursor: nextCursorOf(page)
        }))
      )
      .handle("get", ({ urlParams }) => Effect.map(inNamespace((ns) => deployments.get(ns, urlParams.name)), deploymentView))
      .handle("delete", ({ payload }) => Effect.as(inNamespace((ns) => deployments.remove(ns, payload.name)), { name: payload.name, deleted: true as const }))
      .handle("versions", ({ urlParams }) =>
        Effect.map(inNamespace((ns) => deployments.versions(ns, urlParams.name)), ({ record, versions }) => ({
          name: record.name,
          current: record.version,
          versions: versions.map((v) => ({ version: v.version, source: v.source, rollback_from: v.rollbackFrom ?? null, created_at: v.createdAt }))
        }))
      )
      .handle("rollback", ({ payload }) => Effect.map(inNamespace((ns) => deployments.rollback(ns, payload.name, payload.version)), deploymentView))
      .handle("events", ({ urlParams }) =>
        Effect.map(inNamespace((ns) => deployments.events(ns, urlParams.name, pageRequest(urlParams))), (page) => ({
          events: page.items.map(eventView),
          next_cursor: nextCursorOf(page)
        }))
      )
      .handle("env", ({ urlParams }) =>
        Effect.map(inNamespace((ns) => deployments.env(ns, urlParams.name)), (env) => ({
          name: urlParams.name,
          names: env.names,
          env_version: env.envVersion.toString()
        }))
      )
      .handle("envSet", ({ payload }) =>
        Effect.map(inNamespace((ns) => deployments.setEnv(ns, payload.name, { set: payload.set, unset: payload.unset })), (env) => ({
          name: payload.name,
          names: env.names,
          env_version: env.envVersion.toString(),
          restarted: env.restarted
        }))
      )
      .handle("grants", ({ urlParams }) => Effect.map(inNamespace((ns) => deployments.grants(ns, urlParams.name)), (grants) => ({ name: urlParams.name, grants })))
      .handle("setGrants", ({ payload }) =>
        Effect.map(inNamespace((ns) => deployments.setGrants(ns, payload.name, payload.grants)), (grants) => ({ name: payload.name, grants }))
      )
  })
)
