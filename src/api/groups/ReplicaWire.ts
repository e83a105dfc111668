/**
 * The wire of the replica routes (spec §4.10 `/v1/internal/deployments/replica/{setup,update,
 * rollback,env,teardown}`; docs/deployments.md, "Replicas"): what the home node sends a replica,
 * what the replica answers, and its refusals, which the spec gives as `{error: <reason>}` with a
 * fitting status (no `code`, unlike every other route). Each status is a class of its own: the
 * OpenAPI document shows one answer per status, and the API's error answer (ErrorResponses.ts)
 * writes a failure of that class with its status and the reason alone.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { NamespaceName } from "../../domain/Names.js"
import { strict } from "../Wire.js"
import { DeploymentName } from "./DeploymentsGroup.js"

const DeploymentId = Schema.String.pipe(Schema.pattern(/^d[0-9a-f]{24}$/))
const Version = Schema.Int.pipe(Schema.between(1, 1_000_000_000))
const Stamp = Schema.String.pipe(Schema.pattern(/^\d{1,20}$/))

const Target = { deployment_id: DeploymentId, namespace: NamespaceName, name: DeploymentName }

/** A version for a replica to run: `version`, whose directory is `artifact_version`'s (older for a rollback), stored as `cid`. */
export const ReplicaOrder = strict(
  Schema.Struct({ ...Target, version: Version, artifact_version: Version, cid: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)) })
)
export const ReplicaEnvOrder = strict(Schema.Struct({ ...Target, env_version: Stamp }))
export const ReplicaTeardownOrder = strict(Schema.Struct(Target))

export const ReplicaApplied = Schema.Struct({ node: Schema.String, version: Schema.Int, port: Schema.Int }).annotations({ identifier: "ReplicaApplied" })
export const ReplicaEnvApplied = Schema.Struct({ node: Schema.String, env_version: Stamp }).annotations({ identifier: "ReplicaEnvApplied" })
export const ReplicaRemoved = Schema.Struct({ node: Schema.String, removed: Schema.Literal(true) }).annotations({ identifier: "ReplicaRemoved" })

/** Every replica refusal class, with its status: the API's error answer (ErrorResponses.ts) writes them as `{error}`. */
const statusOfClass = new Map<unknown, number>()

const refusalOf = <const T extends string>(tag: T, status: number) => {
  class Refusal extends Schema.TaggedError<Refusal>()(tag, { error: Schema.String }) {}
  statusOfClass.set(Refusal, status)
  const wire = Schema.transform(Schema.Struct({ error: Schema.String }).annotations({ identifier: tag }), Refusal, {
    strict: true,
    decode: (body) => new Refusal({ error: body.error }),
    encode: (value) => ({ error: value.error })
  }).annotations(HttpApiSchema.annotations({ status }))
  return { Refusal, wire }
}

export const ReplicaInvalid = refusalOf("ReplicaInvalid", 400)
export const ReplicaMismatch = refusalOf("ReplicaMismatch", 404)
export const ReplicaConflict = refusalOf("ReplicaConflict", 409)
export const ReplicaFailed = refusalOf("ReplicaFailed", 502)
export const ReplicaUnavailable = refusalOf("ReplicaUnavailable", 503)

/** Every replica refusal, for an endpoint's `addError`. */
export const replicaRefusals = [ReplicaInvalid.wire, ReplicaMismatch.wire, ReplicaConflict.wire, ReplicaFailed.wire, ReplicaUnavailable.wire] as const

/** The refusal of `status` carrying `reason`. */
export const replicaRefusal = (status: 400 | 404 | 409 | 502 | 503, reason: string) => {
  switch (status) {
    case 400:
      return new ReplicaInvalid.Refusal({ error: reason })
    case 404:
      return new ReplicaMismatch.Refusal({ error: reason })
    case 409:
      return new ReplicaConflict.Refusal({ error: reason })
    case 502:
      return new ReplicaFailed.Refusal({ error: reason })
    case 503:
      return new ReplicaUnavailable.Refusal({ error: reason })
  }
}

/** A replica route's refusal as it goes on the wire: its status and `{error}` body; undefined for anything else. */
export const replicaAnswerOf = (u: unknown): { readonly status: number; readonly body: string } | undefined => {
  if (typeof u !== "object" || u === null) return undefined
  const status = statusOfClass.get(u.constructor)
  return status === undefined ? undefined : { status, body: JSON.stringify({ error: (u as { readonly error: string }).error }) }
}
