/**
 * Content storage (spec §2.4, §4.4). Field names the spec gives are kept as written (`Cid`,
 * `Status`, ... in the IPFS Cluster style; `evicted`, fetch-cap fields in snake case).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Context, Schema } from "effect"
import { CidParam } from "../../domain/ContentId.js"
import { StorageRefusals, Wire, wiresOf } from "../../domain/Errors.js"
import { FETCH_CAP_LIMITS, PIN_STATUSES } from "../../domain/Limits.js"
import { Authentication, OpenGate } from "../Gates.js"
import { rangedAnswers, streamedBody } from "../OpenApiFacts.js"
import { authenticated, open, sessionOrWorkload } from "../Policy.js"
import { BodyCap, RoutePolicy } from "../RouteFacts.js"
import { PlainTextOfAtMost, strict, UnixSeconds } from "../Wire.js"

const CidPath = Schema.Struct({ cid: CidParam })

export const Uploaded = Schema.Struct({
  Cid: Schema.String,
  Size: Schema.Int.annotations({ description: "the file's bytes" }),
  Name: Schema.String
}).annotations({ identifier: "StorageUploaded" })

export const PinRequest = strict(
  Schema.Struct({
    cid: CidParam,
    name: Schema.optional(PlainTextOfAtMost(255))
  })
).annotations({ identifier: "StoragePin" })

export const PinStatus = Schema.Struct({
  Cid: Schema.String,
  Name: Schema.String,
  Status: Schema.Literal(...PIN_STATUSES),
  ReplicationMin: Schema.Int,
  ReplicationMax: Schema.Int,
  ReplicationFactor: Schema.Int.annotations({ description: "peers holding it pinned now" }),
  Peers: Schema.Array(Schema.String).annotations({ description: "peers the pin is allocated to" }),
  Error: Schema.String
}).annotations({ identifier: "StoragePinStatus" })

export const UnpinQuery = Schema.Struct({
  immediate: Schema.optional(Schema.Literal("true", "false")).annotations({
    description: "true: when no reference is left, evict the blocks on every node now (a privacy delete)"
  })
})

export const Unpinned = Schema.Struct({
  Cid: Schema.String,
  evicted: Schema.Literal("true", "partial", "shared", "skipped")
}).annotations({ identifier: "StorageUnpinned" })

export const MintRequest = strict(
  Schema.Struct({
    cid: CidParam,
    count: Schema.Int.pipe(Schema.between(FETCH_CAP_LIMITS.minCount, FETCH_CAP_LIMITS.maxCount)),
    ttl_seconds: Schema.Int.pipe(Schema.between(FETCH_CAP_LIMITS.minTtl, FETCH_CAP_LIMITS.maxTtl))
  })
).annotations({ identifier: "FetchCapMint" })

export const Minted = Schema.Struct({
  namespace: Schema.String,
  cid: Schema.String,
  caps: Schema.Array(
    Schema.Struct({
      id: Schema.String.annotations({ description: "32 hexadecimal characters" }),
      token: Schema.String.annotations({ description: "send as X-Portico-Fetch-Cap" }),
      revoke_key: Schema.String.annotations({ description: "send as X-Portico-Revoke-Key to revoke" }),
      expires_at: UnixSeconds
    })
  )
}).annotations({ identifier: "FetchCaps" })

export const Revoked = Schema.Struct({ revoked: Schema.String }).annotations({ identifier: "FetchCapRevoked" })

const Bytes = HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }).annotations({
  description: "the content's bytes; Range requests answer 206"
})

/** The upload form: the file streamed into the blockstore by the handler, and an optional name. */
const uploadForm = streamedBody({
  contentType: "multipart/form-data",
  schema: {
    type: "object",
    required: ["file"],
    properties: {
      file: { type: "string", format: "binary", description: "the bytes; streamed to disk, never held whole" },
      name: { type: "string", maxLength: 255, pattern: "^[^\\x00-\\x1f\\x7f]*$", description: "a name for the pin (no control characters); defaults to the file's name" }
    },
    // any other part is refused (400): the form holds these two only
    additionalProperties: false
  },
  description: "multipart form with the file (upload cap and namespace quota: 413 past either)"
})

