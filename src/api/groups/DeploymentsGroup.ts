/**
 * Deployments (spec §2.7, §3.4, §4.8): upload and update of an app's content archive, and the
 * management routes, exactly as docs/deployments.md's "Routes" table fixes them. A deployment is
 * addressed by its name in the caller's namespace: reads take `?name=`, changes a JSON body
 * naming it. Every route is control plane, but the whole-set write of grants (owner or admin).
 * The logs, stats and domains routes are other groups'.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { DEPLOYMENT_TYPES, isDeploymentName, NAME_MAX_LENGTH } from "../../domain/DeploymentRules.js"
import { DeploymentRouteRefusals, wiresOf } from "../../domain/Errors.js"
import { streamedBody } from "../OpenApiFacts.js"
import { Authentication } from "../Gates.js"
import { NextCursor, pageQueryFields } from "../Paging.js"
import { controlPlane, namespaceWrite } from "../Policy.js"
import { BodyCap, RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"

export const DeploymentTypeParam = Schema.Literal(...DEPLOYMENT_TYPES).annotations({
  identifier: "DeploymentType",
  description: "static: files served from storage; nextjs (standalone SSR output), go (a compiled `app`), nodejs: a sandboxed process"
})

/** A deployment's name (spec §2.7): refused with 400 before anything is looked up. */
export const DeploymentName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_-]{0,55}$/, {
    message: () => `a deployment name is 1-${NAME_MAX_LENGTH} letters, digits, '-' and '_', the first a letter or digit`
  }),
  Schema.filter(isDeploymentName)
).annotations({ description: `1-${NAME_MAX_LENGTH} letters, digits, '-' and '_', the first a letter or digit` })

const NameQuery = strict(Schema.Struct({ name: DeploymentName }))
const NameBody = strict(Schema.Struct({ name: DeploymentName })).annotations({ identifier: "DeploymentNamed" })

export const DeploymentLimits = Schema.Struct({
  memory_bytes: Schema.Int,
  cpu_millis: Schema.Int.annotations({ description: "thousandths of one CPU: 1000 is one core's worth of time" }),
  pids: Schema.Int.annotations({ description: "processes and threads together" }),
  restart_policy: Schema.Literal("always", "on-failure", "never")
}).annotations({ identifier: "DeploymentLimits" })

export const Deployment = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  namespace: Schema.String,
  type: DeploymentTypeParam,
  status: Schema.Literal("deploying", "active", "failed", "stopped"),
  version: Schema.Int,
  domain: Schema.String.annotations({ description: "the host it is served on" }),
  port: Schema.NullOr(Schema.Int).annotations({ description: "the app's port on its node; null for a static site" }),
  health_check: Schema.NullOr(Schema.String).annotations({ description: "the health path; null for a static site" }),
  content_cid: Schema.NullOr(Schema.String).annotations({
    description: "a static site's content CID (its manifest, which names each file's CID), readable with the storage routes; null for an app that runs a process"
  }),
  limits: DeploymentLimits,
  created_at: UnixSeconds,
  updated_at: UnixSeconds
}).annotations({ identifier: "Deployment" })

export const DeploymentList = Schema.Struct({
  deployments: Schema.Array(Deployment).annotations({ description: "one page, in name order" }),
  next_cursor: NextCursor
}).annotations({ identifier: "DeploymentList" })

export const DeploymentDeleted = Schema.Struct({ name: Schema.String, deleted: Schema.Literal(true) }).annotations({
  identifier: "DeploymentDeleted"
})

export const DeploymentVersion = Schema.Struct({
  version: Schema.Int,
  source: Schema.Literal("upload", "update", "rollback"),
  rollback_from: Schema.NullOr(Schema.Int).annotations({ description: "for a rollback: the version whose content it serves" }),
  created_at: UnixSeconds
}).annotations({ identifier: "DeploymentVersion" })

export const DeploymentVersions = Schema.Struct({
  name: Schema.String,
  current: Schema.Int,
  versions: Schema.Array(DeploymentVersion).annotations({ description: "newest first" })
}).annotations({ identifier: "DeploymentVersions" })

export const RollbackRequest = strict(
  Schema.Struct({ name: DeploymentName, version: Schema.Int.pipe(Schema.positive()) })
).annotations({ identifier: "DeploymentRollback", description: "makes a new version serving `version`'s content" })

export const DeploymentEvent = Schema.Struct({
  seq: Schema.Int,
  type: Schema.String,
  version: Schema.Int,
  at: UnixSeconds,
  detail: Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number) })
}).annotations({ identifier: "DeploymentEvent" })

export const DeploymentEvents = Schema.Struct({
  events: Schema.Array(DeploymentEvent).annotations({ description: "newest first" }),
  next_cursor: NextCursor
}).annotations({ identifier: "DeploymentEvents" })

const EnvVersion = Schema.String.annotations({ description: "the environment's version stamp: nanoseconds since the epoch, as decimal text" })

export const DeploymentEnv = Schema.Struct({
  name: Schema.String,
  names: Schema.Array(Schema.String).annotations({ description: "the variables' names, sorted; values are never answered" }),
  env_version: EnvVersion
}).annotations({ identifier: "DeploymentEnv" })

/**
 * `set`: a JSON object of strings, taken as the parsed object itself. A decoded Schema.Record is
 * rebuilt by assignment, where a name `__proto__` (a valid variable name) would set the
 * prototype and vanish; the object JSON parsing made holds it as an own member.
 */
export const EnvAssignments = Schema.declare(
  (u: unknown): u is { readonly [name: string]: string } =>
    typeof u === "object" && u !== null && !Array.isArray(u) && Object.getPrototypeOf(u) === Object.prototype && Object.values(u).every((v) => typeof v === "string"),
  {
    identifier: "DeploymentEnvAssignments",
    description: "variable names to their values",
    jsonSchema: { type: "object", additionalProperties: { type: "string" } }
  }
)

