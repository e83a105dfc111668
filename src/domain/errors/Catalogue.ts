/**
 * The error catalogue: one tagged error class per wire code, and nothing else answers a refusal.
 * Each class holds the wire body `{error, code, hint?}` with `code` a literal (filled in by the
 * constructor: `new NotFound({ error })`), and its HTTP status annotated, so HttpApi picks the
 * status, the typed client decodes the class, and the OpenAPI document lists the code as an
 * enumeration. A code has exactly one status. 429 and 503 classes also carry
 * `retryAfterSeconds`, sent as `Retry-After`, never in the body.
 *
 * The class is the type side; its wire form (no `_tag`) is in Wire.ts.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

const codeField = <C extends string>(code: C) =>
  Schema.propertySignature(Schema.Literal(code)).pipe(Schema.withConstructorDefault(() => code))

const envelope = <C extends string>(code: C) => ({
  error: Schema.String,
  code: codeField(code),
  hint: Schema.optional(Schema.String)
})

/** A refusal the client should retry: the seconds travel as `Retry-After`. */
const retried = <C extends string>(code: C) => ({ ...envelope(code), retryAfterSeconds: Schema.optional(Schema.Number) })

const status = <A>(status: number) => HttpApiSchema.annotations<A>({ status })

// 400
/** The body, path or query does not match the route's schema, or a service's rule on a value. */
export class ValidationFailed extends Schema.TaggedError<ValidationFailed>()("ValidationFailed", envelope("VALIDATION_FAILED"), status(400)) {}
/** The body is not (strict, UTF-8) JSON. */
export class MalformedJson extends Schema.TaggedError<MalformedJson>()("MalformedJson", envelope("MALFORMED_JSON"), status(400)) {}
/** A rule about the request as a whole (a JWT where an API key is needed, a malformed upload). */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", envelope("BAD_REQUEST"), status(400)) {}
export class SqlError extends Schema.TaggedError<SqlError>()("SqlError", envelope("SQL_ERROR"), status(400)) {}
export class TransactionFailed extends Schema.TaggedError<TransactionFailed>()("TransactionFailed", envelope("TRANSACTION_FAILED"), status(400)) {}
export class StatementTimeout extends Schema.TaggedError<StatementTimeout>()("StatementTimeout", envelope("STATEMENT_TIMEOUT"), status(400)) {}
export class FetchCapNotAlone extends Schema.TaggedError<FetchCapNotAlone>()("FetchCapNotAlone", envelope("FETCH_CAP_NOT_ALONE"), status(400)) {}
/** An anonymity proxy destination the rules refuse: a private or local host, a port not 80 or 443 (docs/proxy.md). */
export class RelayDestinationNotAllowed extends Schema.TaggedError<RelayDestinationNotAllowed>()("RelayDestinationNotAllowed", envelope("RELAY_DESTINATION_NOT_ALLOWED"), status(400)) {}
export class DeviceKeyInvalid extends Schema.TaggedError<DeviceKeyInvalid>()("DeviceKeyInvalid", envelope("DEVICE_KEY_INVALID"), status(400)) {}
/** A Node.js app's install failed: npm refused it, or it passed its time limit (docs/deployments.md, "Preparing an app"). */
export class InstallFailed extends Schema.TaggedError<InstallFailed>()("InstallFailed", envelope("INSTALL_FAILED"), status(400)) {}
/** A custom domain's TXT record `_portico-verify.<domain>` is missing or does not hold its token (docs/deployments.md, "Custom domains"). */
export class DomainNotVerified extends Schema.TaggedError<DomainNotVerified>()("DomainNotVerified", envelope("DOMAIN_NOT_VERIFIED"), status(400)) {}
// the device-login token endpoint answers OAuth's own codes (RFC 8628 §3.5), in their spelling
export class InvalidGrant extends Schema.TaggedError<InvalidGrant>()("InvalidGrant", envelope("invalid_grant"), status(400)) {}
export class ExpiredToken extends Schema.TaggedError<ExpiredToken>()("ExpiredToken", envelope("expired_token"), status(400)) {}
export class AccessDenied extends Schema.TaggedError<AccessDenied>()("AccessDenied", envelope("access_denied"), status(400)) {}
export class SlowDown extends Schema.TaggedError<SlowDown>()("SlowDown", envelope("slow_down"), status(400)) {}
export class AuthorizationPending extends Schema.TaggedError<AuthorizationPending>()("AuthorizationPending", envelope("authorization_pending"), status(400)) {}