// A signed-in user's session token or a deployed app's workload token, never an API key alone
// (spec §5.6): these go through the gate of any credential, whose policy admits those two only,
// and the document names the session scheme, as for fetch-caps below, with the workload token in
// words. Fetch capabilities and relayed reads carry their own credentials (spec §4.4, §5.13).
const sessionScheme = { security: [{ session: [] }] }
const workloadsToo = "A deployed app's workload token is accepted as well (docs/deployments.md, \"Workload tokens\")."

export class StorageGroup extends HttpApiGroup.make("storage")
  .add(
    HttpApiEndpoint.post("upload", "/v1/storage/upload")
      .addSuccess(Uploaded)
      .annotate(BodyCap, "upload")
      // the form's override holds its request body: the scheme joins it
      .annotateContext(Context.add(uploadForm, OpenApi.Override, { ...Context.unsafeGet(uploadForm, OpenApi.Override), ...sessionScheme }))
      .annotate(OpenApi.Description, workloadsToo)
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/storage/get/:cid")
      .setPath(CidPath)
      .addSuccess(Bytes)
      .addError(Wire.RangeNotSatisfiable)
      .annotate(RoutePolicy, sessionOrWorkload("storage-read"))
      .annotate(OpenApi.Transform, rangedAnswers)
      .annotate(OpenApi.Override, sessionScheme)
      .annotate(OpenApi.Description, workloadsToo)
  )
  .add(
    HttpApiEndpoint.post("pin", "/v1/storage/pin")
      .setPayload(PinRequest)
      .addSuccess(PinStatus)
      .annotate(OpenApi.Override, sessionScheme)
      .annotate(OpenApi.Description, workloadsToo)
  )
  .add(
    HttpApiEndpoint.get("status", "/v1/storage/status/:cid")
      .setPath(CidPath)
      .addSuccess(PinStatus)
      .annotate(RoutePolicy, sessionOrWorkload("storage-read"))
      .annotate(OpenApi.Override, sessionScheme)
      .annotate(OpenApi.Description, workloadsToo)
  )
  .add(
    HttpApiEndpoint.del("unpin", "/v1/storage/unpin/:cid")
      .setPath(CidPath)
      .setUrlParams(strict(UnpinQuery))
      .addSuccess(Unpinned)
      .annotate(OpenApi.Override, sessionScheme)
      .annotate(OpenApi.Description, workloadsToo)
  )
  // the signed-in session's or the deployed app's content, behind the credential gate
  .middlewareEndpoints(Authentication)
  // any credential reaches the service, which answers FETCH_CAP_DEVICE_REQUIRED to anything but a
  // device-bound session (spec §4.4: "for an API key or workload token"), then checks storage-read
  .add(
    HttpApiEndpoint.post("mintFetchCaps", "/v1/storage/fetch-caps")
      .setPayload(MintRequest)
      .addSuccess(Minted)
      .middleware(Authentication)
      .annotate(RoutePolicy, authenticated)
      // what succeeds is a device-bound session only, so that is the credential the document names
      .annotate(OpenApi.Override, { security: [{ session: [] }] })
  )
  .add(
    HttpApiEndpoint.del("revokeFetchCap", "/v1/storage/fetch-caps/:id")
      .setPath(
        Schema.Struct({
          id: Schema.String.pipe(
            Schema.pattern(/^[0-9a-fA-F]{32}$/, { message: () => "a capability id is 32 hexadecimal characters" })
          ).annotations({ description: "the capability's id: 32 hexadecimal characters (case does not matter)" })
        })
      )
      .setHeaders(Schema.Struct({ "x-portico-revoke-key": Schema.optional(Schema.String) }))
      .addSuccess(Revoked)
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
  )
  .add(
    HttpApiEndpoint.get("relayed", "/v1/storage/relayed/:cid")
      .setPath(CidPath)
      .setHeaders(Schema.Struct({ "x-portico-fetch-cap": Schema.optional(Schema.String) }))
      .addSuccess(Bytes)
      .addError(Wire.FetchCapMissing)
      .addError(Wire.FetchCapNotAlone)
      .addError(Wire.RangeNotSatisfiable)
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(OpenApi.Transform, rangedAnswers)
  )
  .addError(wiresOf(StorageRefusals))
  // `storage` unless an endpoint says otherwise
  .annotate(RoutePolicy, sessionOrWorkload("storage")) {}
