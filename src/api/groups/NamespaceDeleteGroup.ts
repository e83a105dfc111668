/**
 * Deleting a namespace and everything it holds (spec §4.9; docs/namespaces.md, "Deleting a
 * namespace"): the owner's `POST /v1/namespace/delete`, naming its own namespace in the body as
 * the confirmation, and an operator's `POST /v1/operator/namespaces/remove` with a reason (kept in
 * the operator audit trail). Both are idempotent: a namespace gone already answers 200.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { TeardownRefusals, wiresOf } from "../../domain/Errors.js"
import { NamespaceName } from "../../domain/Names.js"
import { PlainText } from "../../domain/Text.js"
import { Authentication } from "../Gates.js"
import { operator, owner } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict } from "../Wire.js"

export const DeleteNamespace = strict(
  Schema.Struct({
    namespace: Schema.String.annotations({ description: "the caller's own namespace, named again as the confirmation; any other name is 400" })
  })
).annotations({ identifier: "DeleteNamespace" })

export const RemoveNamespace = strict(
  Schema.Struct({
    namespace: NamespaceName,
    reason: PlainText.pipe(Schema.minLength(1), Schema.maxLength(500)).annotations({ description: "1-500 characters, kept in the operator audit trail" })
  })
).annotations({ identifier: "RemoveNamespace" })

export const NamespaceDeleted = Schema.Struct({
  namespace: Schema.String,
  deleted: Schema.Boolean.annotations({ description: "true: nothing of the namespace is left; false: cleanup_pending" }),
  cleanup_pending: Schema.Boolean.annotations({
    description: "a part could not be removed yet: it is recorded and retried in the background; the name stays taken until it is done"
  })
}).annotations({ identifier: "NamespaceDeleted" })

export class NamespaceDeleteGroup extends HttpApiGroup.make("namespaceDelete")
  .add(HttpApiEndpoint.post("deleteNamespace", "/v1/namespace/delete").setPayload(DeleteNamespace).addSuccess(NamespaceDeleted).annotate(RoutePolicy, owner))
  .add(
    HttpApiEndpoint.post("removeNamespace", "/v1/operator/namespaces/remove").setPayload(RemoveNamespace).addSuccess(NamespaceDeleted).annotate(RoutePolicy, operator)
  )
  .middlewareEndpoints(Authentication)
  .addError(wiresOf(TeardownRefusals)) {}
