/**
 * Namespaces made and found by a signed-in wallet (spec §4.9; docs/namespaces.md): create, the
 * caller's list (all of them for an operator) and one namespace's status. A wallet's session of
 * the platform realm or of any namespace (policy `wallet`); never an API key.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { NamespaceCreateRefusals, Wire, wiresOf } from "../../domain/Errors.js"
import { NamespaceName } from "../../domain/Names.js"
import { Authentication } from "../Gates.js"
import { wallet } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"

export const CreateNamespace = strict(Schema.Struct({ name: NamespaceName })).annotations({ identifier: "CreateNamespace" })

export const CreatedNamespace = Schema.Struct({
  namespace: Schema.String,
  owner: Schema.String,
  created_at: UnixSeconds,
  api_key: Schema.String.annotations({ description: "the namespace's owner-level admin key, shown once" }),
  key_id: Schema.String
}).annotations({ identifier: "CreatedNamespace" })

export const NamespaceList = Schema.Struct({
  namespaces: Schema.Array(
    Schema.Struct({
      name: Schema.String,
      owner: Schema.NullOr(Schema.String),
      created_at: UnixSeconds,
      role: Schema.NullOr(Schema.String).annotations({ description: "the caller's role in it; null in an operator's listing of another's" })
    })
  ),
  all: Schema.Boolean.annotations({ description: "true: every namespace (the caller is an operator); false: the caller's" })
}).annotations({ identifier: "NamespaceList" })

export const StatusQuery = strict(
  Schema.Struct({
    id: Schema.optional(Schema.String.pipe(Schema.maxLength(256))).annotations({ description: "the namespace's name; required (400 without)" })
  })
)

export const NamespaceStatus = Schema.Struct({
  name: Schema.String,
  owner: Schema.NullOr(Schema.String),
  created_at: UnixSeconds,
  members: Schema.Int,
  deleting: Schema.Boolean.annotations({ description: "a deletion of it runs or is owed" })
}).annotations({ identifier: "NamespaceStatus" })

export class NamespaceCreateGroup extends HttpApiGroup.make("namespaceCreate")
  .add(HttpApiEndpoint.post("createNamespace", "/v1/namespaces").setPayload(CreateNamespace).addSuccess(CreatedNamespace, { status: 201 }))
  .add(HttpApiEndpoint.get("listNamespaces", "/v1/namespace/list").addSuccess(NamespaceList))
  .add(HttpApiEndpoint.get("namespaceStatus", "/v1/namespace/status").setUrlParams(StatusQuery).addSuccess(NamespaceStatus).addError(Wire.NotFound))
  .middlewareEndpoints(Authentication)
  .annotate(RoutePolicy, wallet)
  .addError(wiresOf(NamespaceCreateRefusals)) {}