// 401
/** No `Authorization: Bearer …`, or a malformed one. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", envelope("UNAUTHORIZED"), status(401)) {}
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", envelope("INVALID_TOKEN"), status(401)) {}
export class InvalidApiKey extends Schema.TaggedError<InvalidApiKey>()("InvalidApiKey", envelope("INVALID_API_KEY"), status(401)) {}
export class InvalidRefreshToken extends Schema.TaggedError<InvalidRefreshToken>()("InvalidRefreshToken", envelope("INVALID_REFRESH_TOKEN"), status(401)) {}
export class SignatureInvalid extends Schema.TaggedError<SignatureInvalid>()("SignatureInvalid", envelope("SIGNATURE_INVALID"), status(401)) {}
export class DeviceSignatureInvalid extends Schema.TaggedError<DeviceSignatureInvalid>()("DeviceSignatureInvalid", envelope("DEVICE_SIGNATURE_INVALID"), status(401)) {}
export class DeviceProofRequired extends Schema.TaggedError<DeviceProofRequired>()("DeviceProofRequired", envelope("DEVICE_PROOF_REQUIRED"), status(401)) {}
export class DeviceProofInvalid extends Schema.TaggedError<DeviceProofInvalid>()("DeviceProofInvalid", envelope("DEVICE_PROOF_INVALID"), status(401)) {}
export class FetchCapMissing extends Schema.TaggedError<FetchCapMissing>()("FetchCapMissing", envelope("FETCH_CAP_MISSING"), status(401)) {}

// 403
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", envelope("FORBIDDEN"), status(403)) {}
export class GrantRequired extends Schema.TaggedError<GrantRequired>()("GrantRequired", envelope("GRANT_REQUIRED"), status(403)) {}
export class ControlPlaneRequired extends Schema.TaggedError<ControlPlaneRequired>()("ControlPlaneRequired", envelope("CONTROL_PLANE_REQUIRED"), status(403)) {}
export class OwnerRequired extends Schema.TaggedError<OwnerRequired>()("OwnerRequired", envelope("OWNER_REQUIRED"), status(403)) {}
export class NotAnOperator extends Schema.TaggedError<NotAnOperator>()("NotAnOperator", envelope("NOT_AN_OPERATOR"), status(403)) {}
/**
 * A platform realm session (a wallet signed in without a namespace) on a route of a namespace: the
 * token is valid, it names no namespace the route could act in (spec §7: 403 when the namespace
 * could not be resolved).
 */
export class NamespaceRequired extends Schema.TaggedError<NamespaceRequired>()("NamespaceRequired", envelope("NAMESPACE_REQUIRED"), status(403)) {}
/** An ownership transfer to a wallet already at its namespace cap (spec §4.9: generic, naming no cap). */
export class TransferRefused extends Schema.TaggedError<TransferRefused>()("TransferRefused", envelope("TRANSFER_REFUSED"), status(403)) {}
/** A session-only route called with an API key (or a token exchanged from one): the gate's one answer. */
export class SessionRequired extends Schema.TaggedError<SessionRequired>()("SessionRequired", envelope("SESSION_REQUIRED"), status(403)) {}
/** `POST /v1/auth/renew` called with anything but a deployed app's workload token (spec §4.5). */
export class WorkloadTokenRequired extends Schema.TaggedError<WorkloadTokenRequired>()("WorkloadTokenRequired", envelope("WORKLOAD_TOKEN_REQUIRED"), status(403)) {}
/** A node-to-node route refused the calling node's coordination (source, MAC, time, replay): only gateways see it. */
export class CoordinationRefused extends Schema.TaggedError<CoordinationRefused>()("CoordinationRefused", envelope("COORDINATION_REFUSED"), status(403)) {}
export class SqlNotAllowed extends Schema.TaggedError<SqlNotAllowed>()("SqlNotAllowed", envelope("SQL_NOT_ALLOWED"), status(403)) {}
export class NotAMember extends Schema.TaggedError<NotAMember>()("NotAMember", envelope("NOT_A_MEMBER"), status(403)) {}
export class DeviceRequired extends Schema.TaggedError<DeviceRequired>()("DeviceRequired", envelope("DEVICE_REQUIRED"), status(403)) {}
export class DeviceRevoked extends Schema.TaggedError<DeviceRevoked>()("DeviceRevoked", envelope("DEVICE_REVOKED"), status(403)) {}
export class DevicePending extends Schema.TaggedError<DevicePending>()("DevicePending", envelope("DEVICE_PENDING"), status(403)) {}
export class DeviceKeyTaken extends Schema.TaggedError<DeviceKeyTaken>()("DeviceKeyTaken", envelope("DEVICE_KEY_TAKEN"), status(403)) {}
export class FetchCapInvalid extends Schema.TaggedError<FetchCapInvalid>()("FetchCapInvalid", envelope("FETCH_CAP_INVALID"), status(403)) {}
export class FetchCapRevoked extends Schema.TaggedError<FetchCapRevoked>()("FetchCapRevoked", envelope("FETCH_CAP_REVOKED"), status(403)) {}
export class FetchCapDeviceRequired extends Schema.TaggedError<FetchCapDeviceRequired>()("FetchCapDeviceRequired", envelope("FETCH_CAP_DEVICE_REQUIRED"), status(403)) {}
export class FetchCapRevokeKeyInvalid extends Schema.TaggedError<FetchCapRevokeKeyInvalid>()("FetchCapRevokeKeyInvalid", envelope("FETCH_CAP_REVOKE_KEY_INVALID"), status(403)) {}

