/**
 * A deployed app's process as its developer sees it (spec §4.8 `logs`, `stats`), exactly as
 * docs/deployments.md's "Routes" table fixes them: the deployment named by `?name=` in the
 * caller's namespace, control plane, 404 NOT_FOUND for an unknown name. Both answer from the
 * home node's runtime (docs/deployments.md, "The runtime"); a static site has no process (no
 * lines, nothing running).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { DeploymentRuntimeRouteRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { controlPlane } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { QueryInteger, strict } from "../Wire.js"
import { DeploymentName } from "./DeploymentsGroup.js"

export const LOG_LINES_MAX = 1000
export const LOG_LINES_DEFAULT = 100

const LogLines = QueryInteger()
  .pipe(Schema.between(1, LOG_LINES_MAX, { message: () => `lines is 1 to ${LOG_LINES_MAX}` }))
  .annotations({
    description: `how many of the last lines, 1 to ${LOG_LINES_MAX}; default ${LOG_LINES_DEFAULT}`,
    jsonSchema: { type: "integer", minimum: 1, maximum: LOG_LINES_MAX, default: LOG_LINES_DEFAULT }
  })

export const DeploymentLogs = Schema.Struct({
  name: Schema.String,
  lines: Schema.Array(Schema.String).annotations({
    description:
      "the app's stdout and stderr, oldest first, with the gateway's own lines (start, exit, restart) prefixed [portico]; a line over 16 KiB is cut and ends in …"
  })
}).annotations({ identifier: "DeploymentLogs" })

const Count = Schema.Number
export const DeploymentStats = Schema.Struct({
  name: Schema.String,
  status: Schema.Literal("deploying", "active", "failed", "stopped"),
  running: Schema.Boolean.annotations({ description: "a process of this deployment runs now" }),
  cpu_seconds: Count.annotations({ description: "CPU time of the current process and its children, from its cgroup" }),
  memory_bytes: Count.annotations({ description: "memory in use now, from the cgroup" }),
  memory_peak_bytes: Count.annotations({ description: "the most memory the current process has used" }),
  memory_limit_bytes: Count.annotations({ description: "the recorded limit" }),
  pids: Count.annotations({ description: "processes and threads now" }),
  restarts: Count.annotations({ description: "restarts by the supervisor since the app was last started (deploy, update, rollback, env change, gateway start)" }),
  uptime_seconds: Count.annotations({ description: "since the current process was launched; 0 when none runs" })
}).annotations({ identifier: "DeploymentStats" })

export class DeploymentRuntimeGroup extends HttpApiGroup.make("deploymentRuntime")
  .add(
    HttpApiEndpoint.get("logs", "/v1/deployments/logs")
      .setUrlParams(strict(Schema.Struct({ name: DeploymentName, lines: Schema.optional(LogLines) })))
      .addSuccess(DeploymentLogs)
  )
  .add(
    HttpApiEndpoint.get("stats", "/v1/deployments/stats")
      .setUrlParams(strict(Schema.Struct({ name: DeploymentName })))
      .addSuccess(DeploymentStats)
  )
  .middleware(Authentication)
  .addError(wiresOf(DeploymentRuntimeRouteRefusals))
  .annotate(RoutePolicy, controlPlane) {}
