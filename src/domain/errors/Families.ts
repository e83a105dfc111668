/**
 * The codes each service family refuses with. A service types its refusal with its family's
 * codes (a code outside it does not compile), and the route group that calls it declares the
 * same list (`.addError(wiresOf(CacheRefusals))`), so what an endpoint declares is what it can
 * answer.
 */
import type { ErrorCode } from "./Catalogue.js"

const family = <const Cs extends ReadonlyArray<ErrorCode>>(...codes: Cs): Cs => codes

/** Cache rules (src/layers/cache/Cache.ts) and its engine being down. */
export const CacheRefusals = family("VALIDATION_FAILED", "GRANT_REQUIRED", "NOT_FOUND", "PAYLOAD_TOO_LARGE", "UNAVAILABLE")
export type CacheCode = (typeof CacheRefusals)[number]

/** Namespace rules: members, ownership offers, creation (src/layers/namespaces). */
export const NamespaceRefusals = family(
  "VALIDATION_FAILED",
  "FORBIDDEN",
  "OWNER_REQUIRED",
  "CONTROL_PLANE_REQUIRED",
  "NOT_FOUND",
  "CONFLICT",
  "NAMESPACE_EXISTS"
)
export type NamespaceCode = (typeof NamespaceRefusals)[number]

/** Creating a namespace over HTTP (src/layers/namespaces/NamespaceCreation.ts). */
export const NamespaceCreateRefusals = family(
  "VALIDATION_FAILED",
  "FORBIDDEN",
  "NAMESPACE_EXISTS",
  "NAMESPACE_TEARDOWN_PENDING",
  "NAMESPACE_PROVISION_FAILED",
  "NAMESPACE_CAPACITY",
  "UNAVAILABLE"
)
export type NamespaceCreateCode = (typeof NamespaceCreateRefusals)[number]

/** The operator plane's rules: invites, the lists, settings (src/layers/operators). */
export const OperatorRefusals = family("VALIDATION_FAILED", "FORBIDDEN", "NOT_FOUND", "CONFLICT", "UNAVAILABLE")
export type OperatorCode = (typeof OperatorRefusals)[number]

/** The network routes (src/layers/network/Network.ts): connecting a node by its address. */
export const NetworkRefusals = family("VALIDATION_FAILED", "FORBIDDEN", "PEER_DIAL_FAILED", "PEER_DIAL_TIMEOUT", "UNAVAILABLE")
export type NetworkCode = (typeof NetworkRefusals)[number]

/** Deleting a namespace and everything it holds (src/layers/namespaces/NamespaceTeardown.ts). */
export const TeardownRefusals = family("VALIDATION_FAILED", "FORBIDDEN", "NAMESPACE_DELETE_IN_PROGRESS", "NAMESPACE_DELETE_FAILED")
export type TeardownCode = (typeof TeardownRefusals)[number]

/** Minting an API key beyond the caller's own grants or namespace (src/layers/keys). */
export const MintRefusals = family("FORBIDDEN", "GRANT_REQUIRED")
export type MintCode = (typeof MintRefusals)[number]

/** Sign-in, sessions, the device flow and devices (src/layers/sessions, src/layers/devices). */
export const SessionRefusals = family(
  "VALIDATION_FAILED",
  "DEVICE_KEY_INVALID",
  "invalid_grant",
  "expired_token",
  "access_denied",
  "slow_down",
  "authorization_pending",
  "SIGNATURE_INVALID",
  "DEVICE_SIGNATURE_INVALID",
  "DEVICE_PROOF_REQUIRED",
  "DEVICE_PROOF_INVALID",
  "INVALID_REFRESH_TOKEN",
  "FORBIDDEN",
  "NOT_A_MEMBER",
  "DEVICE_REQUIRED",
  "DEVICE_REVOKED",
  "DEVICE_PENDING",
  "DEVICE_KEY_TAKEN",
  "NOT_FOUND",
  "DEVICE_NOT_FOUND"
)
export type SessionCode = (typeof SessionRefusals)[number]

/** A transfer (import, export, backup) waiting for or running over its slot (src/layers/transfer). */
export const TransferRefusals = family("RATE_LIMITED", "UNAVAILABLE")
export type TransferCode = (typeof TransferRefusals)[number]

/** Node-local databases and the cluster SQL store (src/layers/sql), transfers included. */
export const SqlRefusals = family(
  "VALIDATION_FAILED",
  "BAD_REQUEST",
  "SQL_ERROR",
  "TRANSACTION_FAILED",
  "STATEMENT_TIMEOUT",
  "SQL_NOT_ALLOWED",
  "NOT_FOUND",
  "DATABASE_EXISTS",
  "PAYLOAD_TOO_LARGE",
  ...TransferRefusals,
  "HOME_NODE_UNREACHABLE"
)
export type SqlCode = (typeof SqlRefusals)[number]