// 404, 405, 408, 409, 413, 416
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", envelope("NOT_FOUND"), status(404)) {}
export class DeviceNotFound extends Schema.TaggedError<DeviceNotFound>()("DeviceNotFound", envelope("DEVICE_NOT_FOUND"), status(404)) {}
/** No route has this path (answered before any endpoint). */
export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()("RouteNotFound", envelope("ROUTE_NOT_FOUND"), status(404)) {}
/** The path exists with other methods (answered before any endpoint; `Allow` lists them). */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", envelope("METHOD_NOT_ALLOWED"), status(405)) {}
/** Headers or a body too slow (answered by the listener). */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", envelope("REQUEST_TIMEOUT"), status(408)) {}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", envelope("CONFLICT"), status(409)) {}
export class NamespaceExists extends Schema.TaggedError<NamespaceExists>()("NamespaceExists", envelope("NAMESPACE_EXISTS"), status(409)) {}
/** A deletion of this name still runs or is owed (spec §4.9): retry after `Retry-After`. */
export class NamespaceTeardownPending extends Schema.TaggedError<NamespaceTeardownPending>()("NamespaceTeardownPending", retried("NAMESPACE_TEARDOWN_PENDING"), status(409)) {}
/** A deletion of this namespace is running on some gateway (spec §4.9): retry after `Retry-After`. */
export class NamespaceDeleteInProgress extends Schema.TaggedError<NamespaceDeleteInProgress>()("NamespaceDeleteInProgress", retried("NAMESPACE_DELETE_IN_PROGRESS"), status(409)) {}
/** A namespace restore into a namespace that already holds data (docs/namespaces.md "Backup and restore"). */
export class NamespaceNotEmpty extends Schema.TaggedError<NamespaceNotEmpty>()("NamespaceNotEmpty", envelope("NAMESPACE_NOT_EMPTY"), status(409)) {}
export class DatabaseExists extends Schema.TaggedError<DatabaseExists>()("DatabaseExists", envelope("DATABASE_EXISTS"), status(409)) {}
/** A deployment of this name exists in the namespace (spec §4.8: use update). */
export class DeploymentExists extends Schema.TaggedError<DeploymentExists>()("DeploymentExists", envelope("DEPLOYMENT_EXISTS"), status(409)) {}
/** `<namespace>-<name>`'s directory on this node belongs to another deployment (spec §4.8). */
export class InstanceCollision extends Schema.TaggedError<InstanceCollision>()("InstanceCollision", envelope("INSTANCE_COLLISION"), status(409)) {}
/** The deployment's stored environment moved under an environment change's compare-and-swap: rerun. */
export class EnvChanged extends Schema.TaggedError<EnvChanged>()("EnvChanged", envelope("ENV_CHANGED"), status(409)) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", envelope("PAYLOAD_TOO_LARGE"), status(413)) {}
export class RangeNotSatisfiable extends Schema.TaggedError<RangeNotSatisfiable>()("RangeNotSatisfiable", envelope("RANGE_NOT_SATISFIABLE"), status(416)) {}

