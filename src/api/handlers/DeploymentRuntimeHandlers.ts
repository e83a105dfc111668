import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Option } from "effect"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { isDynamic } from "../../layers/deployments/DeploymentRecord.js"
import { DeploymentStore } from "../../layers/deployments/DeploymentStore.js"
import { InstanceDirs, instanceName } from "../../layers/deployments/InstanceDirs.js"
import { AppRuntime } from "../../layers/deployments/runtime/AppRuntime.js"
import { refuse } from "../../layers/Refused.js"
import { PorticoApi } from "../Api.js"
import { LOG_LINES_DEFAULT } from "../groups/DeploymentRuntimeGroup.js"
import { refusedOrDown } from "./Refusals.js"

export const DeploymentRuntimeHandlers = HttpApiBuilder.group(PorticoApi, "deploymentRuntime", (handlers) =>
  Effect.gen(function* () {
    const store = yield* DeploymentStore
    const runtime = yield* AppRuntime
    const instances = yield* InstanceDirs
    const named = (name: string) =>
      Effect.flatMap(CurrentPrincipal, (p) =>
        Effect.mapError(
          Effect.flatMap(store.get(p.namespace, name), (found) =>
            Option.match(found, { onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${name} in namespace ${p.namespace}`)), onSome: Effect.succeed })
          ),
          refusedOrDown
        )
      )
    return handlers
      .handle("logs", ({ urlParams }) =>
        Effect.gen(function* () {
          const record = yield* named(urlParams.name)
          if (!isDynamic(record.type)) return { name: record.name, lines: [] }
          // the log of a deployment this gateway has not started (failed before a restart) is read from its own directory
          const instance = instanceName(record.namespace, record.name)
          const dir = instances.ownerOf(instance) === record.id ? `${instances.root}/${instance}` : undefined
          return { name: record.name, lines: yield* runtime.logs(record.id, urlParams.lines ?? LOG_LINES_DEFAULT, dir) }
        })
      )
      .handle("stats", ({ urlParams }) =>
        Effect.gen(function* () {
          const record = yield* named(urlParams.name)
          const stats = yield* runtime.stats(record.id)
          return {
            name: record.name,
            status: record.status,
            running: stats?.running ?? false,
            cpu_seconds: stats?.cpuSeconds ?? 0,
            memory_bytes: stats?.memoryBytes ?? 0,
            memory_peak_bytes: stats?.memoryPeakBytes ?? 0,
            memory_limit_bytes: record.limits.memoryBytes,
            pids: stats?.pids ?? 0,
            restarts: stats?.restarts ?? 0,
            uptime_seconds: stats?.uptimeSeconds ?? 0
          }
        })
      )
  })
)