/** Storage and fetch capabilities (src/layers/storage). */
export const StorageRefusals = family(
  "VALIDATION_FAILED",
  "BAD_REQUEST",
  "GRANT_REQUIRED",
  "FETCH_CAP_INVALID",
  "FETCH_CAP_REVOKED",
  "FETCH_CAP_DEVICE_REQUIRED",
  "FETCH_CAP_REVOKE_KEY_INVALID",
  "NOT_FOUND",
  "PAYLOAD_TOO_LARGE",
  "UNAVAILABLE",
  "FETCH_CAP_UNAVAILABLE"
)
export type StorageCode = (typeof StorageRefusals)[number]

/**
 * Push device and topic registrations (src/layers/push/Registrations.ts): a field refused, a
 * registration or topic not there, no push configured, a topic write the registry refused (500,
 * spec §9's status table).
 */
export const PushRegistrationRefusals = family("VALIDATION_FAILED", "NOT_FOUND", "PUSH_NOT_CONFIGURED", "INTERNAL")
export type PushRegistrationCode = (typeof PushRegistrationRefusals)[number]

/**
 * Push sends (src/layers/push/PushSender.ts): a message refused (an APNs payload over 4096 bytes,
 * a malformed topic id), an unknown or expired topic, the topic's provider refusing (502), no push
 * configured (503).
 */
export const PushSendRefusals = family("VALIDATION_FAILED", "NOT_FOUND", "PUSH_PROVIDER_REFUSED", "PUSH_NOT_CONFIGURED")
export type PushSendCode = (typeof PushSendRefusals)[number]

/**
 * Deployment records, versions, environment, grants and domains (src/layers/deployments/
 * DeploymentStore.ts) and the instance directory claim (InstanceDirs.ts): a rule on a value, a
 * record not there, a taken name, domain or directory, a compare-and-swap lost, no free app port
 * or the deployment lock held too long (503).
 */
export const DeploymentRecordRefusals = family(
  "VALIDATION_FAILED",
  "NOT_FOUND",
  "CONFLICT",
  "DEPLOYMENT_EXISTS",
  "INSTANCE_COLLISION",
  "ENV_CHANGED",
  "UNAVAILABLE"
)
export type DeploymentRecordCode = (typeof DeploymentRecordRefusals)[number]

/**
 * Starting a deployed app (src/layers/deployments/runtime/AppRuntime.ts): it did not get healthy,
 * or this gateway cannot run sandboxed apps.
 */
export const AppRuntimeRefusals = family("APP_START_FAILED", "UNAVAILABLE")
export type AppRuntimeCode = (typeof AppRuntimeRefusals)[number]

/** The logs and stats routes (src/api/groups/DeploymentRuntimeGroup.ts): no such deployment in the namespace. */
export const DeploymentRuntimeRouteRefusals = family("VALIDATION_FAILED", "NOT_FOUND", "UNAVAILABLE")

/**
 * Preparing an uploaded app to run (src/layers/deployments/build/AppBuilds.ts): an unusable app,
 * a dependency the install may not fetch, an install npm refused or that ran out of time, or no
 * sandbox to install in.
 */
export const AppBuildRefusals = family("VALIDATION_FAILED", "DEPENDENCY_REFUSED", "INSTALL_FAILED", "UNAVAILABLE")
export type AppBuildCode = (typeof AppBuildRefusals)[number]

/**
 * The deployments routes (src/layers/deployments/Deployments.ts): the record's rules, a form or
 * archive refused (400, 413 past a cap), preparing and starting the app, the platform's own write
 * failing (500), the app's home node not answering a change forwarded to it (503).
 */
export const DeploymentRouteRefusals = family(
  "VALIDATION_FAILED",
  "BAD_REQUEST",
  "NOT_FOUND",
  "CONFLICT",
  "DEPLOYMENT_EXISTS",
  "INSTANCE_COLLISION",
  "ENV_CHANGED",
  "PAYLOAD_TOO_LARGE",
  "APP_START_FAILED",
  "REPLICAS_FAILED",
  "DEPENDENCY_REFUSED",
  "INSTALL_FAILED",
  "INTERNAL",
  "UNAVAILABLE",
  "HOME_NODE_UNREACHABLE"
)
export type DeploymentRouteCode = (typeof DeploymentRouteRefusals)[number]

/**
 * A deployment's custom domains (src/layers/deployments/DeploymentDomains.ts): a name refused or
 * over the cap, no such deployment or domain, a domain taken, its TXT record missing or wrong,
 * DNS or the registry not answering (503).
 */