// 429, 431, 500, 503
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", retried("RATE_LIMITED"), status(429)) {}
/** Headers over node's limit (answered by node's parser, before any route). */
export class HeadersTooLarge extends Schema.TaggedError<HeadersTooLarge>()("HeadersTooLarge", envelope("HEADERS_TOO_LARGE"), status(431)) {}
/** A bug: the detail goes to the log only. */
export class Internal extends Schema.TaggedError<Internal>()("Internal", envelope("INTERNAL"), status(500)) {}
/** A namespace deletion could not even be recorded (spec §4.9: 500, retryable); nothing was removed. */
export class NamespaceDeleteFailed extends Schema.TaggedError<NamespaceDeleteFailed>()("NamespaceDeleteFailed", retried("NAMESPACE_DELETE_FAILED"), status(500)) {}
/** A Node.js dependency the server-side install may not fetch (git, URL, file, link, path, workspaces); spec §4.8 says 500 naming it. */
export class DependencyRefused extends Schema.TaggedError<DependencyRefused>()("DependencyRefused", envelope("DEPENDENCY_REFUSED"), status(500)) {}
/**
 * A push provider refused a topic send (spec §4.6: 502): it answered the one device of the topic
 * with a 4xx that is not "this token is gone" (a refused provider token, a wrong topic, the relay's
 * access refused). A timeout, a 5xx or a broken connection is not this: the envelope reports it.
 */
export class PushProviderRefused extends Schema.TaggedError<PushProviderRefused>()("PushProviderRefused", envelope("PUSH_PROVIDER_REFUSED"), status(502)) {}
/** A deployed app's host: the app did not accept the connection or did not answer in time (docs/deployments.md, "Serving"). */
export class AppUnreachable extends Schema.TaggedError<AppUnreachable>()("AppUnreachable", envelope("APP_UNREACHABLE"), status(502)) {}
/** A deployed app did not answer 200 on its health path within 60 s of its start (docs/deployments.md, "The runtime"). */
export class AppStartFailed extends Schema.TaggedError<AppStartFailed>()("AppStartFailed", envelope("APP_START_FAILED"), status(502)) {}
/** An update, rollback or environment change applied on the home node but not on every active replica (spec §4.8: 502, how many applied and each failing node). */
export class ReplicasFailed extends Schema.TaggedError<ReplicasFailed>()("ReplicasFailed", envelope("REPLICAS_FAILED"), status(502)) {}
/** A function trapped, exited non-zero, wrote more than its output cap, or could not be linked (docs/functions.md, "Answers"). */
export class FunctionFailed extends Schema.TaggedError<FunctionFailed>()("FunctionFailed", envelope("FUNCTION_FAILED"), status(502)) {}
/** A tunnel's destination did not accept the stream through the anonymity network (spec §7: 502, a generic message). */
export class RelayDestinationUnreachable extends Schema.TaggedError<RelayDestinationUnreachable>()("RelayDestinationUnreachable", envelope("RELAY_DESTINATION_UNREACHABLE"), status(502)) {}
/** `/v1/network/connect`: the address refused the connection, answered as no node, or as another node than the one named (spec §4.9: 502). */
export class PeerDialFailed extends Schema.TaggedError<PeerDialFailed>()("PeerDialFailed", envelope("PEER_DIAL_FAILED"), status(502)) {}
/** `/v1/network/connect`: the address did not answer within 10 s (spec §4.9: 504). */
export class PeerDialTimeout extends Schema.TaggedError<PeerDialTimeout>()("PeerDialTimeout", envelope("PEER_DIAL_TIMEOUT"), status(504)) {}
/** No SOCKS upstream configured, or it is down: the proxy never falls back to a direct dial (spec §7). */
export class RelayUnavailable extends Schema.TaggedError<RelayUnavailable>()("RelayUnavailable", retried("RELAY_UNAVAILABLE"), status(503)) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", retried("UNAVAILABLE"), status(503)) {}
/** A namespace could not be provisioned (spec §4.9: a fixed message; the detail goes to the log). */
export class NamespaceProvisionFailed extends Schema.TaggedError<NamespaceProvisionFailed>()("NamespaceProvisionFailed", envelope("NAMESPACE_PROVISION_FAILED"), status(503)) {}
/** The gateway hosts as many namespaces as it may (spec §4.9: not cleared by retrying, so no `Retry-After`). */
export class NamespaceCapacity extends Schema.TaggedError<NamespaceCapacity>()("NamespaceCapacity", envelope("NAMESPACE_CAPACITY"), status(503)) {}
/** A function's module could not be read from content storage or compiled, or the function runner is down (docs/functions.md). */
export class FunctionUnavailable extends Schema.TaggedError<FunctionUnavailable>()("FunctionUnavailable", retried("FUNCTION_UNAVAILABLE"), status(503)) {}
/** A function ran past its deadline and was stopped (docs/functions.md, "Isolation"). */
export class FunctionTimeout extends Schema.TaggedError<FunctionTimeout>()("FunctionTimeout", envelope("FUNCTION_TIMEOUT"), status(504)) {}
export class HomeNodeUnreachable extends Schema.TaggedError<HomeNodeUnreachable>()("HomeNodeUnreachable", retried("HOME_NODE_UNREACHABLE"), status(503)) {}
export class FetchCapUnavailable extends Schema.TaggedError<FetchCapUnavailable>()("FetchCapUnavailable", retried("FETCH_CAP_UNAVAILABLE"), status(503)) {}
export class PolicySweepIncomplete extends Schema.TaggedError<PolicySweepIncomplete>()("PolicySweepIncomplete", retried("POLICY_SWEEP_INCOMPLETE"), status(503)) {}
/**
 * The namespace has no push credential stored and the gateway no platform relay (spec §4.6): push
 * registrations and sends wait for the tenant's configuration, so no `Retry-After` is sent.
 */