export const EnvSetRequest = strict(
  Schema.Struct({
    name: DeploymentName,
    set: Schema.optional(EnvAssignments),
    unset: Schema.optional(Schema.Array(Schema.String))
  })
).annotations({
  identifier: "DeploymentEnvSet",
  description: "names in set are set to their values, names in unset removed; platform names (PORT, PORTICO_TOKEN_FILE, ...) are refused"
})

export const DeploymentEnvSet = Schema.Struct({
  name: Schema.String,
  names: Schema.Array(Schema.String),
  env_version: EnvVersion,
  restarted: Schema.Boolean.annotations({ description: "a dynamic app was restarted with the new environment (a static site only records it)" })
}).annotations({ identifier: "DeploymentEnvSetAnswer" })

export const DeploymentGrants = Schema.Struct({
  name: Schema.String,
  grants: Schema.Array(Schema.String).annotations({ description: "what the app's workload token holds from its next renewal" })
}).annotations({ identifier: "DeploymentGrants" })

export const SetGrantsRequest = strict(
  Schema.Struct({ name: DeploymentName, grants: Schema.Array(Schema.String).pipe(Schema.maxItems(64)) })
).annotations({ identifier: "DeploymentSetGrants", description: "replaces the grants: data-plane grants only (a control-plane grant is 400 naming it)" })

const TypePath = Schema.Struct({ type: DeploymentTypeParam })

const archiveForm = (required: ReadonlyArray<string>, fields: Record<string, unknown>, description: string) =>
  streamedBody({
    contentType: "multipart/form-data",
    schema: {
      type: "object",
      required: [...required, "archive"],
      properties: {
        ...fields,
        archive: {
          type: "string",
          format: "binary",
          description: "the content archive (tar.gz), the last part: unpacked as it streams, never held whole; 256 MiB uploaded, 1 GiB unpacked, 100,000 entries (413 past a cap)"
        }
      },
      // any other part is refused (400)
      additionalProperties: false
    },
    description
  })

const nameField = { type: "string", pattern: "^[A-Za-z0-9][A-Za-z0-9_-]{0,55}$", description: "the deployment's name in the namespace" }
const healthField = { type: "string", description: "the health path of a dynamic app (default /health), answering 200 when ready" }
const skipInstallField = { type: "string", enum: ["true", "false"], description: "nodejs only: true uses the uploaded node_modules as it is" }

const uploadForm = archiveForm(
  ["name"],
  {
    name: nameField,
    subdomain: { type: "string", description: "serve on <subdomain>.<base domain> instead of <name>-<random>.<base domain>" },
    health_check: healthField,
    env: { type: "string", description: "a JSON object of strings: the first environment (names and values checked as env/set's)" },
    skip_install: skipInstallField
  },
  "multipart form: the fields first, the archive last; the name, subdomain and env are checked before anything is stored"
)

export const updateForm = archiveForm(
  ["name"],
  { name: nameField, health_check: healthField, skip_install: skipInstallField },
  "multipart form: the fields first, the archive last; the path's type must be the deployment's"
)

export class DeploymentsGroup extends HttpApiGroup.make("deployments")
  .add(
    HttpApiEndpoint.post("upload")`/v1/deployments/${HttpApiSchema.param("type", DeploymentTypeParam)}/upload`
      .addSuccess(Deployment, { status: 201 })
      .annotate(BodyCap, "deployUpload")
      .annotateContext(uploadForm)
  )
  .add(
    HttpApiEndpoint.post("update")`/v1/deployments/${HttpApiSchema.param("type", DeploymentTypeParam)}/update`
      .addSuccess(Deployment)
      .annotate(BodyCap, "deployUpload")
      .annotateContext(updateForm)
  )
  .add(HttpApiEndpoint.get("list", "/v1/deployments/list").setUrlParams(strict(Schema.Struct(pageQueryFields(["text"])))).addSuccess(DeploymentList))
  .add(HttpApiEndpoint.get("get", "/v1/deployments/get").setUrlParams(NameQuery).addSuccess(Deployment))
  .add(HttpApiEndpoint.post("delete", "/v1/deployments/delete").setPayload(NameBody).addSuccess(DeploymentDeleted))
  .add(HttpApiEndpoint.get("versions", "/v1/deployments/versions").setUrlParams(NameQuery).addSuccess(DeploymentVersions))
  .add(HttpApiEndpoint.post("rollback", "/v1/deployments/rollback").setPayload(RollbackRequest).addSuccess(Deployment))
  .add(
    HttpApiEndpoint.get("events", "/v1/deployments/events")
      .setUrlParams(strict(Schema.Struct({ name: DeploymentName, ...pageQueryFields(["int"]) })))
      .addSuccess(DeploymentEvents)
  )
  .add(HttpApiEndpoint.get("env", "/v1/deployments/env").setUrlParams(NameQuery).addSuccess(DeploymentEnv))
  .add(HttpApiEndpoint.post("envSet", "/v1/deployments/env/set").setPayload(EnvSetRequest).addSuccess(DeploymentEnvSet))
  .add(HttpApiEndpoint.get("grants", "/v1/deployments/grants").setUrlParams(NameQuery).addSuccess(DeploymentGrants))
  .add(
    HttpApiEndpoint.put("setGrants", "/v1/deployments/grants")
      .setPayload(SetGrantsRequest)
      .addSuccess(DeploymentGrants)
      .annotate(RoutePolicy, namespaceWrite)
  )
  .middleware(Authentication)
  .addError(wiresOf(DeploymentRouteRefusals))
  .annotate(RoutePolicy, controlPlane) {}