export const DeploymentDomainRefusals = family("VALIDATION_FAILED", "NOT_FOUND", "CONFLICT", "DOMAIN_NOT_VERIFIED", "UNAVAILABLE")
export type DeploymentDomainCode = (typeof DeploymentDomainRefusals)[number]

/**
 * The anonymity proxy's one-shot requests (src/layers/proxy/AnonRequests.ts): a destination or
 * header refused, a body over its cap, too many in flight, no SOCKS upstream or it down (docs/proxy.md).
 */
export const ProxyRefusals = family("VALIDATION_FAILED", "RELAY_DESTINATION_NOT_ALLOWED", "PAYLOAD_TOO_LARGE", "RATE_LIMITED", "RELAY_UNAVAILABLE")
export type ProxyCode = (typeof ProxyRefusals)[number]

/** Publish/subscribe's rules (src/layers/pubsub/PubSub.ts) and its engine being down or slow. */
export const PubSubRefusals = family("VALIDATION_FAILED", "FORBIDDEN", "GRANT_REQUIRED", "PAYLOAD_TOO_LARGE", "RATE_LIMITED", "UNAVAILABLE")
export type PubSubCode = (typeof PubSubRefusals)[number]

/** Functions' control plane (src/layers/functions/Functions.ts): a module or setting refused, no such function or version, content storage down. */
export const FunctionRefusals = family("VALIDATION_FAILED", "BAD_REQUEST", "FORBIDDEN", "NOT_FOUND", "PAYLOAD_TOO_LARGE", "UNAVAILABLE")
export type FunctionCode = (typeof FunctionRefusals)[number]

/** Invoking a function or opening its socket (src/layers/functions/Invocations.ts): refused, over a budget, or ended badly. */
export const InvokeRefusals = family(
  "BAD_REQUEST",
  "NOT_FOUND",
  "FORBIDDEN",
  "PAYLOAD_TOO_LARGE",
  "RATE_LIMITED",
  "FUNCTION_FAILED",
  "FUNCTION_TIMEOUT",
  "FUNCTION_UNAVAILABLE"
)
export type InvokeCode = (typeof InvokeRefusals)[number]

/** Renewing a workload token (src/layers/workload/WorkloadTokens.ts): not a workload's, or its deployment gone. */
export const WorkloadRefusals = family("WORKLOAD_TOKEN_REQUIRED", "INVALID_TOKEN")
export type WorkloadCode = (typeof WorkloadRefusals)[number]

/**
 * Answered before any endpoint is chosen (no route, another method, node's parser, a body too
 * slow), so no endpoint declares them and the OpenAPI document does not list them. A deployed
 * app's host is answered before the API too (docs/deployments.md, "Serving"): APP_UNREACHABLE.
 */
export const ListenerRefusals = family("ROUTE_NOT_FOUND", "METHOD_NOT_ALLOWED", "REQUEST_TIMEOUT", "HEADERS_TOO_LARGE", "APP_UNREACHABLE")

/** The TLS edge's routes (src/layers/edge, docs/edge.md): its token, its storage and its DNS-01 records. */
export const EdgeRefusals = family("VALIDATION_FAILED", "UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND", "CONFLICT", "PAYLOAD_TOO_LARGE", "UNAVAILABLE")
export type EdgeCode = (typeof EdgeRefusals)[number]

/** Node administration: invites and joins, status, logs, commands, leaving (src/layers/nodes). */
export const NodeRefusals = family("VALIDATION_FAILED", "UNAUTHORIZED", "COORDINATION_REFUSED", "NOT_FOUND", "CONFLICT", "UNAVAILABLE")
export type NodeCode = (typeof NodeRefusals)[number]

/** The vault's rules (src/layers/vault/Vault.ts): the signed request, its limits and the guardians' quorum. */
export const VaultRefusals = family(
  "VALIDATION_FAILED",
  "SIGNATURE_INVALID",
  "NOT_FOUND",
  "CONFLICT",
  "PAYLOAD_TOO_LARGE",
  "RATE_LIMITED",
  "UNAVAILABLE"
)
export type VaultCode = (typeof VaultRefusals)[number]

/** Real-time media's settings and TURN credentials (src/layers/webrtc/WebRtc.ts). */
export const WebRtcRefusals = family("VALIDATION_FAILED", "FORBIDDEN", "RATE_LIMITED", "UNAVAILABLE")
export type WebRtcCode = (typeof WebRtcRefusals)[number]
/** A media server's participant events (src/layers/webrtc/RoomEvents.ts). */
export const WebRtcEventRefusals = family("VALIDATION_FAILED", "UNAUTHORIZED", "UNAVAILABLE")
export type WebRtcEventCode = (typeof WebRtcEventRefusals)[number]