export class PushNotConfigured extends Schema.TaggedError<PushNotConfigured>()("PushNotConfigured", envelope("PUSH_NOT_CONFIGURED"), status(503)) {}

/** Every class of the catalogue, by its tag. */
export const catalogue = {
  ValidationFailed,
  MalformedJson,
  BadRequest,
  SqlError,
  TransactionFailed,
  StatementTimeout,
  FetchCapNotAlone,
  RelayDestinationNotAllowed,
  DeviceKeyInvalid,
  InvalidGrant,
  ExpiredToken,
  AccessDenied,
  SlowDown,
  AuthorizationPending,
  Unauthorized,
  InvalidToken,
  InvalidApiKey,
  InvalidRefreshToken,
  SignatureInvalid,
  DeviceSignatureInvalid,
  DeviceProofRequired,
  DeviceProofInvalid,
  FetchCapMissing,
  Forbidden,
  GrantRequired,
  ControlPlaneRequired,
  OwnerRequired,
  NotAnOperator,
  NamespaceRequired,
  TransferRefused,
  SessionRequired,
  WorkloadTokenRequired,
  CoordinationRefused,
  SqlNotAllowed,
  NotAMember,
  DeviceRequired,
  DeviceRevoked,
  DevicePending,
  DeviceKeyTaken,
  FetchCapInvalid,
  FetchCapRevoked,
  FetchCapDeviceRequired,
  FetchCapRevokeKeyInvalid,
  NotFound,
  DeviceNotFound,
  RouteNotFound,
  MethodNotAllowed,
  RequestTimeout,
  Conflict,
  NamespaceExists,
  NamespaceTeardownPending,
  NamespaceDeleteInProgress,
  NamespaceNotEmpty,
  DatabaseExists,
  DeploymentExists,
  InstanceCollision,
  EnvChanged,
  InstallFailed,
  DomainNotVerified,
  PayloadTooLarge,
  RangeNotSatisfiable,
  RateLimited,
  HeadersTooLarge,
  Internal,
  NamespaceDeleteFailed,
  DependencyRefused,
  PushProviderRefused,
  AppUnreachable,
  FunctionFailed,
  FunctionUnavailable,
  FunctionTimeout,
  AppStartFailed,
  ReplicasFailed,
  RelayDestinationUnreachable,
  PeerDialFailed,
  PeerDialTimeout,
  RelayUnavailable,
  Unavailable,
  NamespaceProvisionFailed,
  NamespaceCapacity,
  HomeNodeUnreachable,
  FetchCapUnavailable,
  PolicySweepIncomplete,
  PushNotConfigured
} as const

export type Catalogue = typeof catalogue
/** Every API error. */
export type ApiError = InstanceType<Catalogue[keyof Catalogue]>
/** Every wire code. */
export type ErrorCode = ApiError["code"]
/** The class of a code. */
export type ErrorOf<C extends ErrorCode> = Extract<ApiError, { readonly code: C }>
