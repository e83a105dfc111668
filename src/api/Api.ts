/**
 * The Portico HTTP API: every route group and its errors. Client-safe (src/client.ts builds the
 * typed client from it): it and its groups import only `effect`, `@effect/platform`, `src/domain`
 * and the API's own definition modules. Each endpoint names its gate (Gates.ts) and carries its
 * facts (RouteFacts.ts); the server builds everything else from them.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { Context, Option } from "effect"
import { Wire } from "../domain/Errors.js"
import { openApiDocument, type WalletOnly } from "./OpenApiDocument.js"
import { RoutePolicy } from "./RouteFacts.js"
import { AuditGroup } from "./groups/AuditGroup.js"
import { AuthGroup } from "./groups/AuthGroup.js"
import { CacheGroup } from "./groups/CacheGroup.js"
import { CorsGroup } from "./groups/CorsGroup.js"
import { DeploymentsGroup } from "./groups/DeploymentsGroup.js"
import { DeploymentDomainsGroup } from "./groups/DeploymentDomainsGroup.js"
import { DeploymentRuntimeGroup } from "./groups/DeploymentRuntimeGroup.js"
import { DeviceGroup } from "./groups/DeviceGroup.js"
import { NamespaceGroup } from "./groups/NamespaceGroup.js"
import { NamespaceBackupGroup } from "./groups/NamespaceBackupGroup.js"
import { NamespaceDeleteGroup } from "./groups/NamespaceDeleteGroup.js"
import { NamespaceCreateGroup } from "./groups/NamespaceCreateGroup.js"
import { OperatorGroup } from "./groups/OperatorGroup.js"
import { NetworkGroup } from "./groups/NetworkGroup.js"
import { JoinGroup } from "./groups/JoinGroup.js"
import { NodeStampGroup } from "./groups/NodeStampGroup.js"
import { EdgeGroup } from "./groups/EdgeGroup.js"
import { NodeGroup } from "./groups/NodeGroup.js"
import { DatabaseGroup } from "./groups/DatabaseGroup.js"
import { SqlGroup } from "./groups/SqlGroup.js"
import { InternalGroup } from "./groups/InternalGroup.js"
import { PushGroup } from "./groups/PushGroup.js"
import { ProxyGroup } from "./groups/ProxyGroup.js"
import { PubSubGroup } from "./groups/PubSubGroup.js"
import { VaultGroup } from "./groups/VaultGroup.js"
import { WebRtcEventsGroup, WebRtcGroup, WebRtcNamespaceGroup } from "./groups/WebRtcGroup.js"
import { FunctionsGroup, InvokeGroup } from "./groups/FunctionsGroup.js"
import { PushRegistrationGroup } from "./groups/PushRegistrationGroup.js"
import { PushRelayGroup } from "./groups/PushRelayGroup.js"
import { PushSendGroup } from "./groups/PushSendGroup.js"
import { StorageGroup } from "./groups/StorageGroup.js"
import { SystemGroup } from "./groups/SystemGroup.js"

export class PorticoApi extends HttpApi.make("portico")
  .add(SystemGroup)
  .add(AuthGroup)
  .add(NamespaceGroup)
  .add(NamespaceBackupGroup)
  .add(NamespaceDeleteGroup)
  .add(NamespaceCreateGroup)
  .add(OperatorGroup)
  .add(NetworkGroup)
  .add(NodeGroup)
  .add(JoinGroup)
  .add(NodeStampGroup)
  .add(EdgeGroup)
  .add(CorsGroup)
  .add(AuditGroup)
  .add(DeviceGroup)
  .add(CacheGroup)
  .add(DatabaseGroup)
  .add(SqlGroup)
  .add(StorageGroup)
  .add(PushGroup)
  .add(PushRegistrationGroup)
  .add(PushSendGroup)
  .add(PushRelayGroup)
  .add(ProxyGroup)
  .add(PubSubGroup)
  .add(VaultGroup)
  .add(WebRtcNamespaceGroup)
  .add(WebRtcGroup)
  .add(WebRtcEventsGroup)
  .add(FunctionsGroup)
  .add(InvokeGroup)
  .add(DeploymentsGroup)
  .add(DeploymentDomainsGroup)
  .add(DeploymentRuntimeGroup)
  .add(InternalGroup)
  // what any route can answer: its input refused by its schema or as JSON, a body over its cap,
  // a bug, a store that did not answer (the gates declare theirs in Gates.ts)
  .addError(Wire.ValidationFailed)
  .addError(Wire.MalformedJson)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.Internal)
  .addError(Wire.Unavailable)
  .annotate(OpenApi.Title, "Portico")
  .annotate(OpenApi.Description, "Multi-tenant application platform gateway. Every error body is {error, code, hint?}.")
  .annotate(OpenApi.Version, "v1")
  .annotate(OpenApi.Transform, (spec) => openApiDocument(spec, walletOnly())) {}

/** The operations whose policy takes only a wallet's session (OpenApiDocument.ts `WalletOnly`). */
const walletOnly = (): WalletOnly => {
  const kinds = new Map<string, "wallet" | "operator">()
  HttpApi.reflect(PorticoApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group, mergedAnnotations }) => {
      const policy = Context.getOption(mergedAnnotations, RoutePolicy)
      if (Option.isSome(policy) && (policy.value.kind === "wallet" || policy.value.kind === "operator")) {
        kinds.set(`${group.identifier}.${endpoint.name}`, policy.value.kind)
      }
    }
  })
  return (operationId) => kinds.get(operationId)
}
