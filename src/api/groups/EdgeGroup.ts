/**
 * The TLS edge's routes (spec §4.10 `/v1/internal/tls/check`, `/v1/internal/tls-store`,
 * `/v1/internal/acme/present`, `cleanup`; docs/edge.md): called by the Caddy in front of this
 * gateway, on the same machine. Internal: no client reaches them (the edge's own configuration
 * answers 404 for `/v1/internal/` from outside), so they take no client credential; the check is
 * loopback only, and the rest also need the node's edge token (src/layers/edge/EdgeAccess.ts).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { EdgeRefusals, wiresOf } from "../../domain/Errors.js"
import { OpenGate } from "../Gates.js"
import { internalOnly } from "../OpenApiFacts.js"
import { open } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict } from "../Wire.js"

const tokenNote =
  "From this node's own machine only (a loopback source), with Authorization: Bearer <the token in <data dir>/edge.token>: 403 FORBIDDEN from elsewhere, 401 UNAUTHORIZED without the token."

/** A host name as a TLS client names it (SNI): labels of letters, digits, hyphens and underscores. */
export const HostName = Schema.String.pipe(
  Schema.maxLength(253),
  Schema.pattern(/^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/, {
    message: () => "a host name: dot-separated labels of letters, digits, '-' and '_', each at most 63 characters"
  })
)

/** A storage key: a path of printable ASCII, as Caddy's storage names certificates, keys and locks. */
const StoreKey = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,1024}$/, { message: () => "1-1024 printable ASCII characters, no spaces" })
)
/** The storage's root directory may be listed: the empty key. */
const StorePath = Schema.String.pipe(Schema.pattern(/^[\x21-\x7e]{0,1024}$/, { message: () => "0-1024 printable ASCII characters, no spaces" }))
/** The lock's holder: one edge process (a random id it chose at its start). */
const LockOwner = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{8,64}$/, { message: () => "8-64 of A-Z a-z 0-9 - _" }))
const Base64Value = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9+/]*={0,2}$/, { message: () => "standard base64" }),
  Schema.filter((s) => s.length % 4 === 0, { message: () => "standard base64, padded" })
)

const op = <L extends string, F extends Schema.Struct.Fields>(name: L, fields: F) =>
  strict(Schema.Struct({ op: Schema.Literal(name), ...fields }))

export const TlsStoreCall = Schema.Union(
  op("store", { key: StoreKey, value: Base64Value }),
  op("load", { key: StoreKey }),
  op("delete", { key: StoreKey }),
  op("exists", { key: StoreKey }),
  op("list", { key: StorePath, recursive: Schema.optional(Schema.Boolean) }),
  op("stat", { key: StoreKey }),
  op("lock", { key: StoreKey, owner: LockOwner }),
  op("unlock", { key: StoreKey, owner: LockOwner })
).annotations({ identifier: "TlsStoreCall" })

export const TlsStoreAnswer = Schema.Union(
  Schema.Struct({ op: Schema.Literal("store", "delete", "lock", "unlock") }),
  Schema.Struct({ op: Schema.Literal("load"), value: Schema.String.annotations({ description: "the value, standard base64" }) }),
  Schema.Struct({ op: Schema.Literal("exists"), exists: Schema.Boolean }),
  Schema.Struct({ op: Schema.Literal("list"), keys: Schema.Array(Schema.String) }),
  Schema.Struct({
    op: Schema.Literal("stat"),
    key: Schema.String,
    modified_ms: Schema.Number.annotations({ description: "Unix milliseconds of the last write (a directory: of the newest key under it)" }),
    size: Schema.Number,
    terminal: Schema.Boolean.annotations({ description: "false for a directory: a prefix of other keys" })
  })
).annotations({ identifier: "TlsStoreAnswer" })

export const AcmeRecord = strict(
  Schema.Struct({
    fqdn: HostName.annotations({ description: "the record's name, `_acme-challenge.<base domain>` or below it" }),
    value: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,255}$/, { message: () => "1-255 of A-Z a-z 0-9 - _ (a DNS-01 key authorization digest)" }))
  })
).annotations({ identifier: "AcmeRecord" })

export const TlsAllowed = Schema.Struct({
  domain: Schema.String,
  allowed: Schema.Literal(true),
  kind: Schema.Literal("platform", "namespace", "deployment", "custom-domain")
}).annotations({ identifier: "TlsAllowed" })

export class EdgeGroup extends HttpApiGroup.make("edge")
  .add(
    HttpApiEndpoint.get("tlsCheck", "/v1/internal/tls/check")
      .setUrlParams(strict(Schema.Struct({ domain: HostName })))
      .addSuccess(TlsAllowed)
      .addError(wiresOf(EdgeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(
        OpenApi.Description,
        "The edge's on-demand TLS ask: 200 when the edge may obtain a certificate for `domain` (the base domain, api., the ns- host of a namespace that exists, a deployment's host, a verified custom domain), 404 NOT_FOUND otherwise. From this node's own machine only (403 FORBIDDEN from elsewhere)."
      )
  )
  .add(
    HttpApiEndpoint.post("tlsStore", "/v1/internal/tls-store")
      .setPayload(TlsStoreCall)
      .addSuccess(TlsStoreAnswer)
      .addError(wiresOf(EdgeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(
        OpenApi.Description,
        `The edge's certificate storage, shared by every node: one operation per call (store, load, delete, exists, list, stat, lock, unlock), values sealed at rest. 404 NOT_FOUND for a load, list or stat of nothing; 409 CONFLICT for a lock another edge holds; 413 over 1 MiB. ${tokenNote}`
      )
  )
  .add(
    HttpApiEndpoint.post("acmePresent", "/v1/internal/acme/present")
      .setPayload(AcmeRecord)
      .addSuccess(Schema.Struct({ present: Schema.Literal(true) }))
      .addError(wiresOf(EdgeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(OpenApi.Description, `Holds a DNS-01 TXT record for the base domain's wildcard certificate; every node's DNS answer serves it. 403 FORBIDDEN for a name outside _acme-challenge.<base domain>. ${tokenNote}`)
  )
  .add(
    HttpApiEndpoint.post("acmeCleanup", "/v1/internal/acme/cleanup")
      .setPayload(AcmeRecord)
      .addSuccess(Schema.Struct({ cleaned: Schema.Literal(true) }))
      .addError(wiresOf(EdgeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(OpenApi.Description, `Drops a DNS-01 TXT record once its challenge is over (none held is no error). ${tokenNote}`)
  )
  .annotateEndpoints(OpenApi.Override, internalOnly) {}
